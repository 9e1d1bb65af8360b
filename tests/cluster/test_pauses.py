"""A cluster's leader stopped for less than its etcd lease but longer than a lease TTL
of a client's: the engine's deadlines run on the leader's heard time, which the log
carries, so the renewals that waited in the socket keep the client's lease, and the
next leader continues that clock (issue 37, docs/guarantees.md 6e).

Real servers over the run's etcd; a raw protocol client; bounded waits, no timing.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from tenure._core import (
    MAX_COUNT,
    Acquire,
    AcquireStatus,
    AttachSession,
    CreateNode,
    CreateSession,
    Granted,
    LeaseLost,
    Renew,
)
from tenure._protocol import Reply
from tests.cluster.harness import TenureCluster
from tests.etcd.cluster import EtcdCluster
from tests.server.wire import Clients

#: The client's lease TTL. Every TTL starts afresh at a takeover (docs/cluster.md), and
#: the holder must renew within it of the next leader's: at 1 s a run of every test
#: on four workers beside two busy loops took longer (the lease had ended there).
TTL = 2.0
STALL = 2.5 * TTL  # how long the leader is stopped: longer than TTL...
CLUSTER_LEASE = 20  # ...and well short of the leader's lease in etcd (no failover)


async def test_a_lease_renewed_while_the_leader_was_stopped_is_kept_across_a_handover(
    tmp_path: Path, etcd_member: EtcdCluster
) -> None:
    wire = Clients()
    with TenureCluster(tmp_path / "c", etcd_member.endpoints, lease_ttl=CLUSTER_LEASE) as cluster:
        try:
            leader = cluster.leader()
            holder = await wire.connect(leader.port)
            waiter = await wire.connect(leader.port)
            await waiter.call(CreateNode("n"))
            kept = int((await holder.call(CreateSession("n", b"k1", timeout=30.0))).session_id)
            got = await holder.call(Acquire(kept, "m", MAX_COUNT, 1, ephemeral=True, lease_ttl=TTL))
            assert got.status is AcquireStatus.GRANTED
            waiting = (await waiter.call(CreateSession("n", b"k2", timeout=30.0))).session_id
            queued = await waiter.call(Acquire(waiting, "m", MAX_COUNT, 2, ephemeral=True))
            assert queued.status is AcquireStatus.QUEUED

            renewals = []
            leader.pause()
            try:
                began = time.monotonic()
                while time.monotonic() - began < STALL:  # renewing four times a TTL
                    renewals.append(holder.send(Renew(kept, "m")))
                    await holder.writer.drain()
                    await asyncio.sleep(TTL / 4)
            finally:
                leader.resume()

            for request_id in renewals:
                answer = await holder.answer(request_id)
                assert isinstance(answer, Reply), answer  # (before: the lease was lost)
            assert not any(isinstance(push, LeaseLost) for push in holder.pushes), holder.pushes
            await waiter.ping(1)
            assert not any(isinstance(push, Granted) for push in waiter.pushes), waiter.pushes
            assert cluster.leader() is leader  # (no failover: the stop was the leader's own)

            # A graceful handover: the next leader replays the log's (heard) times and
            # the holder takes its session and lease back there.
            await wire.close_all()
            assert leader.stop() == 0
            new = await asyncio.to_thread(cluster.leader, excluding=leader)
            back = await wire.connect(new.port)
            assert (await back.call(AttachSession(kept, b"k1", 3))).seq_no == 3
            assert await back.call(Renew(kept, "m")) == TTL
        finally:
            await wire.close_all()
