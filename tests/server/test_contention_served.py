"""The statistics per name of a real ``tenure serve``: ``--contention-names`` bounds the
names kept (the rest pushed out, the estimate counting what is kept),
``--contention-series`` the names ``/metrics`` shows (and ``other``), ``0`` keeps none."""

from __future__ import annotations

import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tenure._core import MAX_COUNT, Acquire, CreateNode, CreateSession, Release, TopNames
from tenure._core.top_report import TopReport
from tests.ports import free_port

from .wire import WAIT, Clients, ServerProcess

NAMES = 300


def _scrape(port: int) -> dict[str, dict[tuple[str, str], float]]:
    """Each ``tenure_name_*`` family's samples by (node, name), and the estimate."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=WAIT) as got:
        text = got.read().decode()
    found: dict[str, dict[tuple[str, str], float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if family.name.startswith("tenure_name_"):
                labels = (sample.labels["node"], sample.labels["name"])
                found.setdefault(family.name, {})[labels] = sample.value
            elif family.name == "tenure_state_estimate_bytes":
                found.setdefault(family.name, {})[("", "")] = sample.value
    return found


async def _contend(wire: Clients, port: int, names: int) -> TopReport:
    """``names`` distinct names, each waited on once: locked, queued behind, let go."""
    client = await wire.connect(port)
    await client.call(CreateNode("n"))
    one = (await client.call(CreateSession("n", b"k1"))).session_id
    two = (await client.call(CreateSession("n", b"k2"))).session_id
    for i in range(names):
        name = f"job-{i}"
        await client.call(Acquire(one, name, MAX_COUNT, request_id=2 * i + 1, ephemeral=True))
        await client.call(Acquire(two, name, MAX_COUNT, request_id=2 * i + 2, ephemeral=True))
        assert await client.call(Release(one, name))
        assert await client.call(Release(two, name))
    report: TopReport = await client.call(TopNames("n", limit=10_000))
    return report


async def test_the_names_kept_and_the_series_shown_are_bounded_as_set(
    tmp_path: Path, wire: Clients
) -> None:
    http = free_port()
    flags = ("--contention-names", "40", "--contention-series", "5", "--http-port", str(http))
    with ServerProcess(tmp_path / "data", "--fsync", "off", *flags) as server:
        before = _scrape(http)["tenure_state_estimate_bytes"][("", "")]
        report = await _contend(wire, server.port, NAMES)
        assert report.capacity == 40
        assert 0 < report.kept <= 40
        assert report.evicted >= NAMES - 40
        assert len(report.names) == report.kept
        got = _scrape(http)
        for family in (
            "tenure_name_wait_seconds",
            "tenure_name_grants",
            "tenure_name_hold_seconds",
            "tenure_name_timeouts",
            "tenure_name_cancelled",
            "tenure_name_losses",
        ):
            assert len(got[family]) == 6, family  # five names and other
            assert ("", "other") in got[family]
        assert sum(got["tenure_name_grants"].values()) == 2 * NAMES  # (every grant, somewhere)
        # The state is as it began (every name dropped): what grew is the sketch's.
        grown = got["tenure_state_estimate_bytes"][("", "")] - before
        assert grown >= report.kept * 1_000


async def test_no_name_is_kept_with_zero(tmp_path: Path, wire: Clients) -> None:
    with ServerProcess(tmp_path / "data", "--fsync", "off", "--contention-names", "0") as server:
        report = await _contend(wire, server.port, 5)
        assert (report.names, report.kept, report.capacity) == ((), 0, 0)


def test_a_bad_setting_is_refused_clearly(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "data", "--contention-share", "0")
    assert server.proc.wait(timeout=WAIT) == 2
    server.kill()
    assert "--contention-share" in server.output()
    assert "must be more than 0" in server.output()
