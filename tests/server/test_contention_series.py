"""/metrics' statistics per name: at most ``--contention-series`` names and ``other``,
however many names there were (tenure.server._http.contention_series)."""

from __future__ import annotations

from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tenure._core import MAX_COUNT, Acquire, CreateNode, CreateSession, Engine, NodeConfig, Release
from tenure._core.name_stats import NameStats
from tenure._core.quotas import QuotaLedger
from tenure.server._http.collector import StateCollector
from tenure.server._http.contention_series import contention_families
from tenure.server._http.metrics import ServerMetrics
from tenure.server._http.readiness import Readiness

FAMILIES = (
    "tenure_name_wait_seconds",
    "tenure_name_hold_seconds",
    "tenure_name_grants",
    "tenure_name_timeouts",
    "tenure_name_cancelled",
    "tenure_name_losses",
)


def series(stats: NameStats, shown: int) -> dict[str, dict[tuple[str, str], float]]:
    """Each family's samples by (node, name), as a scrape parses them."""
    found: dict[str, dict[tuple[str, str], float]] = {}
    for family in contention_families(stats, shown):
        for sample in family.samples:
            labels = (sample.labels["node"], sample.labels["name"])
            assert labels not in found.setdefault(family.name, {}), labels
            found[family.name][labels] = sample.value
    return found


def test_a_million_distinct_names_make_at_most_the_series_asked_and_other() -> None:
    ledger = QuotaLedger()
    stats = NameStats(ledger)  # (the server's defaults: 1,000 names kept, 100 shown)
    for i in range(1_000_000):
        name = f"job-{i}"
        stats.queued_on("n", name, "", i / 1000)
        stats.granted("n", name, 0.5, i / 1000)
        stats.hold_ended("n", name, 0.25, False, i / 1000)
    got = series(stats, 100)
    assert set(got) == set(FAMILIES)
    for family in FAMILIES:
        assert len(got[family]) <= 101, family
        assert ("", "other") in got[family]
    waits = got["tenure_name_wait_seconds"]
    assert sum(waits.values()) == stats.wait_total  # (other: all the rest)
    assert sum(got["tenure_name_grants"].values()) == 1_000_000
    assert stats.kept <= 1_000
    assert ledger.kept_bytes == stats.bytes <= 1_000 * 6_000


def test_the_most_waited_names_are_shown_and_none_with_zero_series() -> None:
    stats = NameStats(QuotaLedger())
    for i, waited in enumerate((5.0, 1.0, 3.0)):
        stats.queued_on("n", f"m{i}", "", 0.0)
        stats.granted("n", f"m{i}", waited, 1.0)
    got = series(stats, 2)["tenure_name_wait_seconds"]
    assert got == {("n", "m0"): 5.0, ("n", "m2"): 3.0, ("", "other"): 1.0}
    assert series(stats, 0)["tenure_name_wait_seconds"] == {("", "other"): 9.0}


def test_a_scrape_of_a_server_shows_the_names_of_its_engine() -> None:
    engine = Engine()
    engine.apply(CreateNode("n", NodeConfig()), 0.0)
    one, two = (engine.apply(CreateSession("n", b"k"), 0.0).session_id for _ in range(2))
    engine.apply(Acquire(one, "m", MAX_COUNT, 1, ephemeral=True), 0.0)
    engine.apply(Acquire(two, "m", MAX_COUNT, 2, ephemeral=True), 0.0)
    engine.apply(Release(one, "m"), 4.0)
    metrics = ServerMetrics(version="0")
    state = StateCollector(Readiness(), metrics, lambda: engine, dict)
    state.contention_series = 1
    metrics.registry.register(state)
    text = generate_latest(metrics.registry).decode()
    parsed = {
        (sample.name, sample.labels.get("node"), sample.labels.get("name")): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if family.name.startswith("tenure_name_")
    }
    assert parsed[("tenure_name_wait_seconds_total", "n", "m")] == 4.0
    assert parsed[("tenure_name_hold_seconds_total", "n", "m")] == 4.0
    assert parsed[("tenure_name_grants_total", "n", "m")] == 1.0
    assert parsed[("tenure_name_grants_total", "", "other")] == 1.0  # (the first, before kept)
