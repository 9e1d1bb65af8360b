"""A release that crosses the server's own end of the hold is told as a loss.

The server ended a lock (its ``max_hold`` passed) and pushed the loss; the client,
its loop standing still, had not read the push yet when it released. The release
gives nothing back: ``release()`` returns with the lease's ``lost_reason`` the loss,
not as a release (docs/guarantees.md 6g; found by the simulation with hand-offs:
tests/sim/test_sim_runs.py). The loop is held still by a blocking wait, from the
sync face in the same test, until another client sees the lock free: nothing is
timed.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

import tenure
import tenure.sync
from tenure.errors import LeaseLostError
from tests.server.wire import ServerProcess

pytestmark = pytest.mark.timeout(120)

NODE = "n"
#: How long the test waits for the server to end the lock at most (seconds).
PATIENCE = 60.0


def _wait_until_free(url: str, name: str) -> None:
    """Block (the calling loop with it) until another client sees ``name`` free."""
    with tenure.sync.connect(url) as other, other.session(NODE) as session:
        deadline = time.monotonic() + PATIENCE
        while session.mutex(name).describe().held:
            assert time.monotonic() < deadline, f"{name!r} still held after {PATIENCE} s"
            time.sleep(0.01)


@pytest.mark.parametrize(
    "wait", [True, False, None], ids=["release", "release-without-waiting", "async-with"]
)
async def test_a_release_that_crossed_a_max_hold_end_is_told_lost(
    tmp_path: Path, wait: bool | None
) -> None:
    with ServerProcess(tmp_path / "data", "--idle-timeout", "0") as server:
        url = f"tenure://127.0.0.1:{server.port}"
        async with tenure.connect(url) as client:
            await client.create_node(NODE)
            session = await client.session(NODE)
            if wait is None:  # leaving the block starts the release, waits for nothing
                async with session.mutex("m", max_hold=0.2).lock() as lock:
                    _wait_until_free(url, "m")  # (this loop stands still meanwhile)
                assert lock.lost_reason is None  # the push is not read yet
                await asyncio.sleep(0)  # (whether or not the answer came meanwhile)
                await lock.release()  # waits for the release under way, or reads its answer
            else:
                lock = await session.mutex("m", max_hold=0.2).lock()
                _wait_until_free(url, "m")  # (this loop stands still meanwhile)
                assert lock.lost_reason is None  # the push is not read yet
                await lock.release(wait=wait)
                if not wait:  # under way: the answer comes with the next wait
                    await lock.release()
            assert isinstance(lock.lost_reason, LeaseLostError), lock.lost_reason
            assert "max_hold" in str(lock.lost_reason)
            # The session is whole: the next lock is granted, under a greater token.
            again = await session.mutex("m").lock()
            assert again.token > lock.token
            await again.release()
            assert again.lost_reason is None


async def test_a_release_the_server_applied_stays_a_release(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "data", "--idle-timeout", "0") as server:
        url = f"tenure://127.0.0.1:{server.port}"
        async with tenure.connect(url) as client:
            await client.create_node(NODE)
            session = await client.session(NODE)
            lock = await session.mutex("m", max_hold=60.0).lock()
            await lock.release()
            assert lock.lost_reason is None
