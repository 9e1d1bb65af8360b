"""lock_all on a real PostgreSQL (schema version 4): what the conformance kit cannot reach.

The kit checks the semantics against the engine; here, what is PostgreSQL's own: a
version-3 schema upgraded under live sessions, the order in which acquire_all locks
its rows (so that requests over overlapping names in opposite orders never deadlock
in PostgreSQL itself, where a deadlock costs a second and a retry), the one
deadline of a waiting set on the database's clock (timed out by its client or by any
client's reap), a call sent again after a lost answer, and the removal paths the
kit's clock cannot drive.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from typing import Any

import psycopg
import pytest

import tenure
from tenure._core.values import MAX_COUNT
from tenure.backends.postgres import PgBackend
from tenure.backends.postgres._ddl import SCHEMA_VERSION
from tenure.backends.postgres._store import PgStore
from tenure.errors import NotFoundError, SessionExpiredError
from tenure.testing.conformance.support import (
    eventually,
    wait_for_waiters,
    waiters,
    within,
)
from tests.backends.postgres.database import (
    back_to_version,
    fetch,
    schema_of,
    version_of,
    waits_for_a_lock,
)
from tests.postgres.server import PostgresServer

#: What version 4 added: the functions (dropped to make a version-3 schema again).
_VERSION_4_FUNCTIONS = (
    "acquire_all",
    "acquire_all_again",
    "room_for_semaphores",
    "lock_semaphores",
    "lock_semaphore",
    "lock_also",
    "grant_waiter",
    "group_ready",
    "withdraw_group",
    "finish_session",
)


def _store(client: tenure.Client, session: tenure.Session) -> PgStore:
    backend = client.backend
    assert isinstance(backend, PgBackend)
    return backend.sessions[session.id]


async def test_a_version_3_schema_is_upgraded_and_its_queues_go_on(
    postgres_server: PostgresServer,
) -> None:
    """The upgrade adds the members' columns (NULL in the rows of before: requests of
    one semaphore); a waiter queued before it is served after it, and lock_all works."""
    schema = f"t_{uuid.uuid4().hex[:12]}"
    url = postgres_server.url(schema=schema, pool_size="2")
    async with tenure.connect(url) as old_client:
        await old_client.create_node("n")
        holder = await old_client.session("n", recovery_window=20)
        lease = await holder.mutex("m").lock()
        waiting = await old_client.session("n", recovery_window=20)
        queued = asyncio.ensure_future(waiting.mutex("m").lock(timeout=30))
        await wait_for_waiters(holder, "m", 1)
        # Back to version 3's shape, a waiter in it: what the previous tenure left.
        await back_to_version(
            postgres_server.dsn,
            schema,
            3,
            [f"DROP FUNCTION {schema}.{function}" for function in _VERSION_4_FUNCTIONS]
            + [f"ALTER TABLE {schema}.waiters DROP COLUMN {c}" for c in ("grp", "grp_place")],
        )
        async with tenure.connect(url) as new_client:  # first use: migrated
            assert await version_of(postgres_server.dsn, schema) == SCHEMA_VERSION
            assert await fetch(
                postgres_server.dsn, f"SELECT name, grp, grp_place FROM {schema}.waiters"
            ) == [("m", None, None)]
            await lease.release()  # the old session goes on with the new functions
            got = await within(queued)
            mine = await new_client.session("n")
            locking = asyncio.ensure_future(mine.lock_all(["x", "m"], timeout=30))
            await wait_for_waiters(mine, "m", 1)
            rows = await fetch(
                postgres_server.dsn,
                f"SELECT name, grp, grp_place, arrival FROM {schema}.waiters ORDER BY grp_place",
            )
            assert [(name, place) for name, _, place, _ in rows] == [("x", 0), ("m", 1)]
            assert rows[0][1] == rows[1][1] == rows[0][3] == rows[1][3]  # one arrival
            assert await waiters(mine, "x") == [mine.id]  # x is free: waits all the same
            await got.release()
            held = await within(locking)
            assert list(held.tokens) == ["x", "m"]
            assert held.tokens["m"] > held.tokens["x"] > got.token
            await held.release()


async def test_acquire_all_waits_for_its_rows_in_name_order(
    postgres_server: PostgresServer, pg_url: str
) -> None:
    """Asked for ["b", "a"] while another transaction holds a's row, acquire_all waits
    for it holding nothing: b's row is free meanwhile. (Locking b first and then
    waiting for a is how two requests in opposite orders deadlock.)"""
    schema = schema_of(pg_url)
    async with tenure.connect(pg_url) as client:
        await client.create_node("n")
        one, two = await client.session("n"), await client.session("n")
        for name in ("a", "b"):
            await one.mutex(name).lock()  # (they exist while held: ephemeral)
        async with await psycopg.AsyncConnection.connect(postgres_server.dsn) as blocker:
            await blocker.execute(f"SELECT 1 FROM {schema}.semaphores WHERE name = 'a' FOR UPDATE")
            locking = asyncio.ensure_future(two.lock_all(["b", "a"], timeout=30))

            await eventually(
                lambda: waits_for_a_lock(postgres_server.dsn, "acquire_all"),
                "acquire_all waiting for a's row",
            )
            await blocker.execute(
                f"SELECT 1 FROM {schema}.semaphores WHERE name = 'b' FOR UPDATE NOWAIT"
            )
            await blocker.rollback()
        await wait_for_waiters(one, "a", 1)
        assert await waiters(one, "b") == [two.id]
        await one.close()
        held = await within(locking)
        await held.release()


async def test_overlapping_requests_in_any_order_never_deadlock_in_postgresql(
    postgres_database: str,
) -> None:
    """Sessions of three clients take random sets of five names in random orders (and
    single mutexes, and sets given up at once): each name is held by one at a time,
    all finish, and PostgreSQL counted no deadlock in this database of their own."""
    url = f"{postgres_database}?pool_size=3"
    names = [f"acct/{i}" for i in range(5)]
    inside: set[str] = set()
    done: list[int] = []
    stuck: list[list[str]] = []

    async def work(session: tenure.Session, seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(12):
            wanted = rng.sample(names, rng.choice((1, 2, 2, 3)))
            if len(wanted) == 1 and rng.random() < 0.5:
                async with session.mutex(wanted[0]):
                    assert not inside & set(wanted)
                    inside.update(wanted)
                    await asyncio.sleep(0)
                    inside.difference_update(wanted)
                continue
            patience = 0 if rng.random() < 0.2 else 30
            try:
                held = await session.lock_all(wanted, timeout=patience)
            except TimeoutError:
                if patience:  # 30 s for holds of 3 ms at most: a deadlock
                    stuck.append(wanted)
                continue
            async with held:
                assert not inside & set(wanted), (wanted, inside)
                inside.update(wanted)
                await asyncio.sleep(rng.random() * 0.003)
                inside.difference_update(wanted)
            done.append(len(wanted))

    clients = [await tenure.connect(url) for _ in range(3)]
    try:
        await clients[0].create_node("n")
        sessions = [await c.session("n") for c in clients for _ in range(2)]
        # (No bound of its own on the whole workload: a busy machine took more than the
        # kit's 5 s for it; a deadlock shows as a 30 s wait given up, which fails below,
        # and pytest-timeout bounds the test.)
        await asyncio.gather(*(work(s, i) for i, s in enumerate(sessions)))
    finally:
        for client in clients:
            await client.aclose()
    assert done
    assert not stuck, stuck
    conninfo = postgres_database  # (no tenure options: libpq reads it as it is)
    [(deadlocks,)] = await fetch(
        conninfo, "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()"
    )
    assert deadlocks == 0


async def test_a_waiting_set_has_one_deadline_and_times_out_whole(
    postgres_server: PostgresServer, pg_url: str
) -> None:
    schema = schema_of(pg_url)
    async with tenure.connect(pg_url) as client:
        await client.create_node("n")
        one, two = await client.session("n"), await client.session("n")
        busy = await one.mutex("b").lock()
        loop = asyncio.get_running_loop()
        started = loop.time()
        locking = asyncio.ensure_future(two.lock_all(["a", "b"], timeout=0.5))
        await wait_for_waiters(one, "b", 1)
        rows = await fetch(
            postgres_server.dsn, f"SELECT deadline, grp FROM {schema}.waiters ORDER BY grp_place"
        )
        assert len(rows) == 2
        assert rows[0] == rows[1]  # one deadline, one request
        with pytest.raises(TimeoutError):
            await within(locking)
        assert loop.time() - started >= 0.5
        assert await waiters(one, "a") == []
        assert await waiters(one, "b") == []
        await busy.release()
        assert await fetch(postgres_server.dsn, f"SELECT name FROM {schema}.semaphores") == []


async def test_a_reap_times_out_every_member_and_each_reads_why(
    postgres_server: PostgresServer, pg_url: str
) -> None:
    """Timed out by a reap (any client's) rather than by its own client's check, every
    member ends with an outcome its client can read."""
    schema = schema_of(pg_url)
    async with tenure.connect(pg_url) as client:
        await client.create_node("n")
        one, two = await client.session("n"), await client.session("n")
        busy = await one.mutex("b").lock()
        store = _store(client, two)
        answer = await store.call(
            "acquire_all", ["a", "b"], [7, 7], MAX_COUNT, b"", 0.2, True, [71, 72]
        )
        assert answer == {"queued": 0.2}
        await asyncio.sleep(0.3)
        async with await psycopg.AsyncConnection.connect(postgres_server.dsn) as conn:
            await conn.execute(f"SELECT {schema}.reap('n')")
            await conn.commit()
        assert await waiters(one, "a") == []
        outcomes = await fetch(
            postgres_server.dsn,
            f"SELECT name, code FROM {schema}.outcomes WHERE sid = %s ORDER BY name",
            two.id,
        )
        assert outcomes == [("a", "timeout"), ("b", "timeout")]
        for name, request in (("a", 71), ("b", 72)):
            answer = await store.call("check_request", name, 7, request)
            assert answer["ended"] == "timeout"
        await busy.release()


async def test_an_acquire_all_sent_again_applies_once(
    postgres_server: PostgresServer, pg_url: str
) -> None:
    """A call whose answer was lost, sent again with the same request ids, answers from
    what the first left: the same grants, the same wait; and a set granted and then
    broken (one member deleted) hands nothing over and releases the rest."""
    schema = schema_of(pg_url)
    async with tenure.connect(pg_url) as client:
        await client.create_node("n")
        one, two = await client.session("n"), await client.session("n")
        store = _store(client, two)
        args: list[Any] = [["a", "b"], [5, 5], MAX_COUNT, b"", None, True, [51, 52]]
        first = await store.call("acquire_all", *args)
        assert first["tokens"][1] > first["tokens"][0]
        assert await store.call("acquire_all", *args) == first
        busy = await one.mutex("c").lock()
        queued: list[Any] = [["c", "d"], [5, 5], MAX_COUNT, b"", None, True, [53, 54]]
        assert await store.call("acquire_all", *queued) == {"queued": None}
        assert await store.call("acquire_all", *queued) == {"queued": None}
        assert await fetch(
            postgres_server.dsn,
            f"SELECT name FROM {schema}.waiters WHERE sid = %s ORDER BY name",
            two.id,
        ) == [("c",), ("d",)]
        await one.semaphore("a").delete(force=True)
        again = await store.call("acquire_all", *args)
        assert again["ended"] == "lease_lost"
        assert (
            await fetch(
                postgres_server.dsn, f"SELECT name FROM {schema}.owners WHERE sid = %s", two.id
            )
            == []
        )
        await busy.release()


async def test_a_forced_delete_of_one_member_ends_the_waiting_set(pg_url: str) -> None:
    async with tenure.connect(pg_url) as client:
        await client.create_node("n")
        one, two = await client.session("n"), await client.session("n")
        busy = await one.mutex("b").lock()
        locking = asyncio.ensure_future(two.lock_all(["a", "b"], timeout=30))
        await wait_for_waiters(one, "b", 1)
        later = asyncio.ensure_future(one.mutex("a").lock(timeout=30))
        await wait_for_waiters(one, "a", 2)
        await one.semaphore("a").delete(force=True)
        with pytest.raises(NotFoundError, match="deleted"):
            await within(locking)
        assert await waiters(one, "b") == []
        with pytest.raises(NotFoundError):
            await within(later)
        await busy.release()


async def test_a_session_killed_while_its_set_waits_frees_every_queue(pg_url: str) -> None:
    async with tenure.connect(pg_url) as client, tenure.connect(pg_url) as admin:
        await client.create_node("n")
        one, two, three = [await client.session("n") for _ in range(3)]
        busy = await one.mutex("b").lock()
        locking = asyncio.ensure_future(two.lock_all(["a", "b"], timeout=30))
        await wait_for_waiters(one, "a", 1)
        behind = asyncio.ensure_future(three.lock_all(["b", "a"], timeout=30))
        await wait_for_waiters(one, "a", 2)
        await admin.backend.kill_session("n", two.id)
        with pytest.raises(SessionExpiredError):
            await within(locking)
        assert await waiters(one, "a") == [three.id]
        await busy.release()
        held = await within(behind)
        await held.release()


async def test_a_set_waiting_out_a_lock_delay_is_granted_when_it_ends(pg_url: str) -> None:
    """The queue of a semaphore held back by lock-delay is served by the reap at its
    end (the database's clock): a set waiting there is granted whole then."""
    async with tenure.connect(pg_url) as client, tenure.connect(pg_url) as admin:
        await client.create_node("n", lock_delay=0.3)
        one, two = await client.session("n"), await client.session("n")
        await one.mutex("b").lock()
        await admin.backend.kill_session("n", one.id)  # as an expiry: b held back
        loop = asyncio.get_running_loop()
        started = loop.time()
        held = await within(two.lock_all(["a", "b"], timeout=30))
        assert loop.time() - started >= 0.2
        assert list(held.tokens) == ["a", "b"]
        await held.release()


async def test_a_resumed_session_withdraws_its_waiting_set(pg_url: str) -> None:
    async with tenure.connect(pg_url) as old, tenure.connect(pg_url) as new:
        await old.create_node("n")
        session = await old.session("n", recovery_window=10.0)
        blocker = await new.session("n")
        busy = await blocker.mutex("b").lock()
        locking = asyncio.ensure_future(session.lock_all(["a", "b"], timeout=30))
        await wait_for_waiters(blocker, "a", 1)
        resumed = await new.session("n", resume=session.ticket())
        assert resumed.id == session.id
        with pytest.raises(SessionExpiredError):
            await within(locking)
        assert await waiters(blocker, "a") == []
        assert await waiters(blocker, "b") == []
        await busy.release()
        held = await within(resumed.lock_all(["b", "a"], timeout=5))
        await held.release()
