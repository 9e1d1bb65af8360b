"""The YDB face in the server's metrics: its answers by request and status, its streams."""

from __future__ import annotations

import urllib.request
from collections.abc import Callable

import pytest
import ydb
from prometheus_client.parser import text_string_to_metric_families
from ydb.coordination import CoordinationClient

from tenure.compat.ydb.metrics import YdbCounts
from tenure.server._http.metrics import ServerMetrics
from tests.server.test_server_metrics import samples
from tests.server.wire import WAIT, free_port
from tests.ydb_face.conftest import DATABASE, YdbServer, unique


def test_ydb_labels_come_from_fixed_sets() -> None:
    counts = YdbCounts()
    metrics = ServerMetrics(version="0", faces={"ydb": counts})
    counts.request("acquire_semaphore", "success")
    counts.request("acquire_semaphore", "success")
    counts.request("\x00evil", "success")
    counts.request("create_node", "no_such_status")
    counts.request("acquire_resource", "timeout")  # (the RateLimiterService's)
    got = samples(metrics)

    def count(request: str, status: str) -> float:
        key = frozenset({("request", request), ("status", status)})
        return got.get(("tenure_ydb_requests_total", key), 0.0)

    assert count("acquire_semaphore", "success") == 2
    assert count("other", "success") == 1
    assert count("create_node", "other") == 1
    assert count("acquire_resource", "timeout") == 1


def scrape(port: int) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=WAIT) as answer:
        text = answer.read().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_a_server_counts_what_ydb_clients_asked_and_their_streams(
    serve: Callable[..., YdbServer],
) -> None:
    http_port = free_port()
    server = serve("--http-port", str(http_port))
    driver = ydb.Driver(endpoint=server.endpoint, database=DATABASE)
    try:
        driver.wait(timeout=WAIT, fail_fast=True)
        client = CoordinationClient(driver)
        path = f"{DATABASE}/{unique()}"
        client.create_node(path)
        client.create_node(path)  # exists: YDB answers SUCCESS
        with pytest.raises(ydb.issues.SchemeError):
            client.describe_node(f"{DATABASE}/{unique()}")
        with client.session(path) as session, session.semaphore("job"):
            got = scrape(http_port)
            assert got[("tenure_connections", frozenset({("protocol", "ydb")}))] == 1
    finally:
        driver.stop()

    def count(request: str, status: str) -> float:
        key = frozenset({("request", request), ("status", status)})
        return got.get(("tenure_ydb_requests_total", key), 0.0)

    got = scrape(http_port)
    assert count("create_node", "success") == 2
    assert count("describe_node", "scheme_error") == 1
    assert count("list_endpoints", "success") >= 1
    assert count("session_start", "success") == 1
    assert count("create_semaphore", "success") == 1
    assert count("acquire_semaphore", "success") == 1
    assert count("release_semaphore", "success") == 1
