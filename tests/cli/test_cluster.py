"""``tenure cluster status`` against scripted cluster members (tests/backends/fake_cluster.py).

The members run on the test's event loop while ``tenure`` runs in a thread of its
own (a subprocess, as a user runs it).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tenure._protocol.messages import LEADER, STANDALONE, STANDBY
from tests.backends.fake_cluster import FakeCluster, FakeMember
from tests.cli.support import one_error_line, run_tenure
from tests.ports import free_port


@pytest.fixture
async def members(tenure_executable: Path) -> AsyncIterator[list[FakeMember]]:
    """t1 (a standby, lagging 2 entries) and t2 (the leader) of one cluster."""
    cluster = FakeCluster()
    t2 = await FakeMember("t2", cluster).start()
    t1 = await FakeMember("t1", cluster, role=STANDBY, leader=t2.address).start()
    t1.lag = 2
    t1.peers = t2.peers = [t1, t2]
    try:
        yield [t1, t2]
    finally:
        await t1.close()
        await t2.close()
        cluster.close()


async def tenure_run(*args: str) -> subprocess.CompletedProcess[str]:
    """``tenure ARGS`` in a thread: the members go on answering meanwhile."""
    return await asyncio.to_thread(run_tenure, *args)


def row_of(line: str) -> list[str]:
    """The cells of one row of a table as rich draws it (one cell for other lines)."""
    return [cell.strip() for cell in line.split("│")]


def url_of(*doors: str) -> str:
    return "tenure://" + ",".join(doors)


async def test_every_member_and_door_is_shown(members: list[FakeMember]) -> None:
    t1, t2 = members
    down = f"127.0.0.1:{free_port()}"
    result = await tenure_run("cluster", "status", "--url", url_of(t1.address, t2.address, down))
    assert result.returncode == 3, result.stderr
    out = result.stdout
    assert "cluster 'fake': leader t2 (term 1), log index 100 (as t2 sees it)" in out
    rows = {cells[0]: cells for cells in map(row_of, out.splitlines()) if len(cells) > 1}
    assert rows["t1"] == ["t1", "standby", t1.address, "98", "2", "0.5s"]
    assert rows["t2"] == ["t2", "leader", t2.address, "100", "0", "0.5s"]
    assert rows[t1.address] == [t1.address, "standby", "t1", "ok"]
    assert rows[t2.address] == [t2.address, "leader", "t2", "ok"]
    assert rows[down][:3] == [down, "-", "-"]
    assert rows[down][3].endswith(": connection refused (nothing listens there)")
    line = one_error_line(result)
    assert line.startswith(f"tenure: 1 of 3 doors could not be asked: {down}: UnavailableError")
    assert t1.requests == t2.requests == ["ClusterStatus"]  # the standby was asked too


async def test_a_healthy_cluster_exits_0_with_json(members: list[FakeMember]) -> None:
    t1, t2 = members
    result = await tenure_run(
        "cluster", "status", "--json", "--token", "s3cret", "--url", url_of(t1.address, t2.address)
    )
    assert result.returncode == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    assert document["ok"] is True
    assert (document["cluster"], document["leader"], document["term"]) == ("fake", "t2", 1)
    assert (document["index"], document["answered_by"]) == (100, "t2")
    assert [(m["name"], m["role"], m["applied"], m["lag"]) for m in document["members"]] == [
        ("t1", STANDBY, 98, 2),
        ("t2", LEADER, 100, 0),
    ]
    assert document["doors"] == [
        {"door": t1.address, "answered": True, "role": STANDBY, "member": "t1", "error": None},
        {"door": t2.address, "answered": True, "role": LEADER, "member": "t2", "error": None},
    ]
    assert t1.tokens == t2.tokens == ["s3cret"]


async def test_standbys_alone_exit_1(members: list[FakeMember]) -> None:
    t1, t2 = members
    t2.role, t2.leader = STANDBY, None  # nobody leads now
    result = await tenure_run("cluster", "status", "--url", url_of(t1.address, t2.address))
    assert result.returncode == 1, result.stderr
    assert "cluster 'fake': no leader" in result.stdout
    assert one_error_line(result) == "tenure: no door that answered leads (no member leads)"


async def test_a_standalone_server_says_it_is_not_a_cluster(tenure_executable: Path) -> None:
    alone = await FakeMember("alone", FakeCluster(), role=STANDALONE).start()
    try:
        result = await tenure_run("cluster", "status", "--json", "--url", url_of(alone.address))
    finally:
        await alone.close()
    assert result.returncode == 3
    document = json.loads(result.stdout)
    assert document["ok"] is False
    assert document["members"] == []
    [door] = document["doors"]
    assert door["role"] == ""
    assert door["answered"] is False
    assert door["error"].startswith("UnsupportedError: this server is not part of a cluster")


def test_only_tenure_urls_are_asked(tenure_executable: Path) -> None:
    result = run_tenure("cluster", "status", "--url", "etcd://127.0.0.1:2379")
    assert result.returncode == 2
    assert "cluster status asks tenure:// servers" in one_error_line(result)


def test_a_real_standalone_server_is_said_to_be_one(url: str) -> None:
    # Issue 57: a standalone server was shown as "no door answered", above the table of
    # the door that answered. It is said to be what it is.
    door = url.removeprefix("tenure://")
    result = run_tenure("cluster", "status", "--url", url)
    assert result.returncode == 3
    first = result.stdout.splitlines()[0]
    assert first == (
        f"not a cluster: {door} is a standalone server (tenure serve without --cluster)"
    )
    assert "no door answered" not in result.stdout
    rows = {cells[0]: cells for cells in map(row_of, result.stdout.splitlines()) if len(cells) > 1}
    assert rows[door] == [door, "standalone", "-", "not part of a cluster: a standalone server"]
    assert one_error_line(result) == (
        f"tenure: {door} is a standalone server (tenure serve without --cluster), "
        "not part of a cluster"
    )
