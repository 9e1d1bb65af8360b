"""Bugs the fault suite found, each pinned down by a small deterministic reproducer."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

import tenure
from tenure.errors import SessionExpiredError
from tests.api.support import wait_for_waiters
from tests.cluster.harness import TenureCluster
from tests.etcd.cluster import EtcdCluster
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


async def test_a_leader_stopped_past_its_lease_wakes_as_a_standby(
    tmp_path: Path, etcd_member: EtcdCluster
) -> None:
    # Found by the failover scenario (sigstop-leader, cut-leader-from-etcd): a leader
    # that could not renew its lease steps down, as it must, then revokes its lease
    # (so that a successor need not wait for it); etcd answers "requested lease not
    # found" (the lease ran out while the leader was stopped or cut off), and the
    # member exits with cluster_failed instead of becoming a standby again.
    with TenureCluster(tmp_path / "cluster", etcd_member.endpoints, lease_ttl=2) as cluster:
        old = cluster.leader()
        old.pause()
        try:
            new = await asyncio.to_thread(cluster.leader, excluding=old)
            await asyncio.sleep(1.0)  # well past its lease: a successor leads
        finally:
            old.resume()
        for _ in range(200):
            if '"cluster_stepped_down"' in old.output(this_start=True):
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.0)  # (it exited 3 ms after stepping down)
        assert old.running, old.output(this_start=True)[-1500:]
        view = await cluster.status(old)
        assert view.leader == (await cluster.status(new)).answered_by
