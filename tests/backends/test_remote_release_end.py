"""A release on ``tenure://`` that crosses its session's end: nothing to do, nothing logged.

A session's end gives back every hold it had, so a release of one of them that
meets the end has nothing left to do. Two ways a release used to be answered with
an error that was logged as a failure (``release of ('job', 0) failed: session N is
not attached to this connection``, seen once in ``python -m bench.micro.takeover``):

* the session is **killed** (or ended by the server otherwise) while its client
  releases a hold: the server has forgotten the session when the release comes,
  and refuses it (PERMISSION_DENIED) right behind the SessionEnded push. The
  release's answer is the session's loss, which is not logged;
* the release **waits for a connection** while the session is closed: the close is
  sent during the next connection's set-up, ahead of any request, and the release
  must then not be sent at all (it was, after the close).

The proxy holds what both sides send (``stall``) or keeps the client out
(``refuse``), so each order is forced, not raced.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import pytest

import tenure
from tenure.backends._session import StoreSession
from tenure.backends.remote import TenureBackend
from tenure.errors import LostError
from tests.api.support import eventually, within
from tests.netproxy import NetProxy
from tests.server.http import scrape, value
from tests.server.wire import ServerProcess, free_port

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def measured_server(tmp_path: Path) -> Iterator[tuple[ServerProcess, int]]:
    """A ``tenure serve`` with its metrics endpoint: (the process, its HTTP port)."""
    http_port = free_port()
    with ServerProcess(
        tmp_path / "data", "--fsync", "off", "--http-port", str(http_port)
    ) as server:
        yield server, http_port


@pytest.fixture
async def measured_proxy(measured_server: tuple[ServerProcess, int]) -> AsyncIterator[NetProxy]:
    async with NetProxy("127.0.0.1", measured_server[0].port) as proxy:
        yield proxy


def _store_session(session: tenure.Session) -> StoreSession:
    backend = session._backend
    assert isinstance(backend, StoreSession)
    return backend


def _settled(session: tenure.Session) -> Callable[[], Awaitable[bool]]:
    """Whether the session's releases are through (sent, and answered or given up)."""

    async def check() -> bool:
        return not _store_session(session).ledger.releasing

    return check


async def test_a_release_behind_its_sessions_kill_is_answered_by_the_kill(
    client: tenure.Client,
    direct: tenure.Client,
    proxy: NetProxy,
    caplog: pytest.LogCaptureFixture,
) -> None:
    session = await client.session("n", recovery_window=10.0)
    lock = await session.mutex("job").lock()
    proxy.stall()
    await direct.kill_session("n", session.id)  # its SessionEnded push waits in the proxy
    # The client does not know yet: the release is sent at once, and reaches the
    # server after the kill, which has forgotten the session.
    await lock.release(wait=False)
    with caplog.at_level(logging.DEBUG, logger="tenure.client"):
        proxy.resume()
        await within(lock.release())  # the answer: the kill (a loss, which this swallows)
        await eventually(_settled(session), "the release settled")
    assert session.closed
    assert isinstance(_store_session(session).ended, LostError)
    assert "release of" not in caplog.text
    assert "not attached" not in caplog.text


async def test_a_release_waiting_for_a_connection_is_not_sent_once_its_session_closed(
    measured_server: tuple[ServerProcess, int],
    measured_proxy: NetProxy,
    caplog: pytest.LogCaptureFixture,
) -> None:
    proxy, (_, http_port) = measured_proxy, measured_server
    async with tenure.connect(f"tenure://127.0.0.1:{proxy.port}") as client:
        await client.create_node("n")
        backend = client.backend
        assert isinstance(backend, TenureBackend)
        link = backend.shards[0].link
        session = await client.session("n", recovery_window=10.0)
        lock = await session.mutex("job").lock()
        proxy.refuse()
        proxy.drop()

        async def disconnected() -> bool:
            return not link.connected

        async def reconnected() -> bool:
            return link.epoch >= 2 and link.connected

        await eventually(disconnected, "the connection lost")
        with caplog.at_level(logging.DEBUG, logger="tenure.client"):
            await lock.release(wait=False)  # no connection: a task sends it once there is one
            for _ in range(3):  # turns of the loop: the task starts, and waits for a connection
                await asyncio.sleep(0)
            await session.close()  # closed on the server after the next attach, first thing
            proxy.refuse(False)
            await eventually(reconnected, "connection 2")
            await eventually(_settled(session), "the release settled")
        samples = await scrape(http_port)
    requests = "tenure_requests_total"
    assert value(samples, requests, command="close_session", result="ok") == 1
    # Nothing of the closed session's was sent after its close.
    assert value(samples, requests, command="release", result="permission_denied") == 0
    assert value(samples, requests, command="release", result="ok") == 0
    assert "release of" not in caplog.text
