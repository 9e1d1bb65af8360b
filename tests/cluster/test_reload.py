"""Reload in a cluster (issue 50): each member reads its own files, a standby answers
``tenure reload`` too, and a member's next term keeps what it reloaded, even once the
file is broken."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path

import pytest

from tenure._core import CreateNode, DescribeNode
from tests.cluster.harness import WAIT, ClusterServer, TenureCluster
from tests.etcd.cluster import EtcdCluster
from tests.server.net.test_reload import tenure_reload
from tests.server.tenants import auth_text, token
from tests.server.wire import Clients

pytestmark = pytest.mark.timeout(180)

ADMIN, DAVE = "admin-secret", "dave-secret"


def reloaded(member: ClusterServer) -> None:
    """Until ``member`` logged a reload that took (bounded)."""
    deadline = time.monotonic() + WAIT
    while '"event": "reloaded"' not in member.output():
        assert member.running, member.output()[-3000:]
        assert time.monotonic() < deadline, member.output()[-3000:]
        time.sleep(0.05)


async def test_each_member_reloads_and_keeps_it_across_a_failover(
    tmp_path: Path, etcd_member: EtcdCluster
) -> None:
    auth = tmp_path / "auth.toml"
    auth.write_text(auth_text(token("admin", ADMIN)))
    extra = ("--auth-file", str(auth))
    clients = Clients()
    with TenureCluster(tmp_path / "cluster", etcd_member.endpoints, extra=extra) as cluster:
        try:
            old = cluster.leader()
            admin = await clients.connect(old.port, token=ADMIN)
            await admin.call(CreateNode("n"))
            auth.write_text(auth_text(token("admin", ADMIN), token("dave", DAVE)))
            standby, *others = cluster.standbys()
            done = await asyncio.to_thread(tenure_reload, standby.http_port, ADMIN, "--json")
            assert done.returncode == 0, done
            assert json.loads(done.stdout)["tokens_added"] == ["dave"]
            assert '"event": "reloaded"' not in old.output()  # each member: its own
            for member in (old, *others):
                assert member.pid is not None
                os.kill(member.pid, signal.SIGHUP)
                await asyncio.to_thread(reloaded, member)
            dave = await clients.connect(old.port, token=DAVE)
            assert (await dave.call(DescribeNode("n"))).name == "n"
            auth.write_text("not toml [")  # broken from here on
            await asyncio.to_thread(old.kill)
            new = await asyncio.to_thread(cluster.leader, excluding=old)
            # Its new term kept the tokens it had reloaded (the broken file is not read).
            again = await clients.connect(new.port, token=DAVE)
            assert (await again.call(DescribeNode("n"))).name == "n"
        finally:
            await clients.close_all()
