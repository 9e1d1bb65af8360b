"""Snapshots: dump → load gives an engine that behaves the same; resume after restart."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from typing import Any

import pytest

from tenure._core import (
    MAX_COUNT,
    Acquire,
    AcquireAll,
    AttachSession,
    ClaimName,
    CloseSession,
    Command,
    CreateNode,
    CreateSemaphore,
    CreateSession,
    DeleteSemaphore,
    DescribeSession,
    DetachSession,
    Engine,
    GetNodeAnnex,
    ListSessions,
    NodeConfig,
    Release,
    ReleaseClaim,
    SetNodeAnnex,
    UpdateSemaphore,
)
from tenure._core.invariants import check_invariants
from tenure._core.semaphore_fields import SemaphoreRest
from tenure._core.snapshot import dump, load, resume
from tenure._core.values import (
    MAX_ANNEX_BYTES,
    MAX_ANNEX_KEY_BYTES,
    MAX_ANNEX_KEYS,
    ClientIdentity,
)
from tenure.errors import InvalidArgumentError, TenureError

from .support import KEY, NODE, acquire, create_semaphore, describe, make_engine, open_session

PLAIN = (dict, list, str, bytes, int, float, bool, type(None))


def assert_plain(value: object) -> None:
    assert isinstance(value, PLAIN), type(value)
    if isinstance(value, dict):
        for key, item in value.items():
            assert isinstance(key, str)
            assert_plain(item)
    elif isinstance(value, list):
        for item in value:
            assert_plain(item)


def random_command(
    rng: random.Random,
    engine: Engine,
    request_id: int,
    *,
    holds: bool = True,
    annex: bool = True,
    claims: bool = True,
) -> Command[object]:
    """A random command; with ``holds``, some of a session's second or third hold; with
    ``annex``, some that set or read the node's annex; with ``claims``, some claims
    and releases of claims (of ``c``, or of ``a``: refused while it is a semaphore)."""
    sessions = sorted(engine.sessions) or [1]
    sid = rng.choice(sessions)
    name = rng.choice(["a", "b", "m"])
    roll = rng.random()
    hold = rng.choice([0, 0, 0, 1, 2]) if holds else 0
    if holds and roll < 0.08:  # all or none: 2 or 3 names, one hold each
        names = tuple(rng.sample(["a", "b", "m"], rng.randint(2, 3)))
        return AcquireAll(
            sid,
            names,
            tuple(rng.choice([0, 1, 2]) for _ in names),
            tuple(100_000 + request_id * 8 + i for i in range(len(names))),
            rng.choice([1, 2]),
            b"g%d" % request_id,
            rng.choice([0, None, 0.5, 2.0]),
            task=rng.choice([0, 1, 2]),  # (a task of the session: deadlocks are refused)
        )
    if roll < 0.45:
        count = MAX_COUNT if name == "m" else rng.randint(1, 3)
        timeout = rng.choice([0, None, 0.5, 2.0])
        data = b"d%d/%d" % (sid, hold)
        keep_place = rng.random() < 0.3  # (a queued request asked again: restated in place)
        return Acquire(
            sid,
            name,
            count,
            request_id,
            data,
            timeout,
            ephemeral=True,
            hold=hold,
            keep_place=keep_place,
            task=rng.choice([0, 1, 2]),
        )
    if roll < 0.7:
        return Release(sid, name, hold)
    if roll < 0.78:
        return DetachSession(sid)
    if roll < 0.84:
        restated = rng.random() < 0.5  # (with a new recovery window and description)
        if restated:
            return AttachSession(sid, KEY, request_id, rng.choice([0.5, 3.0]), f"d{request_id}")
        return AttachSession(sid, KEY, request_id)
    if roll < 0.88:
        return UpdateSemaphore(sid, name, b"v%d" % request_id)
    if roll < 0.92:
        return CreateSemaphore(sid, name, rng.randint(1, 4))
    if roll < 0.95:
        return DeleteSemaphore(sid, name, force=rng.random() < 0.5)
    if annex and roll < 0.97:
        # (Writes only: a read moves the engine's time and is not journaled, which the
        # journal's tests of this list cannot tell from a lost record.)
        key = rng.choice(ANNEX_KEYS)
        return SetNodeAnnex(NODE, key, rng.choice([b"", b"", b"cfg%d" % request_id]))
    if claims and roll < 0.985:
        claimed = rng.choice(["c", "c", "a"])
        claim_id = rng.choice(CLAIM_IDS)
        at = 1_750_000_000.0 + request_id  # (a wall clock's time, as a host sets it)
        if rng.random() < 0.6:
            least = rng.choice([0.0, 0.3, 1.0])
            return ClaimName(sid, claimed, claim_id, least, least + rng.choice([0.5, 2.0]), b"", at)
        return ReleaseClaim(NODE, claimed, claim_id, at)
    return CloseSession(sid)


ANNEX_KEYS = ("ydb", "other")
CLAIM_IDS = ("1" * 32, "2" * 32)


def step(engine: Engine, command: Command[object], now: float) -> tuple[object, list[object]]:
    try:
        reply: object = engine.apply(command, now)
    except TenureError as error:
        reply = (type(error).__name__, str(error))
    return reply, list(engine.take_effects())


@pytest.mark.parametrize("seed", range(40))
def test_a_loaded_engine_behaves_exactly_like_the_original(seed: int) -> None:
    rng = random.Random(seed)
    config = NodeConfig(lock_delay=rng.choice([0.0, 2.0, 6.0]), recovery_window=1.0)
    engine = make_engine(config)
    for _ in range(4):
        open_session(engine)
    engine.take_effects()
    twin: Engine | None = None
    now = 0.0
    snapshot_at = rng.randint(1, 100)
    for request_id in range(1, 120):
        now += rng.choice([0.0, 0.1, 0.4, 1.5])
        if request_id == snapshot_at:
            snapshot = dump(engine)
            assert_plain(snapshot)
            twin = load(snapshot)
            assert dump(twin) == snapshot
        command = random_command(rng, engine, request_id)
        expected = step(engine, command, now)
        if twin is not None:
            assert step(twin, command, now) == expected, f"diverged at {command}"
            check_invariants(twin)
            for sid in engine.sessions:  # what each session holds, waits for and missed
                describe = DescribeSession(sid)
                assert twin.apply(describe, now) == engine.apply(describe, now)
            for key in ANNEX_KEYS:
                read = GetNodeAnnex(NODE, key)
                assert twin.apply(read, now) == engine.apply(read, now)
    assert twin is not None
    twin.tick(now + 100)
    engine.tick(now + 100)
    assert twin.take_effects() == engine.take_effects()


def test_resume_gives_sessions_a_fresh_window_and_keeps_tokens_rising() -> None:
    engine = make_engine(NodeConfig(lock_delay=2.0))
    a, b = open_session(engine, timeout=10.0), open_session(engine, timeout=10.0)
    create_semaphore(engine, a, "p", 1)
    first = acquire(engine, a, "p")
    acquire(engine, b, "p", timeout=30.0, now=5.0)  # waits, 30 s left until t=35
    engine.apply(DetachSession(b), 8.0)  # b's window would end at t=18
    restored = load(dump(engine))
    resume(restored, now=1000.0)  # a new process: its clock says 1000
    # Every session is detached, with a whole window from the restart.
    assert restored.next_deadline() == 1010.0
    restored.apply(AttachSession(a, KEY, 2), 1009.0)
    restored.apply(AttachSession(b, KEY, 2), 1009.0)
    # The waiter kept its remaining 27 s (from t=8, now 1000): it times out at 1027.
    assert [w.session_id for w in describe(restored, a, "p", now=1026.9).waiters] == [b]
    restored.tick(1027.0)
    assert describe(restored, a, "p", now=1027.0).waiters == ()
    # The next grant's token is above every token the old process gave.
    restored.apply(Release(a, "p"), 1028.0)
    again = acquire(restored, b, "p", now=1028.0)
    assert first.token is not None
    assert again.token is not None
    assert again.token > first.token
    check_invariants(restored)


def test_a_snapshot_taken_during_lock_delay_keeps_the_delay() -> None:
    engine = make_engine(NodeConfig(lock_delay=5.0))
    a, b = open_session(engine, timeout=1.0), open_session(engine)
    create_semaphore(engine, a, "p", 1)
    acquire(engine, a, "p")
    engine.apply(DetachSession(a), 0.0)
    acquire(engine, b, "p", timeout=None, now=0.5)
    engine.tick(1.0)  # a expired: no grant before t=6
    restored = load(dump(engine))
    assert describe(restored, b, "p", now=5.9).owners == ()
    restored.tick(6.0)
    assert [o.session_id for o in describe(restored, b, "p", now=6.0).owners] == [b]
    resumed = load(dump(engine))
    resume(resumed, now=100.0)  # 5 s of delay were left at t=1
    resumed.apply(AttachSession(b, KEY, 2), 100.0)
    resumed.tick(104.9)
    assert describe(resumed, b, "p", now=104.9).owners == ()
    resumed.tick(105.0)
    assert [o.session_id for o in describe(resumed, b, "p", now=105.0).owners] == [b]


def test_resume_restarts_lease_ttls() -> None:
    engine = make_engine(NodeConfig(default_lease=5.0))
    a = open_session(engine)
    create_semaphore(engine, a, "p", 1)
    acquire(engine, a, "p", now=1.0)  # would expire at 6
    restored = load(dump(engine))
    resume(restored, now=50.0)
    restored.apply(AttachSession(a, KEY, 2), 50.0)
    assert [o.session_id for o in describe(restored, a, "p", now=54.9).owners] == [a]
    restored.tick(55.0)
    assert describe(restored, a, "p", now=55.0).owners == ()


@pytest.mark.parametrize(
    "data",
    [None, {}, {"version": 2}, {"version": 1}, {"version": 1, "now": 0, "max_nodes": 1}],
)
def test_load_refuses_what_is_not_a_snapshot(data: object) -> None:
    with pytest.raises(InvalidArgumentError):
        load(data)  # type: ignore[arg-type]


def clear_keys(data: dict[str, Any], keys: Mapping[int, bytes] | None) -> dict[str, Any]:
    """``data`` (a dump, of 11 values a session) with each session's protection key
    where an older server kept it and today's keeps its digest: ``keys`` by session id
    (None: :data:`KEY`, every test session's)."""
    flat = list(data["sessions"])
    for row in range(0, len(flat), 11):
        flat[row + 4] = KEY if keys is None else keys[flat[row]]
    return {**data, "sessions": flat}


def dump_v1(engine: Engine, keys: Mapping[int, bytes] | None = None) -> dict[str, object]:
    """The layout of version 1 (a list per session, a dict per semaphore); ``keys``:
    each session's protection key, by id (None: :data:`KEY`)."""
    return {
        "version": 1,
        "now": engine.now,
        "max_nodes": engine.max_nodes,
        "last_token": engine.last_token,
        "last_session_id": engine.last_session_id,
        "last_watch_id": engine.last_watch_id,
        "nodes": [
            {
                "name": node.name,
                "config": dataclasses.asdict(node.config),
                "semaphores": [
                    {
                        "name": sem.name,
                        "limit": sem.limit,
                        "data": sem.data,
                        "ephemeral": sem.ephemeral,
                        "blocked_until": sem.blocked_until,
                        "owners": [
                            [o.session_id, o.count, o.data, o.token, o.lease_ttl, o.lease_deadline]
                            for o in sem.owners.values()
                        ],
                        "waiters": [
                            [w.session_id, w.request_id, w.count, w.data, w.deadline, w.lease_ttl]
                            for w in sem.waiters.values()
                        ],
                    }
                    for sem in node.semaphores.values()
                ],
            }
            for node in engine.nodes.values()
        ],
        "sessions": [
            [
                s.session_id,
                s.node,
                s.timeout,
                s.description,
                KEY if keys is None else keys[s.session_id],
                s.seq_no,
                s.expires_at,
            ]
            for s in engine.sessions.values()
        ],
    }


def as_v6(data: dict[str, Any], keys: Mapping[int, bytes] | None = None) -> dict[str, Any]:
    """A dump in the layout of version 6: as now, without the waiters' arrival numbers
    and timeouts (new in version 7), which a load of an older layout makes afresh, and
    with each session's protection key, not its digest (version 12), as
    :func:`clear_keys` puts it."""
    data = {**clear_keys(data, keys), "version": 6}
    del data["last_order"]
    data["nodes"] = [
        {**node, "waiters": [v for i, v in enumerate(node["waiters"]) if i % 10 < 8]}
        for node in data["nodes"]
    ]
    return data


def dump_v4(engine: Engine, keys: Mapping[int, bytes] | None = None) -> dict[str, Any]:
    """The layout of version 4: as now, without identities and times."""
    data = as_v6(dump(engine), keys)
    data["version"] = 4
    data["sessions"] = [v for i, v in enumerate(data["sessions"]) if i % 11 < 7]
    for node in data["nodes"]:
        node.pop("annex", None)  # (new in version 6)
        for key in ("owners", "waiters"):
            node[key] = [v for i, v in enumerate(node[key]) if i % 8 != 7]
    return data


def dump_v3(engine: Engine, keys: Mapping[int, bytes] | None = None) -> dict[str, Any]:
    """The layout of version 3: as version 4, without hold numbers (every hold was 0)."""
    data = dump_v4(engine, keys)
    data["version"] = 3
    for node in data["nodes"]:
        for key in ("owners", "waiters"):
            flat = node[key]
            node[key] = [v for i, v in enumerate(flat) if i % 7 != 6]
    data["missed"] = [v for i, v in enumerate(data["missed"]) if i % 7 != 6]
    return data


def random_run(
    rng: random.Random,
    *,
    lock_delay: float,
    holds: bool = True,
    annex: bool = True,
    lease_ttls: bool = False,
) -> tuple[Engine, float]:
    """Four sessions, then 79 random commands (``lease_ttls``: half the acquires leased):
    the engine, and the time it reached."""
    engine = make_engine(NodeConfig(lock_delay=rng.choice([0.0, lock_delay]), recovery_window=1.0))
    for _ in range(4):
        open_session(engine)
    now = 0.0
    for request_id in range(1, 80):
        now += rng.choice([0.0, 0.1, 0.4])
        command = random_command(rng, engine, request_id, holds=holds, annex=annex, claims=annex)
        if lease_ttls and isinstance(command, Acquire) and rng.random() < 0.5:
            command = dataclasses.replace(command, lease_ttl=rng.choice([1.0, 30.0]))
        step(engine, command, now)
    return engine, now


def engine_of_one_hold_per_session(seed: int) -> Engine:
    """A random engine of the kind every older layout could hold: all holds are hold 0."""
    return random_run(random.Random(seed), lock_delay=2.0, holds=False, annex=False)[0]


@pytest.mark.parametrize("seed", range(10))
def test_a_version_1_snapshot_still_loads(seed: int) -> None:
    """A data directory written before the flat layout restarts on the same state."""
    engine = engine_of_one_hold_per_session(seed)
    # Version 1 predates the endings sessions keep (version 3): they load without.
    assert as_v6(dump(load(dump_v1(engine)))) == as_v6({**dump(engine), "missed": []})


@pytest.mark.parametrize("seed", range(10))
def test_a_version_3_snapshot_still_loads(seed: int) -> None:
    """A data directory written before holds were numbered restarts on the same state."""
    engine = engine_of_one_hold_per_session(seed)
    assert as_v6(dump(load(dump_v3(engine)))) == as_v6(dump(engine))


def test_the_flat_layout_refuses_rows_that_do_not_add_up() -> None:
    engine = make_engine()
    a = open_session(engine)
    acquire(engine, a, "m", ephemeral=True)
    data = dump(engine)
    data["sessions"].append(1)  # a session of one field
    with pytest.raises(InvalidArgumentError, match="malformed"):
        load(data)
    data = dump(engine)
    data["nodes"][0]["owners"] += data["nodes"][0]["owners"]  # owners nobody claims
    with pytest.raises(InvalidArgumentError, match="malformed"):
        load(data)


def test_a_restored_mutex_shares_the_engines_counts() -> None:
    engine = make_engine()
    a = open_session(engine)
    acquire(engine, a, "m", MAX_COUNT, ephemeral=True)
    restored = load(dump(engine))
    sem = restored.nodes["n"].semaphores["m"]
    assert not isinstance(sem._rest, SemaphoreRest)  # its limit is the default's: none of its own
    assert sem.limit == MAX_COUNT
    assert sem.count is MAX_COUNT


def engine_with_live_holders() -> Engine:
    """Sessions with identities that hold and wait, opened and granted at various times."""
    engine = make_engine(NodeConfig(recovery_window=60.0))
    alice = ClientIdentity("host-a", 7, "worker")
    a = engine.apply(CreateSession("n", KEY, None, "exporter", alice), 1.0).session_id
    b = engine.apply(CreateSession("n", KEY, None, "", ClientIdentity("host-b", 8)), 2.0)
    c = engine.apply(CreateSession("n", KEY, None, "", alice), 2.5).session_id
    acquire(engine, a, "m", MAX_COUNT, ephemeral=True, now=3.0)
    acquire(engine, b.session_id, "m", MAX_COUNT, ephemeral=True, now=4.0)
    acquire(engine, c, "s", 1, ephemeral=True, now=5.0)
    engine.apply(DetachSession(c), 6.0)
    return engine


def test_identities_and_times_survive_a_snapshot_and_move_with_a_resume() -> None:
    engine = engine_with_live_holders()
    restored = load(dump(engine))
    assert dump(restored) == dump(engine)
    assert restored.sessions[1].identity is restored.sessions[3].identity  # shared on load
    resume(restored, 100.0)  # engine.now was 6.0: everything moves by 94
    sessions = restored.apply(ListSessions("n"), 100.0).sessions
    assert [s.created_at for s in sessions] == [95.0, 96.0, 96.5]
    assert [s.identity.host for s in sessions] == ["host-a", "host-b", "host-a"]
    desc = describe(restored, 1, "m", now=100.0)
    assert [o.since for o in desc.owners] == [97.0]
    assert [(w.since, w.description) for w in desc.waiters] == [(98.0, "")]


def test_a_version_4_snapshot_still_loads() -> None:
    """A data directory written before identities restarts on the same state, unnamed."""
    engine = engine_with_live_holders()
    restored = load(dump_v4(engine))
    assert dump_v4(restored) == dump_v4(engine)
    assert all(s.identity == ClientIdentity() for s in restored.sessions.values())
    assert all(s.created_at == engine.now for s in restored.sessions.values())
    desc = describe(restored, 1, "m")
    assert [o.since for o in desc.owners] + [w.since for w in desc.waiters] == [6.0, 6.0]
    check_invariants(restored)


@pytest.mark.parametrize("seed", range(20))
def test_resume_schedules_what_reschedule_all_would(seed: int) -> None:
    """resume rebuilds the deadline heap in its own walk: the same entries, in order."""
    engine, now = random_run(random.Random(seed), lock_delay=6.0, lease_ttls=True)
    late = open_session(engine, now=now)  # (the random run may have ended every session)
    acquire(engine, late, "leased", ephemeral=True, lease_ttl=5.0, now=now)
    twin = load(dump(engine))
    resume(twin, now + 1000.0)
    resumed = list(twin.deadlines._heap)
    twin.reschedule_all()
    assert sorted(resumed) == sorted(twin.deadlines._heap)
    leased = sum(
        o.lease_ttl is not None
        for node in twin.nodes.values()
        for sem in node.semaphores.values()
        for o in sem.each_owner()
    )
    kinds = [type(key).__name__ for _, _, key in resumed]
    assert kinds.count("SessionDeadline") == len(twin.sessions) > 0
    assert kinds.count("LeaseDeadline") == leased > 0


def engine_with_an_annex() -> Engine:
    """Two nodes, one with an annex of two keys (one of them set, removed, set again)."""
    engine = engine_with_live_holders()
    engine.apply(CreateNode("bare"), engine.now)
    for key, value in (("ydb", b"\x00cfg"), ("other", b"o"), ("ydb", b""), ("ydb", b"cfg2")):
        engine.apply(SetNodeAnnex(NODE, key, value), engine.now)
    return engine


def test_a_node_annex_survives_a_snapshot_and_a_resume() -> None:
    engine = engine_with_an_annex()
    data = dump(engine)
    assert_plain(data)
    nodes = {node["name"]: node for node in data["nodes"]}
    assert nodes[NODE]["annex"] == {"other": b"o", "ydb": b"cfg2"}
    assert "annex" not in nodes["bare"]  # only a node that has one
    restored = load(data)
    resume(restored, 500.0)
    assert restored.apply(GetNodeAnnex(NODE, "ydb"), 500.0) == b"cfg2"
    assert restored.apply(GetNodeAnnex(NODE, "other"), 500.0) == b"o"
    assert restored.apply(GetNodeAnnex("bare", "ydb"), 500.0) == b""
    assert restored.nodes["bare"].annex is None
    assert dump(load(data)) == data


def test_a_version_5_snapshot_loads_with_no_annex() -> None:
    """A data directory written before the annex restarts on the same state, none kept."""
    engine = engine_with_live_holders()
    data = dump(engine)
    assert all("annex" not in node for node in data["nodes"])
    restored = load({**as_v6(data), "version": 5})
    assert as_v6(dump(restored)) == as_v6(data)
    assert all(node.annex is None for node in restored.nodes.values())
    assert restored.apply(GetNodeAnnex(NODE, "ydb"), engine.now) == b""


@pytest.mark.parametrize(
    "annex",
    [
        [b"v"],
        {"k": "text"},
        {"k": b""},
        {"k": b"x" * (MAX_ANNEX_BYTES + 1)},
        {"": b"v"},
        {"k" * (MAX_ANNEX_KEY_BYTES + 1): b"v"},
        {f"k{i}": b"v" for i in range(MAX_ANNEX_KEYS + 1)},
    ],
)
def test_load_refuses_an_annex_the_engine_would_not_hold(annex: object) -> None:
    data = dump(engine_with_an_annex())
    data["nodes"][0]["annex"] = annex
    with pytest.raises(InvalidArgumentError):
        load(data)


def test_a_version_6_snapshot_numbers_its_waiters_in_queue_order() -> None:
    """Before version 7 waiters had no arrival numbers: a load gives them 1, 2, 3... in
    the order it lists them, and the timeout their deadline was set from."""
    engine = make_engine()
    a, b, c = (open_session(engine) for _ in range(3))
    create_semaphore(engine, a, "p", 1)
    acquire(engine, a, "p")
    acquire(engine, b, "p", timeout=30.0, now=2.0)
    acquire(engine, c, "p", now=3.0)  # waits forever
    restored = load(as_v6(dump(engine)))
    waiters = list(restored.nodes[NODE].semaphores["p"].waiters.values())
    assert [(w.session_id, w.order, w.timeout) for w in waiters] == [(b, 1, 30.0), (c, 2, None)]
    assert restored.last_order == 2
    check_invariants(restored)
    d = open_session(restored, now=4.0)
    acquire(restored, d, "p", now=4.0)
    assert list(restored.nodes[NODE].semaphores["p"].waiters.values())[-1].order == 3


def test_arrival_numbers_and_timeouts_survive_a_snapshot() -> None:
    engine = make_engine()
    a, b = open_session(engine), open_session(engine)
    create_semaphore(engine, a, "p", 1)
    acquire(engine, a, "p")
    acquire(engine, b, "p", timeout=30.0, now=2.0)
    acquire(engine, b, "p", timeout=9.0, now=3.0, keep_place=True)
    restored = load(dump(engine))
    (waiter,) = restored.nodes[NODE].semaphores["p"].waiters.values()
    assert (waiter.order, waiter.timeout, waiter.deadline) == (1, 9.0, 12.0)
    assert restored.last_order == engine.last_order == 1
