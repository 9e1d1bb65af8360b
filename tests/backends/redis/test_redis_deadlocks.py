"""Deadlock detection on redis://: the functions' search (lua/45_deadlocks.lua) against
the engine's (tenure._core.deadlocks), and what the conformance kit cannot see there.

The differential test plays the same random acquires, upgrades, sets and releases of
sessions' tasks on the engine and on Redis (the functions called as a client's store
calls them) and asks both to decide: the same refusals, word for word, and the same
owners and waiters after each step. The others read the keys the search uses ('ow:',
'tw', 'dlk'), the limit the client sends, and a resume.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from typing import Any, Final

import pytest

import tenure
from tenure._core import (
    MAX_COUNT,
    Acquire,
    AcquireAll,
    AcquireAllResult,
    CreateNode,
    CreateSemaphore,
    CreateSession,
    DescribeSemaphore,
    Engine,
    Release,
)
from tenure.backends.redis._codec import encode_count
from tenure.backends.redis._commands import STATUS
from tenure.backends.redis._store import RedisStore
from tenure.errors import DeadlockError, TenureError
from tests.backends.listeners import Heard
from tests.backends.redis.places import Place, node_place, store_of
from tests.redis.server import RedisServer


@pytest.fixture
async def place(redis_server: RedisServer) -> AsyncIterator[Place]:
    async with node_place(redis_server, Place) as made:
        yield made


async def _redis_call(store: RedisStore, command: Any) -> Any:
    """``command`` as the client's store sends it (a set: as enqueue_all does)."""
    if not isinstance(command, AcquireAll):
        return await store.call(command)
    members = [
        part
        for name, hold, request_id in zip(
            command.names, command.holds, command.request_ids, strict=True
        )
        for part in (name, hold, request_id)
    ]
    result = await store.invoke(
        "acquire_all",
        store.backend.request_key(),
        encode_count(command.count),
        command.data,
        "",  # (no timeout: wait)
        "1" if command.ephemeral else "0",
        len(command.names),
        *members,
        command.task,
        store.conn.options.deadlock_search_limit,
    )
    return AcquireAllResult(STATUS[result[0]])


async def _apply(store: RedisStore, engine: Engine, command: Any) -> tuple[str, str]:
    """``command`` on Redis and on the engine: each one's outcome, as text."""
    outcomes = []
    for run in (_redis_call(store, command), _engine_call(engine, command)):
        try:
            result = await run
        except TenureError as error:
            outcomes.append(f"{type(error).__name__}: {error}")
        else:
            outcomes.append(str(getattr(result, "status", result)))
    return outcomes[0], outcomes[1]


async def _engine_call(engine: Engine, command: Any) -> Any:
    return engine.apply(command, 0.0)


def _state(engine: Engine, sid: int, name: str) -> tuple[list[Any], list[Any]]:
    description = engine.apply(
        DescribeSemaphore(sid, name, owners=True, waiters=True), 0.0
    ).description
    return (
        sorted((o.session_id, o.count) for o in description.owners),
        [(w.session_id, w.count) for w in description.waiters],
    )


async def _redis_state(store: RedisStore, name: str) -> tuple[list[Any], list[Any]]:
    description = await store.commands.describe_semaphore(name, owners=True, waiters=True)
    return (
        sorted((o.session_id, o.count) for o in description.owners),
        [(w.session_id, w.count) for w in description.waiters],
    )


#: Names a cycle's text cuts (past MAX_DEADLOCK_NAME_BYTES), each where a character of
#: another width would be split, and quoted as Python's repr quotes them: a single
#: quote (double quotes then), both quotes (an escaped single one), a backslash.
LONG_NAMES: Final = (
    "'" + "a" * 70,
    "b'\"" + "\N{LATIN SMALL LETTER E WITH ACUTE}" * 40,
    "\\" + "\N{GRINNING FACE}" * 20 + "\N{EURO SIGN}" * 300,
)


@pytest.mark.parametrize(
    ("seed", "names"),
    [(seed, ("a", "b", "c")) for seed in range(12)] + [(seed, LONG_NAMES) for seed in range(4)],
)
async def test_redis_refuses_what_the_engine_refuses_word_for_word(
    place: Place, seed: int, names: tuple[str, ...]
) -> None:
    rng = random.Random(seed)
    limits = [rng.randint(1, 3) for _ in range(3)]
    engine = Engine()
    engine.apply(CreateNode("n"), 0.0)
    async with tenure.connect(place.url) as client:
        backend = client.backend
        stores = []
        for _ in range(3):
            opened = await backend.open_session("n", timeout=30.0, description="", listener=Heard())
            stores.append(store_of(opened))
            assert engine.apply(CreateSession("n", b"k"), 0.0).session_id == opened.session_id
        for name, limit in zip(names, limits, strict=True):
            await stores[0].commands.create_semaphore(name, limit, b"")
            engine.apply(CreateSemaphore(stores[0].session_id, name, limit), 0.0)
        request_ids = iter(range(1, 10_000))
        refused = 0
        for _ in range(40):
            s = rng.randrange(3)
            sid, task, store = stores[s].session_id, rng.randint(1, 2), stores[s]
            if engine.sessions[sid].task_waits(task):
                continue  # a task awaits one request at a time
            name = rng.choice(names)
            sem = engine.nodes["n"].semaphores[name]
            mine = [o for o in sem.each_owner() if o.session_id == sid and o.task == task]
            roll = rng.random()
            if roll < 0.2:
                if mine:
                    await _apply(store, engine, Release(sid, name, mine[0].hold))
                continue
            count = rng.randint(1, limits[names.index(name)])
            if roll < 0.4 and mine:  # an upgrade
                command: Any = Acquire(
                    sid,
                    name,
                    min(mine[0].count + 1, sem.limit),
                    next(request_ids),
                    hold=mine[0].hold,
                    task=task,
                )
            elif roll < 0.55:  # a set of two, count 1 each
                pair = tuple(rng.sample(names, 2))
                used = {
                    k >> 64
                    for nm in pair
                    for k in (
                        *engine.nodes["n"].semaphores[nm].owners,
                        *engine.nodes["n"].semaphores[nm].waiters,
                    )
                    if k & ((1 << 64) - 1) == sid
                }
                hold = next(h for h in range(10) if h not in used)
                ids = (next(request_ids), next(request_ids))
                command = AcquireAll(sid, pair, (hold, hold), ids, 1, ephemeral=False, task=task)
            else:
                used = {o.hold for o in sem.each_owner() if o.session_id == sid}
                used |= {w.hold for w in sem.waiters.values() if w.session_id == sid}
                hold = next(h for h in range(10) if h not in used)
                command = Acquire(sid, name, count, next(request_ids), hold=hold, task=task)
            on_redis, on_engine = await _apply(store, engine, command)
            assert on_redis == on_engine, f"step {command}: redis {on_redis}, engine {on_engine}"
            refused += on_redis.startswith("DeadlockError")
            for other in names:
                assert await _redis_state(store, other) == _state(engine, sid, other), other
        if seed == 0:
            assert refused, "no deadlock in the first run: the test would prove little"


async def test_the_node_keeps_its_latest_broken_deadlocks(place: Place) -> None:
    async with tenure.connect(place.url) as client:
        one, two = await client.session("n"), await client.session("n")
        for sid_session in (one, two):
            assert sid_session.id
        a = store_of(one)
        b = store_of(two)
        await a.call(Acquire(one.id, "x", MAX_COUNT, 1, ephemeral=True, task=1))
        await b.call(Acquire(two.id, "y", MAX_COUNT, 2, ephemeral=True, task=1))
        await a.call(Acquire(one.id, "y", MAX_COUNT, 3, ephemeral=True, task=1))
        for attempt in range(10):
            with pytest.raises(DeadlockError, match="waits for 'x' held by session"):
                await b.call(Acquire(two.id, "x", MAX_COUNT, 10 + attempt, ephemeral=True, task=1))
        described = await client.describe_node("n")
        assert len(described.deadlocks) == 8  # the latest, oldest first
        ats = [d.at or 0.0 for d in described.deadlocks]
        assert ats == sorted(ats)
        assert ats[0] > 1e9  # UNIX seconds, by Redis's clock
        assert {(d.session_id, d.task) for d in described.deadlocks} == {(two.id, 1)}
        assert await place.admin.hlen(place.keys + "tw") == 1  # one's task 1 waits for y
        await client.drop_node("n", force=True)
    assert not await place.admin.exists(place.keys + "tw", place.keys + "dlk", place.keys + "ow:x")


async def test_keys_of_tasks_go_with_what_they_index(place: Place) -> None:
    async with tenure.connect(place.url) as client, client.session("n") as one:
        store = store_of(one)
        await store.call(Acquire(one.id, "x", MAX_COUNT, 1, ephemeral=True, task=4))
        assert await place.admin.hgetall(place.keys + "ow:x") == {
            f"{one.id}:0".encode(): b"4:ffffffffffffffff"
        }
        async with client.session("n") as two:
            await store_of(two).call(Acquire(two.id, "x", MAX_COUNT, 2, ephemeral=True, task=5))
            assert await place.admin.hkeys(place.keys + "tw") == [f"{two.id}:5".encode()]
        assert await place.admin.hlen(place.keys + "tw") == 0  # its session ended
        await store.call(Release(one.id, "x"))
        assert not await place.admin.exists(place.keys + "ow:x")


async def test_the_limit_is_the_clients_and_zero_checks_nothing(place: Place) -> None:
    unchecked = place.url + "&deadlock_search_limit=0"
    async with tenure.connect(place.url) as client:
        assert tenure.Capability.DEADLOCK_DETECTION in client.capabilities
    async with tenure.connect(unchecked) as client:
        # Nothing is looked for, so nothing is promised: require= refuses it.
        assert tenure.Capability.DEADLOCK_DETECTION not in client.capabilities
        one, two = await client.session("n"), await client.session("n")
        a, b = store_of(one), store_of(two)
        await a.call(Acquire(one.id, "x", MAX_COUNT, 1, ephemeral=True, task=1))
        await b.call(Acquire(two.id, "y", MAX_COUNT, 2, ephemeral=True, task=1))
        await a.call(Acquire(one.id, "y", MAX_COUNT, 3, ephemeral=True, task=1))
        queued = await b.call(Acquire(two.id, "x", MAX_COUNT, 4, ephemeral=True, task=1))
        assert queued.status.name == "QUEUED"  # a deadlock nobody looked for
        await one.close()
        await two.close()
    with pytest.raises(tenure.errors.InvalidArgumentError, match="deadlock_search_limit"):
        await tenure.connect(place.url + "&deadlock_search_limit=-1")


async def test_a_resumed_sessions_holds_are_of_no_known_task(place: Place) -> None:
    async with tenure.connect(place.url) as client:
        one, two = await client.session("n"), await client.session("n")
        a = store_of(one)
        await a.call(Acquire(one.id, "x", MAX_COUNT, 1, ephemeral=True, task=1))
        ticket = one.ticket()
        async with tenure.connect(place.url) as other:
            resumed = await other.session("n", resume=ticket)
            assert await place.admin.hget(place.keys + "ow:x", f"{resumed.id}:0") == (
                b"0:ffffffffffffffff"
            )
            b = store_of(two)
            r = store_of(resumed)
            await b.call(Acquire(two.id, "y", MAX_COUNT, 2, ephemeral=True, task=1))
            await r.call(Acquire(resumed.id, "y", MAX_COUNT, 3, ephemeral=True, task=1))
            # x is held by no known task now: two's task asking for it closes no cycle.
            queued = await b.call(Acquire(two.id, "x", MAX_COUNT, 4, ephemeral=True, task=1))
            assert queued.status.name == "QUEUED"
            await resumed.close()
        await two.close()
