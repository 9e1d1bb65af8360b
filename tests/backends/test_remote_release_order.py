"""A release on ``tenure://`` reaches the server before what its session asks next.

A task that leaves ``async with`` starts its release and goes on; if it then asks
again (an election's candidate campaigning again, a worker taking the next job's
lock) the server must see the release first. It did when the release was written at
once, but not when it could not be (no connection) or its connection was lost before
the answer: the release was then sent from a task that woke after the next request
of the same task was sent, and the server, seeing the task hold what it asked for
again, refused the request with DeadlockError (``session 1 (task 1) waits for 'job'
held by session 1 (task 1)``): a false deadlock, seen once in five short soaks'
elections. Now such a release is written again ahead of the session's next request.

The proxy keeps the client out (``refuse``) or holds what it sends (``stall``), so
each order is forced, not raced.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

import tenure
from tenure.backends._session import StoreSession
from tenure.backends.remote import TenureBackend
from tests.api.support import eventually, spawn, within
from tests.netproxy import NetProxy

pytestmark = pytest.mark.timeout(60)


def connected(client: tenure.Client, up: bool) -> Callable[[], Awaitable[bool]]:
    backend = client.backend
    assert isinstance(backend, TenureBackend)
    link = backend.shards[0].link

    async def check() -> bool:
        return link.connected is up

    return check


async def test_a_release_made_while_disconnected_goes_before_the_tasks_next_acquire(
    client: tenure.Client, proxy: NetProxy
) -> None:
    session = await client.session("n", recovery_window=10.0)
    async with session.mutex("job").lock() as lock:
        proxy.refuse()
        proxy.drop()
        await eventually(connected(client, False), "the connection lost")
    # The release could not be written: it waits for the next connection, and so does
    # this task's next acquire of the same mutex.
    proxy.refuse(False)
    again = await within(session.mutex("job").lock(), "the same task's next lock")
    assert again.token > lock.token
    await again.release()


async def test_a_release_cut_off_with_its_connection_goes_before_the_tasks_next_acquire(
    client: tenure.Client, proxy: NetProxy
) -> None:
    session = await client.session("n", recovery_window=10.0)
    backend_session = session._backend_session()
    assert isinstance(backend_session, StoreSession)
    ledger = backend_session.ledger

    async def acquiring() -> bool:
        return bool(ledger.pending)

    async def cut_off_both() -> None:
        # The release and the next acquire are written, held by the proxy; then the
        # connection is lost with both unanswered, and both are sent again.
        await eventually(acquiring, "the next acquire sent")
        proxy.drop()
        proxy.resume()

    async with session.mutex("job").lock() as lock:
        proxy.stall()
    cutting = spawn(cut_off_both())
    again = await within(session.mutex("job").lock(), "the same task's next lock")
    await within(cutting)
    assert again.token > lock.token
    await again.release()
