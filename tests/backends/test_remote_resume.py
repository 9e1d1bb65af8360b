"""Resume on tenure://: the fence against the old connection, and the journal.

The conformance kit (test_resume) checks what every backend promises; here, what
only a real server and a real network can show: an old owner that did not hear it
was fenced (its push lost) is refused when it re-attaches, and a resume survives a
restart of the server (it is journaled like any other command).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import tenure
from tenure.errors import LostError, SessionExpiredError
from tests.api.support import eventually, owners, spawn, wait_for_waiters, waiters, within
from tests.backends.test_remote import reconnected
from tests.netproxy import NetProxy
from tests.server.wire import ServerProcess


async def test_an_old_owner_that_missed_the_news_is_refused_on_reattach(
    client: tenure.Client, direct: tenure.Client, proxy: NetProxy
) -> None:
    old = await client.session("n", recovery_window=30.0)
    lock = await old.mutex("job").lock()
    proxy.lose_downstream()  # the SessionEnded push to the old owner is lost

    new = await direct.session("n", resume=old.ticket())
    assert old.lost_reason is None  # it has not heard

    proxy.lose_downstream(False)
    proxy.drop()  # it reconnects and re-attaches with its own seq_no + 1: stale

    await eventually(lost(old), "the old owner's re-attach is refused")
    assert isinstance(old.lost_reason, SessionExpiredError)
    assert isinstance(lock.lost_reason, SessionExpiredError)
    [resumed] = new.leases()
    assert resumed.held
    assert resumed.token == lock.token
    assert await owners(new, "job") == [new.id]


async def test_a_resume_survives_a_restart_of_the_server(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = ServerProcess(data).__enter__()
    try:
        async with NetProxy("127.0.0.1", first.port) as proxy:
            url = f"tenure://127.0.0.1:{proxy.port}"
            async with tenure.connect(url) as old_client, tenure.connect(url) as new_client:
                await old_client.create_node("n")
                old = await old_client.session("n", recovery_window=30.0)
                waiter = await old_client.session("n", recovery_window=30.0)
                lock = await old.mutex("job").lock()
                queued = spawn(old.mutex("other").lock())  # nobody holds it: granted
                await within(queued)
                waiting = spawn(waiter.mutex("job").lock())
                await wait_for_waiters(waiter, "job", 1)
                new = await new_client.session("n", resume=old.ticket())
                await eventually(lost(old), "the old owner hears it was resumed")

                first.kill()
                second = ServerProcess(data).__enter__()
                try:
                    proxy.upstream_port = second.port
                    await reconnected(new_client, 2)
                    await reconnected(old_client, 2)

                    tokens = sorted(lease.token for lease in new.leases())
                    assert lock.token in tokens
                    assert all(lease.held for lease in new.leases())
                    assert new.lost_reason is None
                    assert await owners(waiter, "job") == [new.id]
                    assert await waiters(waiter, "job") == [waiter.id]
                    for lease in new.leases():
                        await lease.release()
                    granted = await within(waiting)
                    assert granted.token > lock.token
                finally:
                    second.kill()
    finally:
        first.kill()


def lost(session: tenure.Session) -> Callable[[], Awaitable[bool]]:
    """A check that ``session`` has ended with a loss (for ``eventually``)."""

    async def check() -> bool:
        return isinstance(session.lost_reason, LostError)

    return check
