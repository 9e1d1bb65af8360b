"""The sync face on ``tenure://``: the same names, against a real ``tenure serve``.

The sync calls block, so each scenario runs in a worker thread (``to_thread``)
while the test's event loop keeps the fault-injecting proxy running.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from pathlib import Path

import pytest

import tenure.sync
from tenure.errors import LostError, SessionExpiredError
from tests.netproxy import NetProxy
from tests.server.wire import ServerProcess

WAIT = 10.0


async def test_every_recipe_works_over_the_network(tenure_server: ServerProcess) -> None:
    url = f"tenure://127.0.0.1:{tenure_server.port}"

    def scenario() -> None:
        with tenure.sync.connect(url) as client:
            client.create_node("n")
            with client.session("n") as me, client.session("n") as other:
                with me.mutex("job") as lock:
                    assert other.mutex("job").try_lock() is None
                    first = lock.token
                later = other.mutex("job").try_lock()
                assert later is not None
                assert later.token > first
                later.release()

                pool = me.semaphore("pool")
                pool.create(limit=2, data=b"v1")
                with pool.acquire(count=2) as lease:
                    assert other.semaphore("pool").try_acquire() is None
                    assert lease.count == 2
                with other.semaphore("pool").watch(data=True) as stream:
                    assert next(stream).data == b"v1"
                    pool.update(b"v2")
                    assert next(stream).data == b"v2"

                with me.election("lead").campaign(b"me") as leadership:
                    state = other.election("lead").leader()
                    assert state is not None
                    assert (state.session_id, state.data) == (me.id, b"me")
                    assert leadership.token > 0

    await asyncio.to_thread(scenario)


async def test_a_lost_connection_beyond_the_window_reaches_blocking_code(
    proxy: NetProxy,
) -> None:
    url = f"tenure://127.0.0.1:{proxy.port}"
    holding = threading.Event()
    callbacks: list[LostError] = []

    def hold() -> BaseException | None:
        with tenure.sync.connect(url) as client:
            client.create_node("n")
            session = client.session("n", recovery_window=1.0)
            lock = session.mutex("job").lock()
            lock.on_lost(callbacks.append)
            holding.set()
            assert lock.lost.wait(WAIT), "the loss never reached the blocked thread"
            assert session.lost.is_set()
            return lock.lost_reason

    worker = asyncio.ensure_future(asyncio.to_thread(hold))
    assert await asyncio.to_thread(holding.wait, WAIT)
    proxy.refuse()
    proxy.drop()
    async with asyncio.timeout(WAIT):
        reason = await worker
    assert isinstance(reason, SessionExpiredError)
    assert len(callbacks) == 1
    assert isinstance(callbacks[0], SessionExpiredError)


@pytest.mark.parametrize("held", ["mutex", "lock_all", "group"])
def test_release_after_with_waits_for_the_release_that_leaving_started(
    tmp_path: Path, held: str
) -> None:
    """Leaving ``with`` starts the release (a group's leave) without waiting for its
    answer; a ``release()`` (``leave()``) after it waits for that answer, as the async
    face's does (it returned at once: another client could still find the mutex
    taken, the member in the group)."""
    with ServerProcess(tmp_path / "data", "--fsync", "off") as server:
        url = f"tenure://127.0.0.1:{server.port}"
        with tenure.sync.connect(url) as client, tenure.sync.connect(url) as client2:
            client.create_node("n")
            session = client.session("n", recovery_window=60.0)
            if held == "group":
                session.group("g").create()
            taking: tenure.sync.Lock | tenure.sync.HeldLocks | tenure.sync.GroupMember = (
                session.mutex("job").lock()
                if held == "mutex"
                else session.lock_all(["job"])
                if held == "lock_all"
                else session.group("g").join("a")
            )
            with taking:
                server.proc.send_signal(signal.SIGSTOP)  # no answer until SIGCONT
            ending = taking.leave if isinstance(taking, tenure.sync.GroupMember) else taking.release
            try:
                releasing = threading.Thread(target=ending)
                releasing.start()
                releasing.join(0.5)
                # The server cannot have answered: the release is still waited for.
                assert releasing.is_alive()
            finally:
                server.proc.send_signal(signal.SIGCONT)
            releasing.join(WAIT)
            assert not releasing.is_alive()
            other = client2.session("n")
            if isinstance(taking, tenure.sync.GroupMember):
                assert other.group("g").members() == {}
                return
            taken = other.mutex("job").try_lock()
            assert taken is not None
            first = taking.token if isinstance(taking, tenure.sync.Lock) else taking.tokens["job"]
            assert taken.token > first
