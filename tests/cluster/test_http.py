"""The HTTP endpoint of a cluster's servers: ``/metrics`` and the dashboard's API on the
leader and on the standbys (real servers over a real etcd, the run's member).

What each member says of the cluster must agree with the others: one leader, the
same term, the standbys' replicas catching up with the leader's log (polled, within
a deadline: a standby applies each entry as etcd's watch brings it).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

import tenure
from tests.cluster.harness import ClusterServer, TenureCluster, until
from tests.etcd.cluster import EtcdCluster
from tests.server.http import Samples, get, scrape, value
from tests.server.wire import WAIT

pytestmark = pytest.mark.timeout(90)


async def write_some(leader: ClusterServer) -> None:
    """A node, a session and a few locks taken and released, on the leader."""
    async with tenure.connect(f"tenure://{leader.address}") as client:
        await client.create_node("jobs", exist_ok=True)
        async with client.session("jobs", description="writer") as session:
            for i in range(5):
                async with session.mutex(f"m{i}"):
                    pass


def cluster_series(samples: Samples) -> set[str]:
    return {name for name, _ in samples if name.startswith("tenure_cluster_")}


async def test_every_member_reports_its_role_and_the_standbys_catch_up(
    cluster: TenureCluster,
) -> None:
    leader = cluster.leader()
    await write_some(leader)

    async def everyone_recorded() -> Samples | None:
        # (each member records itself, and reads the others' records, once a second)
        seen = await scrape(leader.http_port)
        return seen if value(seen, "tenure_cluster_members") == 3 else None

    led = await until(everyone_recorded, "the leader reads three members' records")
    assert value(led, "tenure_cluster_role", role="leader") == 1
    assert value(led, "tenure_cluster_role", role="standby") == 0
    assert value(led, "tenure_ready") == 1
    index = value(led, "tenure_cluster_log_index")
    assert index > 1  # the takeover, then what was written
    assert value(led, "tenure_cluster_applied_index") == index
    assert value(led, "tenure_cluster_lag_entries") == 0
    assert value(led, "tenure_cluster_leader_changes_total") == 0  # its first term
    term = value(led, "tenure_cluster_term")
    assert term > 0
    # Every write was a round of appends to etcd, timed apart from any local log.
    assert value(led, "tenure_cluster_append_seconds_count") >= 1
    assert value(led, "tenure_cluster_append_seconds_sum") > 0
    assert not [name for name, _ in led if name.startswith("tenure_wal_commit")]

    for standby in cluster.standbys():

        async def caught_up(port: int = standby.http_port) -> Samples | None:
            seen = await scrape(port)
            applied = value(seen, "tenure_cluster_applied_index")
            lag = value(seen, "tenure_cluster_lag_entries")
            members = value(seen, "tenure_cluster_members")
            return seen if applied >= index and lag == 0 and members == 3 else None

        seen = await until(caught_up, f"member {standby.index} applied entry {index}")
        assert cluster_series(seen) == cluster_series(led)
        assert value(seen, "tenure_cluster_role", role="standby") == 1
        assert value(seen, "tenure_cluster_role", role="leader") == 0
        assert value(seen, "tenure_ready") == 0
        assert value(seen, "tenure_cluster_term") == term
        assert value(seen, "tenure_cluster_leader_changes_total") == 0
        assert value(seen, "tenure_cluster_append_seconds_count") == 0  # a standby appends nothing
        assert value(seen, "tenure_cluster_log_index") >= index
        assert value(seen, "tenure_nodes") == 1  # its replica of the leader's state


async def test_a_new_leader_counts_the_change_and_its_greater_term(cluster: TenureCluster) -> None:
    old = cluster.leader()
    term = value(await scrape(old.http_port), "tenure_cluster_term")
    await asyncio.to_thread(old.kill)
    new = await asyncio.to_thread(cluster.leader, excluding=old)

    async def saw_the_change() -> Samples | None:
        # (the election keys' watch may tell the new leader of its own term just after
        # it was elected)
        seen = await scrape(new.http_port)
        return seen if value(seen, "tenure_cluster_term") > term else None

    seen = await until(saw_the_change, "the new leader reports a greater term")
    assert value(seen, "tenure_cluster_role", role="leader") == 1
    assert value(seen, "tenure_cluster_leader_changes_total") == 1


@pytest.fixture
def acting_cluster(tmp_path: Path, etcd_member: EtcdCluster) -> Iterator[TenureCluster]:
    """Three members whose dashboards may end sessions (``--dashboard-actions``)."""
    extra = ("--dashboard-actions", "true", "--dashboard-rate", "20")
    with TenureCluster(tmp_path / "cluster", etcd_member.endpoints, extra=extra) as servers:
        yield servers


async def board(server: ClusterServer) -> dict[str, Any]:
    """One view of ``server``'s dashboard (``GET /dashboard/api/board``)."""
    status, body = await get(server.http_port, "/dashboard/api/board")
    assert status == 200, body
    view: dict[str, Any] = json.loads(body)["view"]
    return view


async def test_every_dashboard_names_the_leader_and_a_standby_offers_no_action(
    acting_cluster: TenureCluster,
) -> None:
    cluster = acting_cluster
    leader = cluster.leader()
    dashboard = f"http://127.0.0.1:{leader.http_port}/"
    async with tenure.connect(f"tenure://{leader.address}") as client:
        await client.create_node("jobs", exist_ok=True)
        async with client.session("jobs", description="kept") as session:
            for server in cluster.servers:

                async def knows_everyone(server: ClusterServer = server) -> dict[str, Any] | None:
                    # (each member records itself, and reads the others', once a second)
                    view = await board(server)
                    return view if len(view["cluster"]["members"]) == 3 else None

                view = await until(knows_everyone, f"member {server.index} reads every record")
                info = view["cluster"]
                assert info["member"] == server.address
                assert info["leader"] == {
                    "name": leader.address,
                    "address": leader.address,
                    "http": f"127.0.0.1:{leader.http_port}",
                    "dashboard": dashboard,
                }
                assert info["term"] > 0
                members = {m["name"]: m for m in info["members"]}
                assert set(members) == {s.address for s in cluster.servers}
                assert [m["name"] for m in info["members"] if m["self"]] == [server.address]
                assert members[server.address]["dashboard"] == (
                    f"http://127.0.0.1:{server.http_port}/"
                )
                if server is leader:
                    assert (info["role"], view["state"], info["lag"]) == ("leader", "serving", 0)
                else:
                    assert (info["role"], view["state"]) == ("standby", "standby")

            # The standby shows its replica (the session, once its entry came), and
            # offers no action on it; the leader does.
            standby = cluster.standbys()[0]

            async def replica_nodes() -> list[dict[str, Any]] | None:
                shown = (await board(standby))["board"]
                nodes: list[dict[str, Any]] = shown["nodes"]
                return nodes if nodes and nodes[0]["sessions"] else None

            [jobs] = await until(replica_nodes, "the standby shows the session")
            assert jobs["sessions"][0]["session_id"] == session.id
            assert jobs["can_kill"] is False
            assert (await board(leader))["board"]["nodes"][0]["can_kill"] is True
            # Sent anyway: refused before it is tried, pointing to the leader's dashboard.
            timeout = aiohttp.ClientTimeout(total=WAIT)
            async with (
                aiohttp.ClientSession(timeout=timeout) as http,
                http.post(
                    f"http://127.0.0.1:{standby.http_port}/dashboard/api/kill",
                    json={"node": "jobs", "session_id": session.id},
                ) as refused,
            ):
                answer = await refused.json()
            assert refused.status == 503
            assert answer["leader"] == dashboard
            assert "standby" in answer["error"]
            assert dashboard in answer["error"]
            assert not session.closed
            [kept] = (await board(leader))["board"]["nodes"][0]["sessions"]
            assert kept["session_id"] == session.id  # still alive
