"""Every metric the Grafana dashboard (``deploy/grafana/tenure.json``) and the alert
rules (``deploy/prometheus/alerts.yaml``) name is one a real server's ``/metrics``
exports: a standalone ``tenure serve`` with every optional series turned on (an auth
file, an audit log, a memory budget, ``--long-hold-seconds``) and a cluster's member
(the ``tenure_cluster_*`` series), scraped and read with prometheus_client's parser."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cluster.harness import TenureCluster
from tests.deploy.kit import (
    DEPLOY,
    PROMETHEUS_MADE,
    exported_series,
    promql_metric_names,
    wait_http,
)
from tests.etcd.cluster import EtcdCluster
from tests.server.wire import ServerProcess, free_port

AUTH = """
[[token]]
name = "ops"
secret = "a-long-secret-for-the-deploy-tests"
access = "read-write"
"""


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory, etcd_member: EtcdCluster) -> set[str]:
    """The series names the two servers' ``/metrics`` export, together."""
    root = tmp_path_factory.mktemp("metric-names")
    (root / "auth.toml").write_text(AUTH)
    http_port = free_port()
    flags = (
        "--fsync",
        "off",
        "--memory-budget",
        "100000000",
        "--auth-file",
        str(root / "auth.toml"),
    )
    standalone = ServerProcess(
        root / "data",
        *flags,
        "--http-port",
        str(http_port),
        "--audit-log",
        str(root / "audit.log"),
        "--long-hold-seconds",
        "3600",
    )
    with standalone, TenureCluster(root / "cluster", etcd_member.endpoints, size=1) as cluster:
        names = exported_series(wait_http(f"http://127.0.0.1:{http_port}/metrics").decode())
        member = cluster.leader()
        url = f"http://{member.host}:{member.http_port}/metrics"
        names |= exported_series(wait_http(url).decode())
    return names


def dashboard_queries(dashboard: dict[str, Any]) -> Iterator[str]:
    """Every PromQL expression of the dashboard: its panels' targets (rows' nested
    panels too) and its variables' queries (``label_values(METRIC, LABEL)``: the
    metric)."""
    panels = list(dashboard["panels"])
    while panels:
        panel = panels.pop()
        panels.extend(panel.get("panels", ()))
        for target in panel.get("targets", ()):
            yield target["expr"]
    for variable in dashboard.get("templating", {}).get("list", ()):
        query = variable.get("query")
        if variable.get("type") == "query" and isinstance(query, str):
            values = re.fullmatch(r"\s*label_values\(\s*(.+?)\s*,\s*\w+\s*\)\s*", query)
            yield values.group(1) if values else query


def rule_queries(rules: dict[str, Any]) -> Iterator[str]:
    """Every rule's expression."""
    for group in rules["groups"]:
        for rule in group["rules"]:
            yield rule["expr"]


def unknown(queries: list[str], exported: set[str]) -> dict[str, set[str]]:
    """Expression -> the names it reads that no server exports."""
    missing = {}
    for expr in queries:
        names = promql_metric_names(expr) - exported - PROMETHEUS_MADE
        if names:
            missing[expr] = names
    return missing


def load_dashboard(path: Path = DEPLOY / "grafana" / "tenure.json") -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def test_every_dashboard_query_names_an_exported_metric(exported: set[str]) -> None:
    queries = list(dashboard_queries(load_dashboard()))
    assert len(queries) > 20
    assert unknown(queries, exported) == {}
    # Each query names a metric (a check that finds no names would pass anything).
    assert all(promql_metric_names(query) for query in queries)


def test_every_alert_rule_names_an_exported_metric(exported: set[str]) -> None:
    rules = yaml.safe_load((DEPLOY / "prometheus" / "alerts.yaml").read_text())
    queries = list(rule_queries(rules))
    assert len(queries) >= 8
    assert unknown(queries, exported) == {}


def test_a_made_up_or_misspelt_name_is_found(exported: set[str]) -> None:
    # The check fails a dashboard with a name no server exports, and a real family
    # queried by the wrong name (a counter without _total, a histogram's own name).
    dashboard = load_dashboard()
    first = dashboard["panels"][0]["targets"][0]
    first["expr"] = 'sum(rate(tenure_made_up_total{job=~"$job"}[5m]))'
    second = dashboard["panels"][1]["targets"][0]
    second["expr"] = "rate(tenure_requests[5m]) + tenure_grant_wait_seconds"
    missing = unknown(list(dashboard_queries(dashboard)), exported)
    assert missing == {
        first["expr"]: {"tenure_made_up_total"},
        second["expr"]: {"tenure_requests", "tenure_grant_wait_seconds"},
    }
    assert {"tenure_requests_total", "tenure_grant_wait_seconds_bucket"} <= exported
