"""``tenure backup`` of a cluster (real members over the run's etcd): asked of a standby,
taken by the leader (the standby names it), and restored into a single server's data
directory whose tokens are past the cluster's."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

import tenure.sync
from tests.cluster.harness import TenureCluster
from tests.etcd.cluster import EtcdCluster
from tests.server.test_backup import ADMIN, AUTH, tenure_cli
from tests.server.wire import WAIT, ServerProcess, free_port

pytestmark = pytest.mark.timeout(120)


def test_a_standby_sends_the_backup_to_its_leader(tmp_path: Path, etcd_member: EtcdCluster) -> None:
    auth = tmp_path / "auth.toml"
    auth.write_text(AUTH)
    file = tmp_path / "cluster.bak"
    extra = ("--auth-file", str(auth))
    with TenureCluster(tmp_path / "cluster", etcd_member.endpoints, extra=extra) as cluster:
        leader = cluster.leader()
        standby = cluster.standbys()[0]
        url = f"tenure://{leader.address}?token={ADMIN}"
        with tenure.sync.connect(url) as client:
            client.create_node("app")
            with client.session("app") as session:
                held = session.mutex("job").lock()
                taken = tenure_cli(
                    "backup", "--url", f"http://{standby.host}:{standby.http_port}", str(file)
                )
                assert taken.returncode == 0, taken.stderr
        logged = [
            json.loads(line) for line in leader.output().splitlines() if '"event": "backup"' in line
        ]
        assert len(logged) == 1
        assert logged[0]["loop_items"] == 0  # a process of its own read it from etcd
        assert logged[0]["last_token"] >= held.token
        assert '"event": "backup"' not in standby.output()
    verified = tenure_cli("backup", "verify", "--json", str(file), token=None)
    assert verified.returncode == 0, verified.stderr
    facts = json.loads(verified.stdout)
    assert facts["role"] == "leader"
    assert facts["holds"] == 1
    assert facts["highest_token"] >= held.token
    restored_at = time.time_ns()  # (the restore's clock: its tokens start past it)
    done = tenure_cli("restore", str(file), "--data-dir", str(tmp_path / "single"), token=None)
    assert done.returncode == 0, done.stderr
    single = ServerProcess(tmp_path / "single", "--fsync", "off", "--auth-file", str(auth))
    with (
        single,
        tenure.sync.connect(f"tenure://127.0.0.1:{single.port}?token={ADMIN}") as client,
        client.session("app") as session,
    ):
        assert session.mutex("job").lock(timeout=WAIT).token > restored_at > held.token


def test_backup_and_reload_at_the_members_tenure_url(
    tmp_path: Path, etcd_member: EtcdCluster
) -> None:
    # Issue 57: the URL every command takes. The backup goes to the leader (a standby
    # first among the doors: the client is sent on, as every request is); a reload
    # reaches every member, each reading its own files.
    auth = tmp_path / "auth.toml"
    auth.write_text(AUTH)
    file = tmp_path / "cluster.bak"
    extra = ("--auth-file", str(auth))
    with TenureCluster(tmp_path / "cluster", etcd_member.endpoints, extra=extra) as cluster:
        leader = cluster.leader()
        standby = cluster.standbys()[0]
        with tenure.sync.connect(f"tenure://{leader.address}?token={ADMIN}") as client:
            client.create_node("app")
            with client.session("app") as session:
                held = session.mutex("job").lock()
                doors = f"tenure://{standby.address},{leader.address}"
                taken = tenure_cli("backup", "--url", doors, str(file))
                assert taken.returncode == 0, taken.stderr
        reloaded = tenure_cli("reload", "--json", "--url", cluster.url())
        assert reloaded.returncode == 0, reloaded.stderr
        answers = json.loads(reloaded.stdout)["doors"]
        assert [door["door"] for door in answers] == [s.address for s in cluster.servers]
        assert all(door["reloaded"] is not None for door in answers), answers
        for member in cluster.servers:
            assert '"event": "reloaded"' in member.output()
        assert '"event": "backup"' in leader.output()
        assert '"event": "backup"' not in standby.output()
    facts = json.loads(tenure_cli("backup", "verify", "--json", str(file), token=None).stdout)
    assert (facts["role"], facts["holds"]) == ("leader", 1)
    assert facts["highest_token"] >= held.token


def test_a_backup_restored_into_a_new_cluster(tmp_path: Path, etcd_member: EtcdCluster) -> None:
    auth = tmp_path / "auth.toml"
    auth.write_text(AUTH)
    file = tmp_path / "single.bak"
    http = free_port()
    extra = ("--fsync", "off", "--auth-file", str(auth), "--http-port", str(http))
    single = ServerProcess(tmp_path / "single", *extra)
    with single, tenure.sync.connect(f"tenure://127.0.0.1:{single.port}?token={ADMIN}") as client:
        client.create_node("app")
        with client.session("app") as session:
            held = session.mutex("job").lock()
            taken = tenure_cli("backup", "--url", f"http://127.0.0.1:{http}", str(file))
            assert taken.returncode == 0, taken.stderr
    name = f"r{uuid.uuid4().hex[:12]}"
    url = f"etcd://{','.join(etcd_member.endpoints)}/{name}"
    restored_at = time.time_ns()
    done = tenure_cli("restore", str(file), "--cluster", url, token=None)
    assert done.returncode == 0, done.stderr
    assert "1 sessions ended" in done.stdout
    again = tenure_cli("restore", str(file), "--cluster", url, token=None)
    assert again.returncode == 2
    assert "new name" in again.stderr
    members = ("--auth-file", str(auth))
    with (
        TenureCluster(tmp_path / "c", etcd_member.endpoints, name=name, extra=members) as cluster,
        tenure.sync.connect(f"{cluster.url()}?token={ADMIN}") as client,
    ):
        assert client.list_sessions("app") == []
        with client.session("app") as session:
            assert session.mutex("job").lock(timeout=WAIT).token > restored_at > held.token
    both = tenure_cli("restore", str(file), "--cluster", url, "--data-dir", "d", token=None)
    assert both.returncode == 2


def test_the_backup_process_fails_clearly_when_etcd_is_away() -> None:
    """The leader's backup process (``tenure.server._cluster.state_process``) writes
    nothing and exits 1 naming the reason when it cannot read the cluster: the leader
    logs it, and the client gets no digest (so no file)."""
    closed = free_port()  # (nothing listens there)
    done = subprocess.run(
        [sys.executable, "-m", "tenure.server._cluster.state_process"],
        input=json.dumps({"act": "backup", "cluster": f"etcd://127.0.0.1:{closed}/gone"}).encode(),
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert done.stdout == b""
    assert b"etcd unreachable" in done.stderr
