"""bench's tenure-cluster system: three ``tenure serve --cluster`` over an etcd started
as the etcd peer's, reached through the three-door URL, stopped whole.

One cluster is started for the module (an etcd member and three members, a few
seconds); nothing is timed and no workload is run: what is checked is that the
system is what the report says it is (the same etcd command line as the etcd row,
three members each with its own ports and data directory, one leader), that a lock
works through its URL, that seq's CPU reading covers all its processes, and that a
stop ends every one of them.
"""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from bench.peers import lockload, run
from bench.peers.clients import lock_client
from bench.tools import report, systems
from bench.tools.cpu import ServerCpu
from bench.tools.results import client_each

from tests.etcd.fixtures import require_etcd

pytestmark = pytest.mark.timeout(120)

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _option(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def _leads(member: systems.Server) -> bool:
    try:
        with _OPENER.open(f"http://127.0.0.1:{member.http_port}/readyz", timeout=2) as reply:
            return bool(reply.status == 200)
    except OSError:
        return False


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[systems.Server]:
    """The tenure-cluster system, started as ``scripts/bench`` starts it."""
    require_etcd()
    server = systems.start("tenure-cluster", tmp_path_factory.mktemp("tenure-cluster"))
    try:
        yield server
    finally:
        server.kill()


def _parts(server: systems.Server) -> systems.ClusterParts:
    assert isinstance(server.handle, systems.ClusterParts)
    return server.handle


def test_tenure_cluster_is_a_system_of_the_run_in_both_client_shapes() -> None:
    assert "tenure-cluster" in systems.SYSTEMS
    assert "tenure-cluster" in systems.CLUSTER_SYSTEMS
    assert "tenure-cluster" in run.EACH_SHAPE  # judged against etcd in both shapes
    shown = {system for system, _server, _client in report.SETUP}
    for name in ("tenure-cluster", client_each("tenure-cluster")):
        assert name in report.ORDER
        assert name in shown
    with pytest.raises(ValueError, match="several processes"):
        systems.command("tenure-cluster", 1234, Path("unused"))


def test_a_member_is_tenure_serve_cluster_on_its_own_ports_and_data() -> None:
    argv = systems.member_command(6401, 6501, Path("/data/m1"), 2379)
    assert "serve" in argv
    assert _option(argv, "--cluster") == f"etcd://127.0.0.1:2379/{systems.CLUSTER_NAME}"
    assert (_option(argv, "--port"), _option(argv, "--http-port")) == ("6401", "6501")
    assert _option(argv, "--data-dir") == "/data/m1"
    # etcd keeps the log: the members' defaults (lease TTL, fsync) are left as shipped.
    assert "--cluster-lease-ttl" not in argv
    assert "--fsync" not in argv
    url = systems.cluster_url([6401, 6402, 6403])
    assert url == "tenure://127.0.0.1:6401,127.0.0.1:6402,127.0.0.1:6403"


def test_a_bad_server_pid_list_is_refused() -> None:
    argv = ["--system", "tenure-memory", "--url", "memory://", "--workload", "seq", "--n", "1"]
    with pytest.raises(SystemExit) as exits:
        lockload.main([*argv, "--server-pid", "12,x"])
    assert exits.value.code == 2


def test_its_etcd_is_a_member_started_as_the_etcd_peers(cluster: systems.Server) -> None:
    etcd = _parts(cluster).etcd
    assert etcd.system == "etcd"
    assert etcd.pid is not None
    running = psutil.Process(etcd.pid).cmdline()
    # The etcd row's command line for the same client port and data directory; only
    # the peer port (picked free at each start) may differ.
    expected, url = systems.command("etcd", etcd.port, etcd.data_dir)

    def ports(argv: list[str]) -> list[str]:
        return [re.sub(r":\d+", ":PORT", arg) for arg in argv]

    assert ports(running) == ports(expected)
    assert _option(running, "--listen-client-urls") == url
    assert "--heartbeat-interval" not in running  # etcd as shipped, not the tests' timers


def test_three_members_over_that_etcd_one_leads(cluster: systems.Server) -> None:
    parts = _parts(cluster)
    members = parts.members
    assert len(members) == systems.CLUSTER_SIZE == 3
    argvs = [psutil.Process(m.pid).cmdline() for m in members if m.pid is not None]
    assert len(argvs) == 3
    etcd_url = f"etcd://127.0.0.1:{parts.etcd.port}/{systems.CLUSTER_NAME}"
    assert {_option(a, "--cluster") for a in argvs} == {etcd_url}
    assert len({_option(a, "--port") for a in argvs}) == 3
    assert len({_option(a, "--data-dir") for a in argvs}) == 3
    # Every member is a door of the client's URL; the system's server is the leader.
    doors = cluster.url.removeprefix("tenure://").split(",")
    assert sorted(doors) == sorted(f"127.0.0.1:{m.port}" for m in members)
    assert (cluster.pid, cluster.port) == (members[0].pid, members[0].port)
    assert [_leads(m) for m in members] == [True, False, False]
    assert cluster.pids() == [*(m.pid for m in members), parts.etcd.pid]
    assert cluster.rss_bytes() > sum(m.rss_bytes() for m in members)  # etcd's too


async def test_a_lock_through_the_three_door_url_and_seqs_cpu_covers_every_process(
    cluster: systems.Server,
) -> None:
    reading = ServerCpu(*cluster.pids())
    before = reading.read()
    client = lock_client("tenure-cluster", cluster.url, 10.0)
    await client.open()
    try:
        session = await client.session()
        for i in range(20):
            await session.release(await session.acquire(f"bench-cluster-{i}"))
        await session.close()
    finally:
        await client.close()
    after = reading.read()
    assert set(cluster.pids()) <= set(after)
    assert ServerCpu.spent(before, after) > 0


def test_seq_is_told_every_process_of_the_system(
    cluster: systems.Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[list[str]] = []

    def client_run(argv: list[str], workload: str, system: str) -> list[Any]:
        seen.append(argv)
        return []  # nothing is run: only the command line is looked at

    monkeypatch.setattr(run, "client_run", client_run)
    run._lock_run("tenure-cluster", cluster, "tenure-cluster", "one", ["seq"], True)
    (argv,) = seen
    assert _option(argv, "--url") == cluster.url
    assert _option(argv, "--server-pid") == ",".join(map(str, cluster.pids()))


def test_a_stop_ends_every_process_members_first(tmp_path: Path) -> None:
    require_etcd()
    server = systems.start("tenure-cluster", tmp_path)
    pids = server.pids()
    procs = [psutil.Process(pid) for pid in pids]
    ended: list[int] = []
    parts = _parts(server)
    for part in (*parts.members, parts.etcd):
        stop = part.stop

        def recorded(part: systems.Server = part, stop: Any = stop) -> None:
            assert part.pid is not None
            ended.append(part.pid)
            stop()

        part.stop = recorded  # type: ignore[method-assign]
    server.stop()
    assert not any(p.is_running() for p in procs)
    # The standbys, then the leader (so no takeover on the way), then etcd.
    assert ended == [*pids[1:3], pids[0], pids[3]]
