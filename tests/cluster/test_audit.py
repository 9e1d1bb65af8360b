"""The audit log of a cluster's members (``--audit-log``, issue 50): each term's server
(standby, then leader) records in the member's one log, whose thread outlives them."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tenure._core import CreateNode
from tenure.errors import ErrorCode
from tests.cluster.harness import ClusterServer, TenureCluster, until
from tests.etcd.cluster import EtcdCluster
from tests.server.tenants import auth_text, token
from tests.server.wire import Clients

pytestmark = pytest.mark.timeout(180)

ADMIN = "cluster-admin-s3cret"


def _acts(member: ClusterServer) -> list[dict[str, Any]]:
    """The audit lines ``member`` wrote on its standard output (its log file here)."""
    lines = [line for line in member.output().splitlines() if line.startswith('{"time"')]
    return [json.loads(line) for line in lines]


async def test_a_standby_s_and_then_its_leader_term_record_in_one_log(
    tmp_path: Path, etcd_member: EtcdCluster
) -> None:
    auth = tmp_path / "auth.toml"
    auth.write_text(auth_text(token("admin", ADMIN)))
    extra = ("--auth-file", str(auth), "--audit-log", "-")
    clients = Clients()
    with TenureCluster(tmp_path / "cluster", etcd_member.endpoints, extra=extra) as cluster:
        try:
            old = cluster.leader()
            admin = await clients.connect(old.port, token=ADMIN)
            await admin.call(CreateNode("before"))
            for standby in cluster.standbys():  # (whichever leads next refused one)
                there = await clients.connect(standby.port, token=ADMIN)
                refused = await there.fail(CreateNode("on-a-standby"))
                assert refused.code is ErrorCode.NOT_LEADER

            async def before_recorded() -> bool | None:
                return any(a["what"]["node"] == "before" for a in _acts(old)) or None

            # (its writer thread writes lines after the answers: the server never waits
            # on it, so a kill right after the answer can lose the line, which is not
            # what this test is about)
            await until(before_recorded, "the old leader records its act")
            await asyncio.to_thread(old.kill)
            new = await asyncio.to_thread(cluster.leader, excluding=old)
            again = await clients.connect(new.port, token=ADMIN)
            await again.call(CreateNode("after"))

            async def recorded() -> list[dict[str, Any]] | None:
                acts = _acts(new)
                return acts if any(a["what"]["node"] == "after" for a in acts) else None

            acts = await until(recorded, "the new leader records its act")
        finally:
            await clients.close_all()
    assert {"act": "node_create", "token": "admin", "outcome": "ok"}.items() <= next(
        a for a in _acts(old) if a["what"]["node"] == "before"
    ).items()
    # The new leader refused as a standby, then led: one log, two terms.
    nodes = [(a["what"]["node"], a["outcome"]) for a in acts]
    assert nodes == [("on-a-standby", "not_leader"), ("after", "ok")]
    for member in cluster.servers:
        assert ADMIN not in "".join(json.dumps(a) for a in _acts(member))
