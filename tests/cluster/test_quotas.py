"""Quotas per token on a cluster: a standby counts what the leader's log says, so the
counts hold across a failover (the owners travel in the log's records)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tenure._core import CreateNode, CreateSession
from tenure.errors import ErrorCode
from tests.cluster.harness import TenureCluster
from tests.etcd.cluster import EtcdCluster
from tests.server.wire import Clients

pytestmark = pytest.mark.timeout(180)

BATCH, ADMIN = "batch-secret", "admin-secret"
AUTH_FILE = f"""
[[token]]
name = "batch"
secret = "{BATCH}"
access = "read-write"
[token.quota]
sessions = 3

[[token]]
name = "admin"
secret = "{ADMIN}"
access = "read-write"
"""


async def test_the_counts_survive_a_failover(tmp_path: Path, etcd_member: EtcdCluster) -> None:
    auth = tmp_path / "auth.toml"
    auth.write_text(AUTH_FILE)
    extra = ("--auth-file", str(auth))
    clients = Clients()
    with TenureCluster(tmp_path / "cluster", etcd_member.endpoints, extra=extra) as cluster:
        try:
            old = cluster.leader()
            batch = await clients.connect(old.port, token=BATCH)
            await batch.call(CreateNode("n"))
            for _ in range(3):
                await batch.call(CreateSession("n", b"k", timeout=300.0))
            refused = await batch.fail(CreateSession("n", b"k", timeout=300.0))
            assert refused.code is ErrorCode.LIMIT_EXCEEDED
            assert "token 'batch' is over its quota sessions (3)" in refused.message
            await asyncio.to_thread(old.kill)
            new = await asyncio.to_thread(cluster.leader, excluding=old)
            # The new leader replayed the log: the three sessions are still batch's.
            again = await clients.connect(new.port, token=BATCH)
            refused = await again.fail(CreateSession("n", b"k", timeout=300.0))
            assert refused.code is ErrorCode.LIMIT_EXCEEDED
            assert "token 'batch' is over its quota sessions (3)" in refused.message
            admin = await clients.connect(new.port, token=ADMIN)
            await admin.call(CreateSession("n", b"k", timeout=300.0))
        finally:
            await clients.close_all()
