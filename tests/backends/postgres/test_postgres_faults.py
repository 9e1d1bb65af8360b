"""postgres:// under faults: a kill -9 of the server, lost answers, a silent client,
and notifications that never arrive (as behind a transaction-pooling pgbouncer)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import psycopg
import pytest

import tenure
from tenure._core.values import MAX_COUNT
from tenure.backends import Capability
from tenure.backends.postgres import PgBackend, _listen
from tenure.backends.postgres._url import PgOptions
from tenure.errors import (
    LeaseLostError,
    NotFoundError,
    SessionExpiredError,
    UnavailableError,
    UnsupportedError,
)
from tests.backends.postgres.database import fetch, schema_of
from tests.netproxy import NetProxy
from tests.postgres.server import PostgresServer


def _schema() -> str:
    return f"t_{uuid.uuid4().hex[:12]}"


@contextlib.asynccontextmanager
async def _through_proxy(server: PostgresServer, url: str) -> AsyncIterator[tuple[NetProxy, str]]:
    """A NetProxy in front of ``server``, and ``url`` made to go through it."""
    async with NetProxy("127.0.0.1", server.port) as proxy:
        yield proxy, url.replace(f":{server.port}/", f":{proxy.port}/")


async def _queued(
    session: tenure.Session, name: str, *, settle: float
) -> asyncio.Future[tenure.Lock]:
    """A lock of mutex ``name`` by ``session``, seen still waiting ``settle`` s later."""
    waiter = asyncio.ensure_future(session.mutex(name).lock())
    await asyncio.sleep(settle)
    assert not waiter.done()
    return waiter


async def _lost_after_applied(proxy: NetProxy, applied: Callable[[], Awaitable[bool]]) -> None:
    """Until the database has applied a request (``applied``, asked on another
    connection) and the proxy has thrown away what it answered: a wait for the state,
    bounded against a hang (a fixed 0.5 s was too short on a loaded machine: the request
    not yet sent, the client knew it safe to send again)."""
    before = proxy.lost_downstream_bytes
    deadline = asyncio.get_running_loop().time() + 30.0
    while not (await applied() and proxy.lost_downstream_bytes > before):
        assert asyncio.get_running_loop().time() < deadline, "the request was never applied"
        await asyncio.sleep(0.02)


async def test_a_kill_9_mid_hold_loses_nothing_and_the_session_carries_on(
    postgres_fresh: PostgresServer,
) -> None:
    url = postgres_fresh.url(schema=_schema(), pool_size="2")
    async with tenure.connect(url) as holder, tenure.connect(url) as other:
        await holder.create_node("n")
        session = await holder.session("n", recovery_window=20.0)
        lock = await session.mutex("m").lock()
        pool = session.semaphore("pool")
        await pool.create(limit=3, data=b"kept")
        held = await pool.acquire(count=2, data=b"mine")
        waiting_session = await other.session("n", recovery_window=20.0)
        waiter = await _queued(waiting_session, "m", settle=0.3)

        await postgres_fresh.akill()
        await asyncio.sleep(0.5)
        await postgres_fresh.astart()

        # The session is the same (its holds too, with their tokens); the waiter waits on.
        found = await asyncio.wait_for(pool.describe(owners=True), 20)
        assert [(o.session_id, o.count, o.data, o.token) for o in found.owners] == [
            (session.id, 2, b"mine", held.token)
        ]
        assert found.data == b"kept"
        assert not lock.lost.ended
        assert not waiter.done()
        await lock.release()
        granted = await asyncio.wait_for(waiter, 20)
        assert granted.token > max(lock.token, held.token)
        await granted.release()
        again = await session.mutex("m").lock()
        assert again.token > granted.token  # tokens keep increasing across the crash


async def test_an_acquire_whose_answer_was_lost_is_applied_once(
    postgres_server: PostgresServer,
) -> None:
    url = postgres_server.url(schema=_schema(), pool_size="1")
    async with (
        _through_proxy(postgres_server, url) as (proxy, proxied),
        tenure.connect(proxied) as client,
        tenure.connect(url) as observer,
    ):
        await client.create_node("n")
        session = await client.session("n", recovery_window=10.0)
        look = await observer.session("n")

        async def held() -> bool:
            with contextlib.suppress(NotFoundError):
                return bool((await look.semaphore("m").describe(owners=True)).owners)
            return False

        async def created() -> bool:
            with contextlib.suppress(NotFoundError):
                return (await look.semaphore("s").describe()).exists
            return False

        proxy.lose_downstream()
        acquiring = asyncio.ensure_future(session.mutex("m").lock(data=b"once"))
        await _lost_after_applied(proxy, held)  # applied, its answer thrown away
        proxy.lose_downstream(False)
        proxy.drop()
        lock = await asyncio.wait_for(acquiring, 10)
        found = await look.semaphore("m").describe(owners=True)
        assert [(o.session_id, o.data, o.token) for o in found.owners] == [
            (session.id, b"once", lock.token)
        ]
        await lock.release()
        with pytest.raises(NotFoundError):  # the one hold is gone, and the mutex with it
            await look.semaphore("m").describe(owners=True)

        # A create whose answer was lost is not sent again: it says so.
        proxy.lose_downstream()
        creating = asyncio.ensure_future(session.semaphore("s").create(limit=1))
        await _lost_after_applied(proxy, created)
        proxy.lose_downstream(False)
        proxy.drop()
        with pytest.raises(UnavailableError, match="may or may not have been applied"):
            await asyncio.wait_for(creating, 10)
        assert (await look.semaphore("s").describe()).exists  # it was, this time


async def test_a_timeout_read_again_after_its_answer_was_lost_is_still_a_timeout(
    postgres_server: PostgresServer, pg_url: str
) -> None:
    """Found by the fault suite's linearizable scenario: a waiter past its deadline asks
    ``check_request``, which ends the wait there and then (or reads the timeout another
    client's reap left, and took it); that answer lost with its connection, the call
    is sent again, and found neither the wait, nor a grant, nor an outcome: "gone",
    which the client told its caller as AcquireCancelledError (a withdrawal nobody
    made), not TimeoutError. The ending is now left as an outcome, and reading it
    leaves it: a call sent again reads it again."""
    async with tenure.connect(pg_url) as client:
        await client.create_node("n")
        one, two = await client.session("n"), await client.session("n")
        busy = await one.mutex("m").lock()
        backend = client.backend
        assert isinstance(backend, PgBackend)
        store = backend.sessions[two.id]
        queued = await store.call("acquire", "m", 7, MAX_COUNT, b"", 0.2, True, 77, None)
        assert queued == {"queued": 0.2}
        await asyncio.sleep(0.3)
        first = await store.call("check_request", "m", 7, 77)
        again = await store.call("check_request", "m", 7, 77)  # its answer was lost
        assert (first["ended"], again["ended"]) == ("timeout", "timeout")
        # Timed out by a reap (any client's) instead: read twice, the same.
        assert await store.call("acquire", "m", 8, MAX_COUNT, b"", 0.2, True, 88, None) == {
            "queued": 0.2
        }
        await asyncio.sleep(0.3)
        await fetch(postgres_server.dsn, f"SELECT {schema_of(pg_url)}.reap('n')")
        first = await store.call("check_request", "m", 8, 88)
        again = await store.call("check_request", "m", 8, 88)
        assert (first["ended"], again["ended"]) == ("timeout", "timeout")
        await busy.release()


async def test_an_update_whose_answer_was_lost_is_not_applied_again_after_another(
    postgres_server: PostgresServer,
) -> None:
    """Found by the fault suite's linearizable scenario (on tenure://, then looked for
    here): an update sent again after its answer was lost was applied a second time
    after another client's update, undoing it. It is no longer sent again: its outcome
    is unknown (UnavailableError)."""
    url = postgres_server.url(schema=_schema(), pool_size="1")
    async with (
        _through_proxy(postgres_server, url) as (proxy, proxied),
        tenure.connect(proxied) as client,
        tenure.connect(url) as other_client,
    ):
        await client.create_node("n")
        session = await client.session("n", recovery_window=10.0)
        other = await other_client.session("n")
        await other.semaphore("r").create(limit=1, data=b"0")

        async def mine() -> bool:
            return (await other.semaphore("r").describe()).data == b"mine"

        proxy.lose_downstream()
        updating = asyncio.ensure_future(session.semaphore("r").update(b"mine"))
        await _lost_after_applied(proxy, mine)  # applied, its answer thrown away
        await other.semaphore("r").update(b"theirs")
        proxy.lose_downstream(False)
        proxy.drop()
        with pytest.raises(UnavailableError, match="may or may not have been applied"):
            await asyncio.wait_for(updating, 10)
        await asyncio.sleep(0.5)
        assert (await other.semaphore("r").describe()).data == b"theirs"


async def test_a_silent_client_expires_by_the_databases_clock(
    postgres_server: PostgresServer,
) -> None:
    url = postgres_server.url(schema=_schema(), pool_size="2")
    async with (
        _through_proxy(postgres_server, url) as (proxy, proxied),
        tenure.connect(proxied) as silent,
        tenure.connect(url) as other,
    ):
        await other.create_node("n")
        session = await silent.session("n", recovery_window=2.0)
        lock = await session.mutex("m").lock()
        waiting = await other.session("n", recovery_window=10.0)
        waiter = await _queued(waiting, "m", settle=0.2)
        loop = asyncio.get_running_loop()
        stalled_at = loop.time()
        proxy.stall()
        # Its own client gives up a window after its last answered heartbeat...
        reason = await asyncio.wait_for(lock.lost.wait(), 5)
        assert isinstance(reason, SessionExpiredError)
        # ...and the other client's reap timer ends it on the database's clock.
        granted = await asyncio.wait_for(waiter, 6)
        assert loop.time() - stalled_at < 2.0 * 1.02 + 3
        assert granted.token > lock.token
        proxy.resume()
        with pytest.raises(SessionExpiredError):
            await session.mutex("other").lock()
        await granted.release()


class _ElsewhereListener(_listen.PgListener):
    """A LISTEN connection to another database: NOTIFYs of ours never reach it."""

    elsewhere = ""

    def __init__(self, options: PgOptions) -> None:
        super().__init__(dataclasses.replace(options, conninfo=self.elsewhere))


async def test_without_notifications_watches_are_refused_and_waiters_still_served(
    postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    other_db = f"t_{uuid.uuid4().hex[:16]}"
    _ElsewhereListener.elsewhere = postgres_server.create_database(other_db)
    monkeypatch.setattr("tenure.backends.postgres.PgListener", _ElsewhereListener)
    url = postgres_server.url(
        schema=_schema(), pool_size="2", listen_probe_timeout="0.5", recheck_interval="0.2"
    )
    try:
        async with tenure.connect(url) as one, tenure.connect(url) as two:
            assert Capability.WATCH not in one.capabilities
            with pytest.raises(UnsupportedError, match="watch"):
                await tenure.connect(url, require={Capability.WATCH})
            await one.create_node("n")
            first = await one.session("n")
            second = await two.session("n")
            with pytest.raises(UnsupportedError, match="NOTIFY did not reach"):
                await anext(first.semaphore("m").watch())
            lock = await first.mutex("m").lock()
            waiter = await _queued(second, "m", settle=0.3)
            await lock.release()
            granted: Any = await asyncio.wait_for(waiter, 3)  # found by a bounded re-check
            assert granted.token > lock.token
    finally:
        postgres_server.drop_database(other_db)


async def test_a_grant_notified_while_the_listen_connection_was_down_is_found(
    postgres_server: PostgresServer,
) -> None:
    url = postgres_server.url(schema=_schema(), pool_size="2")
    async with (
        _through_proxy(postgres_server, url) as (proxy, proxied),
        tenure.connect(url) as holder,
        tenure.connect(proxied) as waiter_client,
    ):
        await holder.create_node("n")
        owner = await holder.session("n", recovery_window=10.0)
        lock = await owner.mutex("m").lock()
        waiting = await waiter_client.session("n", recovery_window=10.0)
        waiter = await _queued(waiting, "m", settle=0.3)
        proxy.refuse()
        proxy.drop()  # the waiter's client loses every connection, LISTEN's too
        await lock.release()  # its grant's notification goes nowhere
        await asyncio.sleep(0.5)
        assert not waiter.done()
        proxy.refuse(False)  # the LISTEN connection comes back: everyone reads again
        granted = await asyncio.wait_for(waiter, 10)
        assert granted.token > lock.token
        await granted.release()


async def test_lock_delay_holds_back_an_expired_holders_semaphore(
    postgres_server: PostgresServer,
) -> None:
    url = postgres_server.url(schema=_schema(), pool_size="2")
    async with (
        _through_proxy(postgres_server, url) as (proxy, proxied),
        tenure.connect(proxied) as silent,
        tenure.connect(url) as other,
    ):
        await other.create_node("n", lock_delay=2.0)
        holder = await silent.session("n", recovery_window=1.0)
        lock = await holder.mutex("m").lock()
        released = await holder.mutex("clean").lock()
        waiting = await other.session("n", recovery_window=10.0)
        observer = await other.session("n", recovery_window=10.0)

        # A clean release is not held back.
        after_clean = await _queued(waiting, "clean", settle=0.2)
        await released.release()
        clean = await asyncio.wait_for(after_clean, 2)
        await clean.release()

        waiter = await _queued(waiting, "m", settle=0.2)
        loop = asyncio.get_running_loop()
        stalled_at = loop.time()
        proxy.stall()  # the holder's session expires about 1 s from here

        async def expired() -> bool:
            found = await observer.semaphore("m").describe(owners=True, waiters=True)
            return found.owners == ()

        while not await expired():
            assert loop.time() - stalled_at < 5, "the holder never expired"
            await asyncio.sleep(0.1)
        gone_at = loop.time()
        # Expired, and its semaphore held back: nobody is granted, a try fails.
        assert await observer.mutex("m").try_lock() is None
        await asyncio.sleep(1.0)
        assert not waiter.done()
        granted = await asyncio.wait_for(waiter, 5)
        assert loop.time() - gone_at >= 1.5  # the 2 s delay, give or take a poll
        assert granted.token > lock.token
        proxy.resume()
        await granted.release()


async def test_a_lease_not_renewed_within_its_ttl_is_lost_and_the_session_stays(
    postgres_server: PostgresServer,
) -> None:
    url = postgres_server.url(schema=_schema(), pool_size="2")
    async with (
        _through_proxy(postgres_server, url) as (proxy, proxied),
        tenure.connect(proxied) as paused,
        tenure.connect(url) as other,
    ):
        await other.create_node("n", default_lease=1.0)
        holder = await paused.session("n", recovery_window=20.0)
        lock = await holder.mutex("m").lock()
        waiting = await other.session("n", recovery_window=20.0)
        waiter = await _queued(waiting, "m", settle=0.3)
        proxy.stall()  # no renewal reaches the database any more
        granted = await asyncio.wait_for(waiter, 5)  # ended by the database's clock
        assert granted.token > lock.token
        proxy.resume()
        reason = await asyncio.wait_for(lock.lost.wait(), 10)
        assert isinstance(reason, LeaseLostError)
        assert holder.lost_reason is None  # only the lease ran out, not the session
        again = asyncio.ensure_future(holder.mutex("m").lock())
        await granted.release()
        assert (await asyncio.wait_for(again, 5)).token > granted.token


async def test_a_call_cancelled_before_it_could_be_sent_ends_at_once(
    postgres_server: PostgresServer,
) -> None:
    url = postgres_server.url(schema=_schema(), pool_size="1")
    async with (
        _through_proxy(postgres_server, url) as (proxy, proxied),
        tenure.connect(proxied) as client,
    ):
        await client.create_node("n")
        session = await client.session("n", recovery_window=30.0)
        proxy.refuse()
        proxy.drop()  # every connection gone, and no new one gets through
        acquiring = asyncio.ensure_future(session.mutex("m").lock())
        await asyncio.sleep(0.5)  # it waits (within its window) for a connection
        assert not acquiring.done()
        loop = asyncio.get_running_loop()
        cancelled_at = loop.time()
        acquiring.cancel()
        with pytest.raises(asyncio.CancelledError):
            await acquiring
        assert loop.time() - cancelled_at < 2.0  # not the 30 s window
        proxy.refuse(False)


async def test_a_release_the_database_did_not_answer_is_sent_until_it_is(
    postgres_server: PostgresServer,
) -> None:
    """Found by the fault suite (network): a release given up while its session lived on
    left the owner row, and the session's next acquire of the mutex restated it, old
    token and all. Here the release's calls run into request_timeout (another
    transaction holds the semaphore's row) while the heartbeats get through: the
    release keeps its hold's number taken and is sent again until it is answered."""
    schema = _schema()
    url = postgres_server.url(schema=schema, pool_size="2", request_timeout="0.3")
    async with tenure.connect(url) as client:
        await client.create_node("n")
        session = await client.session("n", recovery_window=30.0)
        lock = await session.mutex("m").lock()
        async with await psycopg.AsyncConnection.connect(postgres_server.dsn) as blocker:
            async with blocker.transaction():
                await blocker.execute(
                    f'SELECT 1 FROM "{schema}".semaphores WHERE name = %s FOR UPDATE', ["m"]
                )
                releasing = asyncio.ensure_future(lock.release())
                await asyncio.sleep(1.5)  # several tries, each cut off by request_timeout
                assert not releasing.done()
            await asyncio.wait_for(releasing, 10)
        assert session.lost_reason is None
        again = await session.mutex("m").lock(timeout=5)
        assert again.token > lock.token
        found = await session.semaphore("m").describe(owners=True)
        assert [(o.session_id, o.token) for o in found.owners] == [(session.id, again.token)]


async def test_a_release_on_a_stalled_link_ends_with_the_session(
    postgres_server: PostgresServer,
) -> None:
    """A release whose call hangs on a stalled link (it can be neither cancelled nor
    bounded) ends when the session does, a window after the last answer, never later;
    the database ends the session's holds with it."""
    url = postgres_server.url(schema=_schema(), pool_size="2")
    async with (
        _through_proxy(postgres_server, url) as (proxy, proxied),
        tenure.connect(proxied) as client,
        tenure.connect(url) as observer,
    ):
        await client.create_node("n")
        session = await client.session("n", recovery_window=2.0)
        lock = await session.mutex("m").lock()
        proxy.stall()
        try:
            await asyncio.wait_for(lock.release(), 10)  # release() takes a loss quietly
            assert isinstance(session.lost_reason, SessionExpiredError)
        finally:
            proxy.resume()
        look = await observer.session("n")
        taken = await look.mutex("m").lock(timeout=10)
        assert taken.token > lock.token


async def test_a_grant_made_while_the_holds_were_read_is_not_declared_lost(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by the fault suite (network): a lease TTL of the session ran out, its
    client read back its holds, and a grant made while that read was on its way was
    missing from the answer: it was declared lost, its hold number reused, and the
    next acquire of the mutex restated the owner row, old token and all. Here the
    read's answer is held back (the database answered it before the grant) until the
    grant is in."""
    from tenure.backends.postgres import PgBackend
    from tenure.backends.postgres._store import PgStore

    answered = asyncio.Event()
    go_on = asyncio.Event()
    real_call = PgStore.call

    async def call(self: PgStore, function: str, *args: object, idempotent: bool = True) -> Any:
        value = await real_call(self, function, *args, idempotent=idempotent)
        if function == "holds" and not go_on.is_set():
            answered.set()
            await go_on.wait()  # the answer is late: the grant below comes first
        return value

    monkeypatch.setattr(PgStore, "call", call)
    async with tenure.connect(pg_url) as client:
        await client.create_node("n")
        session = await client.session("n")
        backend = client.backend
        assert isinstance(backend, PgBackend)
        store = backend.sessions[session.id]
        store.session.spawn(store.check_holds(None))
        await asyncio.wait_for(answered.wait(), 5)
        lock = await session.mutex("m").lock()
        go_on.set()
        await asyncio.sleep(0.3)  # the read's answer is judged now
        assert lock.held
        await lock.release()
        again = await session.mutex("m").lock()
        assert again.token > lock.token
