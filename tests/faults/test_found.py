"""Bugs the fault suite found, each pinned down by a small deterministic reproducer."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

import tenure
from tenure.errors import SessionExpiredError
from tests.api.support import wait_for_waiters
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
