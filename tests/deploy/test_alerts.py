"""The alert rules (``deploy/prometheus/alerts.yaml``): promtool checks them and runs
their unit tests (``alerts.test.yaml``), and a real Prometheus scraping a real
three-member cluster fires them: the leader killed, a failover; etcd gone, no leader.

The Prometheus of the test evaluates a copy of the rules whose ``for:`` durations
(30 s to 15 min in production) are 1 s; nothing else in the copy differs.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.cluster.harness import TenureCluster
from tests.deploy.kit import DEPLOY, tool
from tests.deploy.prometheus import Prometheus, with_short_for
from tests.etcd.cluster import EtcdCluster
from tests.etcd.fixtures import require_etcd

RULES = DEPLOY / "prometheus" / "alerts.yaml"


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [tool("promtool", "prometheus"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_promtool_checks_the_rules_and_refuses_a_broken_copy(tmp_path: Path) -> None:
    checked = promtool("check", "rules", str(RULES), cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 13 rules found" in checked.stdout
    text = RULES.read_text()
    for broken in (
        text.replace("> 1000", "> > 1000", 1),  # PromQL that does not parse
        text.replace("for: 5m", "for: five minutes", 1),  # a duration that is none
        text.replace("{{ $labels.instance }} has", "{{ $labels.instance has", 1),  # a template
    ):
        assert broken != text
        (tmp_path / "broken.yaml").write_text(broken)
        refused = promtool("check", "rules", "broken.yaml", cwd=tmp_path)
        assert refused.returncode != 0, refused.stdout


def test_the_rules_pass_their_unit_tests_and_a_wrong_expectation_fails(tmp_path: Path) -> None:
    tested = promtool("test", "rules", "alerts.test.yaml", cwd=RULES.parent)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout
    shutil.copy(RULES, tmp_path / "alerts.yaml")
    tests = (RULES.parent / "alerts.test.yaml").read_text()
    wrong = tests.replace('"tenure: 1 new leader(s) in 10 minutes."', '"tenure: 2 new leader(s)"')
    assert wrong != tests
    (tmp_path / "alerts.test.yaml").write_text(wrong)
    failed = promtool("test", "rules", "alerts.test.yaml", cwd=tmp_path)
    assert failed.returncode != 0, failed.stdout


def test_a_real_prometheus_fires_on_a_failover_and_on_no_leader(tmp_path: Path) -> None:
    binary = tool("prometheus", "prometheus")
    require_etcd()
    rules = tmp_path / "alerts.yaml"
    rules.write_text(with_short_for(RULES.read_text()))
    # Only the for: durations differ from the production rules.
    changed = [
        (old, new)
        for old, new in zip(
            RULES.read_text().splitlines(), rules.read_text().splitlines(), strict=True
        )
        if old != new
    ]
    assert len(changed) == RULES.read_text().count("for: ") > 5
    assert all(new.strip() == "for: 1s" and old.strip().startswith("for: ") for old, new in changed)
    # An etcd of the test's own: stopping it is how a cluster is left with no leader.
    with (
        EtcdCluster(1, root=tmp_path / "etcd") as etcd,
        TenureCluster(tmp_path / "cluster", etcd.endpoints) as cluster,
    ):
        targets = [f"{server.host}:{server.http_port}" for server in cluster.servers]
        with Prometheus(binary, tmp_path / "prometheus", targets, rules) as prometheus:
            # Every member scraped, one leading, no failover counted yet.
            prometheus.wait_scraped('count(up{job="tenure"} == 1)', 3)
            prometheus.wait_scraped('sum(tenure_cluster_role{role="leader"})', 1)
            prometheus.wait_scraped("sum(tenure_cluster_leader_changes_total)", 0)
            assert not prometheus.firing("TenureLeaderChanged")
            assert not prometheus.firing("TenureNoLeader")

            leader = cluster.leader()
            leader.kill()
            cluster.leader(excluding=leader)
            fired = prometheus.wait_firing("TenureLeaderChanged")
            assert [alert["labels"]["job"] for alert in fired] == ["tenure"]
            assert prometheus.wait_firing("TenureMemberDown")[0]["labels"]["instance"] == (
                f"{leader.host}:{leader.http_port}"
            )

            # etcd gone: the new leader's lease ends, it steps down, and no member can
            # be elected; they still answer /metrics, as standbys.
            etcd.kill(etcd.members[0])
            fired = prometheus.wait_firing("TenureNoLeader", seconds=30)
            assert fired[0]["labels"] == {
                "alertname": "TenureNoLeader",
                "job": "tenure",
                "severity": "critical",
            }
            assert all(server.running for server in cluster.servers if server is not leader)
