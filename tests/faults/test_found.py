"""Bugs the fault suite found, each pinned down by a small deterministic reproducer."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

import tenure
from tenure.errors import SessionExpiredError, UnavailableError
from tests.api.support import wait_for_waiters
from tests.netproxy import NetProxy
from tests.server.wire import ServerProcess


def _stall_the_loop(seconds: float) -> None:
    """Block the calling thread, and so its event loop (a GC pause, swap, a slow VM)."""
    time.sleep(seconds)


async def test_a_grant_that_arrives_with_the_sessions_expiry_is_not_a_held_lock(
    tmp_path: Path,
) -> None:
    # Found by the pause-clock scenario (a client whose monotonic clock jumped back
    # and forth): the Granted push and the client's own expiry of the session
    # (promise 6a) were handled in one turn of the loop, and lock() returned a lock
    # that looked held, on a lost session, and was never lost: its body ran on
    # while the server had given the mutex to someone else.
    with ServerProcess(tmp_path / "data", "--fsync", "off") as server:
        url = f"tenure://127.0.0.1:{server.port}"
        async with tenure.connect(url) as a_client, tenure.connect(url) as b_client:
            await a_client.create_node("n")
            a = await a_client.session("n")
            b = await b_client.session("n", recovery_window=1.0)
            held = await a.mutex("job").lock()
            waiting = asyncio.create_task(b.mutex("job").lock())
            await wait_for_waiters(a, "job", 1)
            releasing = asyncio.create_task(held.release())
            await asyncio.sleep(0)  # the Release is written; the server grants to b
            _stall_the_loop(1.5)  # past b's window: its deadline and the grant come together
            with pytest.raises(SessionExpiredError):
                await waiting
            await releasing
            assert isinstance(b.lost_reason, SessionExpiredError)


async def test_a_release_after_the_loop_stalled_past_the_window_reports_the_loss(
    tmp_path: Path,
) -> None:
    # Found by the linearizable scenario (lincheck's mutex model): a client whose event
    # loop was blocked past its recovery window while it held a lock (a worker paused
    # in a blocking call) released it first thing when it ran again. The release ran
    # before the session's deadline timer, so it ended the lease as released (no
    # loss, lost_reason None) although the server had expired the session and granted
    # the lock to another client meanwhile: the holder believed in its lease longer
    # than the server could (promise 6a). Leaving `async with` did the same, without
    # raising the loss; leaving a group likewise.
    with ServerProcess(tmp_path / "data", "--fsync", "off") as server:
        url = f"tenure://127.0.0.1:{server.port}"
        async with tenure.connect(url) as client:
            await client.create_node("n")
            session = await client.session("n", recovery_window=1.0)
            lock = await session.mutex("job").lock()
            _stall_the_loop(1.5)
            await lock.release()
            assert isinstance(lock.lost_reason, SessionExpiredError)

            session = await client.session("n", recovery_window=1.0)
            with pytest.raises(SessionExpiredError):
                async with session.mutex("job") as held:
                    _stall_the_loop(1.5)
            assert isinstance(held.lost_reason, SessionExpiredError)

            session = await client.session("n", recovery_window=1.0)
            member = await session.group("g").join("me")
            _stall_the_loop(1.5)
            await member.leave()
            assert isinstance(member.lost_reason, SessionExpiredError)


async def test_an_update_whose_answer_was_lost_is_not_applied_again_after_another(
    tmp_path: Path,
) -> None:
    # Found by the linearizable scenario (lincheck's watch check, tenure-cluster): an
    # update of a semaphore's data sent to a leader that died applied it (appended
    # before it died); its client sent it again to the next leader once it had
    # re-attached, after two other clients' updates: the data went back to it, and a
    # watcher saw the value twice with others between. An update is not idempotent
    # under other writers: it is no longer sent again (UnavailableError: its outcome
    # is unknown). Here the answer is lost in a proxy, and another client updates
    # before the connection is reset.
    with ServerProcess(tmp_path / "data", "--fsync", "off") as server:
        url = f"tenure://127.0.0.1:{server.port}"
        async with (
            NetProxy("127.0.0.1", server.port) as proxy,
            tenure.connect(f"tenure://127.0.0.1:{proxy.port}") as client,
            tenure.connect(url) as other_client,
        ):
            await client.create_node("n")
            session = await client.session("n", recovery_window=30.0)
            other = await other_client.session("n")
            await other.semaphore("r").create(limit=1, data=b"0")
            proxy.lose_downstream()  # the update reaches the server, its answer not
            updating = asyncio.ensure_future(session.semaphore("r").update(b"mine"))
            await asyncio.sleep(0.5)
            assert (await other.semaphore("r").describe()).data == b"mine"
            await other.semaphore("r").update(b"theirs")
            proxy.lose_downstream(False)
            proxy.drop()
            with pytest.raises(UnavailableError, match="may or may not have been applied"):
                await asyncio.wait_for(updating, 10)
            await asyncio.sleep(0.5)  # (a copy sent again would be applied by now)
            assert (await other.semaphore("r").describe()).data == b"theirs"
