"""The state behind YDB's Python SDK: one with ``tenure://``, kept over ``kill -9``, and
what a session's timeout means.

* A node and a semaphore made through YDB are tenure's own (``/local/a/b`` is node
  ``a/b``), and the other way round; a YDB session is listed by tenure with the
  SDK's hard-coded 30 s timeout.
* A node's YDB config and a held semaphore survive ``kill -9`` (and a graceful
  stop) and a restart on the same data directory: the SDK re-attaches its session
  and releases normally.
* A session whose stream is gone longer than its timeout is gone, and a re-attach
  within it keeps it. The SDK always asks for 30 s and re-attaches on its own, so
  these use raw Session streams with short timeouts (conftest ``raw``), and the SDK
  to watch.
"""

from __future__ import annotations

import asyncio
import functools
import signal
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import ydb
from ydb.aio.coordination import CoordinationClient as AioCoordinationClient
from ydb.aio.driver import Driver as AioDriver
from ydb.coordination import CoordinationClient, NodeConfig

import tenure
import tenure.sync
from tenure import SessionSummary
from tenure.compat.ydb import _protos as pb
from tests.server.wire import WAIT
from tests.ydb_face.conftest import DATABASE, YdbServer, unique
from tests.ydb_face.sdkkit import (
    BOUNDED,
    FULL_CONFIG,
    Threads,
    apoll,
    awaiting,
    owners_of,
    poll,
    waiting,
)

#: The session timeout YDB's Python SDK always asks for, in seconds.
SDK_SESSION_TIMEOUT = 30.0


@pytest.fixture
def threads() -> Iterator[Threads]:
    """Threads joined at the end of the test (their failures raised)."""
    made = Threads()
    yield made
    made.join()


def _session(listed: list[SessionSummary], session_id: int) -> SessionSummary | None:
    return next((s for s in listed if s.session_id == session_id), None)


# -- the same state through tenure:// -----------------------------------------------------


async def test_nodes_and_holds_made_through_ydb_are_tenures(
    server: YdbServer, aio_driver: AioDriver
) -> None:
    ydb_client = AioCoordinationClient(aio_driver)
    name = unique("y")
    async with asyncio.timeout(WAIT), tenure.connect(server.url) as client:
        await ydb_client.create_node(f"{DATABASE}/{name}", FULL_CONFIG)
        assert name in await client.list_nodes()
        assert (await client.describe_node(name)).name == name
        async with ydb_client.session(f"{DATABASE}/{name}") as session:
            job = session.semaphore("job", 2)
            await job.acquire(1)
            await job.update(b"state")
            [(sid, count)] = owners_of(await job.describe())
            async with client.session(name) as mine:
                seen = await mine.semaphore("job").describe(owners=True)
                assert (seen.limit, seen.count, seen.data) == (2, 1, b"state")
                assert [(o.session_id, o.count) for o in seen.owners] == [(sid, count)]
            listed = _session(await client.list_sessions(name), sid)
            assert listed is not None
            assert (listed.identity.name, listed.timeout, listed.holds) == (
                "ydb",
                SDK_SESSION_TIMEOUT,
                1,
            )
            await job.release()
            async with client.session(name) as mine:
                assert (await mine.semaphore("job").describe(owners=True)).owners == ()


async def test_nodes_and_holds_made_through_tenure_are_ydbs(
    server: YdbServer, aio_driver: AioDriver
) -> None:
    ydb_client = AioCoordinationClient(aio_driver)
    name = unique("t")
    async with asyncio.timeout(WAIT), tenure.connect(server.url) as client:
        await client.create_node(name)
        # A node tenure made has no YDB config: YDB's defaults (every field unset).
        assert await ydb_client.describe_node(f"{DATABASE}/{name}") == NodeConfig.from_proto(
            pb.coordination.Config()
        )
        async with client.session(name) as mine:
            pool = mine.semaphore("pool")
            await pool.create(3, b"from tenure")
            lease = await pool.acquire(2)
            async with ydb_client.session(f"{DATABASE}/{name}") as session:
                theirs = session.semaphore("pool", 3)
                seen = await theirs.describe()
                assert (seen.limit, seen.count, seen.data) == (3, 2, b"from tenure")
                assert owners_of(seen) == [(mine.id, 2)]
                await theirs.acquire(1)  # the last token: it fits
                both = await pool.describe(owners=True)
                assert both.count == 3
                assert len(both.owners) == 2
                await theirs.release()
            await lease.release()


async def test_nested_ydb_paths_are_nested_tenure_names(
    server: YdbServer, aio_driver: AioDriver
) -> None:
    ydb_client = AioCoordinationClient(aio_driver)
    made_by_ydb, made_by_tenure = f"{unique('a')}/b", f"{unique('c')}/d"
    async with asyncio.timeout(WAIT), tenure.connect(server.url) as client:
        await ydb_client.create_node(f"{DATABASE}/{made_by_ydb}", FULL_CONFIG)
        await client.create_node(made_by_tenure)
        names = await client.list_nodes()
        assert made_by_ydb in names
        assert made_by_tenure in names
        assert await ydb_client.describe_node(f"{DATABASE}/{made_by_ydb}") == FULL_CONFIG
        await ydb_client.describe_node(f"{DATABASE}/{made_by_tenure}")  # found
        async with ydb_client.session(f"{DATABASE}/{made_by_tenure}") as session:
            lock = session.semaphore("lock")
            await lock.acquire()
            [summary] = await client.list_semaphores(made_by_tenure)
            assert (summary.name, summary.owners) == ("lock", 1)
            await lock.release()
        await ydb_client.delete_node(f"{DATABASE}/{made_by_tenure}")
        assert made_by_tenure not in await client.list_nodes()


def test_a_sync_sdk_hold_shows_its_owner_to_tenure(server: YdbServer, driver: ydb.Driver) -> None:
    ydb_client = CoordinationClient(driver)
    name = unique("s")
    ydb_client.create_node(f"{DATABASE}/{name}", settings=BOUNDED)
    with (
        tenure.sync.connect(server.url) as client,
        ydb_client.session(f"{DATABASE}/{name}") as session,
    ):
        lock = session.semaphore("lock")
        lock.acquire(timeout=WAIT)
        [(sid, _)] = owners_of(lock.describe(timeout=WAIT))
        [summary] = client.list_semaphores(name)
        assert (summary.name, summary.limit, summary.count, summary.owners) == ("lock", 1, 1, 1)
        listed = _session(client.list_sessions(name), sid)
        assert listed is not None
        assert (listed.identity.name, listed.holds) == ("ydb", 1)
        lock.release(timeout=WAIT)
        assert client.list_semaphores(name)[0].owners == 0


# -- kill -9 and restart ------------------------------------------------------------------


@pytest.mark.parametrize("stop", [signal.SIGKILL, signal.SIGTERM], ids=["kill-9", "stop"])
def test_sync_sdk_state_survives_a_restart(
    serve: Callable[..., YdbServer], stop: signal.Signals
) -> None:
    running = serve()
    driver = ydb.Driver(endpoint=running.endpoint, database=DATABASE)
    try:
        driver.wait(timeout=WAIT, fail_fast=True)
        client = CoordinationClient(driver)
        path = f"{DATABASE}/{unique()}"
        client.create_node(path, FULL_CONFIG, settings=BOUNDED)
        with client.session(path) as session:
            lock = session.semaphore("kept", 2)
            lock.acquire(1, timeout=WAIT)
            lock.update(b"state", timeout=WAIT)
            held = owners_of(lock.describe(timeout=WAIT))
            running.process.signal(stop)
            serve(data_dir=running.process.data_dir, ydb_port=running.ydb_port)
            # The SDK re-attaches its session to the new run: still the owner.
            again = lock.describe(timeout=WAIT)
            assert (owners_of(again), again.data, again.limit) == (held, b"state", 2)
            assert client.describe_node(path, settings=BOUNDED) == FULL_CONFIG
            lock.release(timeout=WAIT)
            assert lock.describe(timeout=WAIT).owners == []
    finally:
        driver.stop()


async def test_aio_sdk_state_survives_kill_9(serve: Callable[..., YdbServer]) -> None:
    running = serve()
    driver = AioDriver(endpoint=running.endpoint, database=DATABASE)
    try:
        async with asyncio.timeout(3 * WAIT):
            await driver.wait(timeout=WAIT, fail_fast=True)
            client = AioCoordinationClient(driver)
            path = f"{DATABASE}/{unique()}"
            await client.create_node(path, FULL_CONFIG)
            async with client.session(path) as session:
                lock = session.semaphore("kept", 2)
                await lock.acquire(1)
                await lock.update(b"state")
                held = owners_of(await lock.describe())
                running.process.kill()
                serve(data_dir=running.process.data_dir, ydb_port=running.ydb_port)
                again = await lock.describe()
                assert (owners_of(again), again.data, again.limit) == (held, b"state", 2)
                assert await client.describe_node(path) == FULL_CONFIG
                await lock.release()
                assert (await lock.describe()).owners == []
    finally:
        await driver.stop()


async def test_aio_sdk_waiters_keep_their_places_over_kill_9(
    serve: Callable[..., YdbServer],
) -> None:
    running = serve()
    driver = AioDriver(endpoint=running.endpoint, database=DATABASE)
    order: list[str] = []

    async def take(semaphore: Any, who: str) -> None:
        await semaphore.acquire()
        order.append(who)  # before the release: the next grant follows it
        await semaphore.release()

    try:
        async with asyncio.timeout(3 * WAIT):
            await driver.wait(timeout=WAIT, fail_fast=True)
            client = AioCoordinationClient(driver)
            path = f"{DATABASE}/{unique()}"
            await client.create_node(path)
            async with (
                client.session(path) as first,
                client.session(path) as second,
                client.session(path) as third,
            ):
                lock = first.semaphore("queue")
                await lock.acquire()
                takers = []
                for who, session, queued in (("second", second, 1), ("third", third, 2)):
                    takers.append(asyncio.ensure_future(take(session.semaphore("queue"), who)))
                    await apoll(functools.partial(awaiting, lock, queued), f"{who} waits")
                running.process.kill()
                serve(data_dir=running.process.data_dir, ydb_port=running.ydb_port)
                # Every session re-attaches and sends its acquire again: the queue the
                # journal kept is the queue served.
                assert len((await lock.describe()).waiters) == 2
                assert order == []
                await lock.release()
                await asyncio.gather(*takers)
    finally:
        await driver.stop()
    assert order == ["second", "third"]


def test_sync_sdk_waiters_keep_their_places_over_kill_9(
    serve: Callable[..., YdbServer], threads: Threads
) -> None:
    running = serve()
    driver = ydb.Driver(endpoint=running.endpoint, database=DATABASE)
    order: list[str] = []

    def take(semaphore: Any, who: str) -> None:
        semaphore.acquire(timeout=3 * WAIT)
        order.append(who)  # before the release: the next grant follows it
        semaphore.release(timeout=WAIT)

    try:
        driver.wait(timeout=WAIT, fail_fast=True)
        client = CoordinationClient(driver)
        path = f"{DATABASE}/{unique()}"
        client.create_node(path, settings=BOUNDED)
        with (
            client.session(path) as first,
            client.session(path) as second,
            client.session(path) as third,
        ):
            lock = first.semaphore("queue")
            lock.acquire(timeout=WAIT)
            for who, session, queued in (("second", second, 1), ("third", third, 2)):
                threads.start(functools.partial(take, session.semaphore("queue"), who))
                poll(functools.partial(waiting, lock, queued), f"{who} waits")
            running.process.kill()
            serve(data_dir=running.process.data_dir, ydb_port=running.ydb_port)
            assert len(lock.describe(timeout=WAIT).waiters) == 2
            assert order == []
            lock.release(timeout=WAIT)
            threads.join()
    finally:
        driver.stop()
    assert order == ["second", "third"]


# -- session timeouts (raw streams, the SDK watching) --------------------------------------


async def _held_by_raw(raw: Callable[..., Any], path: str, timeout_millis: int) -> tuple[Any, int]:
    """A raw stream whose new session (``timeout_millis``) holds semaphore ``lease``."""
    stream = await raw()
    sid = (await stream.start(path, timeout_millis=timeout_millis)).session_id
    await stream.send(create_semaphore={"req_id": 1, "name": "lease", "limit": 1})
    assert (await stream.next()).create_semaphore_result.status == pb.Status.SUCCESS
    await stream.send(
        acquire_semaphore={"req_id": 2, "name": "lease", "count": 1, "timeout_millis": 0}
    )
    result = (await stream.next()).acquire_semaphore_result
    assert (result.status, result.acquired) == (pb.Status.SUCCESS, True)
    return stream, sid


async def test_a_session_gone_longer_than_its_timeout_is_gone(
    raw: Callable[..., Any], aio_driver: AioDriver
) -> None:
    ydb_client = AioCoordinationClient(aio_driver)
    path = f"{DATABASE}/{unique()}"
    async with asyncio.timeout(WAIT):
        await ydb_client.create_node(path)
    async with asyncio.timeout(2 * WAIT), ydb_client.session(path) as watcher:
        stream, sid = await _held_by_raw(raw, path, timeout_millis=200)
        lease = watcher.semaphore("lease")
        assert owners_of(await lease.describe()) == [(sid, 1)]
        stream.call.cancel()  # the stream is gone; the session waits its timeout

        async def released() -> bool | None:
            return (await lease.describe()).owners == [] or None

        await apoll(released, "the expired session's hold is released")
        await lease.acquire()  # another session takes it at once
        assert [s for s, _ in owners_of(await lease.describe())] != [sid]
        late = await raw()
        await late.send(session_start={"path": path, "session_id": sid, "timeout_millis": 200})
        failure = (await late.next()).failure
        assert failure.status == pb.Status.SESSION_EXPIRED
        await lease.release()


async def test_a_reattach_within_the_timeout_keeps_the_session(
    server: YdbServer, raw: Callable[..., Any], aio_driver: AioDriver
) -> None:
    ydb_client = AioCoordinationClient(aio_driver)
    name = unique()
    path = f"{DATABASE}/{name}"
    async with asyncio.timeout(WAIT):
        await ydb_client.create_node(path)
    timeout_millis = round(2 * WAIT * 1000)  # longer than the whole test
    async with (
        asyncio.timeout(WAIT),
        tenure.connect(server.url) as client,
        ydb_client.session(path) as watcher,
    ):
        stream, sid = await _held_by_raw(raw, path, timeout_millis)
        stream.call.cancel()

        async def detached() -> SessionSummary | None:
            listed = _session(await client.list_sessions(name), sid)
            return listed if listed is not None and listed.expires_in is not None else None

        await apoll(detached, "the server saw the stream go")  # its timeout now runs
        again = await raw()
        started = await again.start(path, session_id=sid, timeout_millis=timeout_millis)
        assert started.session_id == sid
        listed = _session(await client.list_sessions(name), sid)
        assert listed is not None
        assert listed.expires_in is None  # attached again: no expiry runs
        assert owners_of(await watcher.semaphore("lease").describe()) == [(sid, 1)]
        await again.send(release_semaphore={"req_id": 3, "name": "lease"})
        assert (await again.next()).release_semaphore_result.released
        assert (await watcher.semaphore("lease").describe()).owners == []
