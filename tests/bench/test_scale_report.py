"""docs/scale.md as bench/scale writes it: targets judged, tables and projection, from rows.

Made-up rows (no server): what the page says of them is checked, never a timing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.scale import report
from bench.scale.projection import projection

Rows = dict[str, list[dict[str, Any]]]


def rows() -> Rows:
    common = {"rss_mb": 100.0, "server_cpu_pct": 20.0, "p50_ms": 0.2, "max_ms": 9.0}
    return {
        "connections": [
            {"size": 0, **common, "p99_ms": 1.0, "health_max_ms": 5.0},
            {
                "size": 10_000,
                **common,
                "server_cpu_pct": 40.0,
                "p99_ms": 2.5,  # 2.5x alone: missed
                "health_max_ms": 30.0,
                "bytes_per_item": 9_000.0,  # under 16 KiB: met
            },
        ],
        "holds": [
            {
                "size": 1_000_000,
                **common,
                "p99_ms": 1.0,
                "health_max_ms": 1_200.0,  # over 1 s: the health target missed
                "bytes_per_item": 280.0,
                "restart_s": 4.0,
            }
        ],
        "waiters": [{"size": 100_000, "error": "RuntimeError: worker exited"}],
    }


def judged(table: list[str]) -> dict[str, str]:
    """Each target's text -> its verdict (the table's last column)."""
    cells = [line.strip("|").split("|") for line in table[2:]]
    return {c[0].strip(): c[-1].strip() for c in cells}


def test_targets_are_judged_from_the_rows_and_missing_ones_say_so() -> None:
    verdicts = judged(report.targets_table(rows()))
    assert verdicts["a connection costs at most 16 KiB (10k pinging)"] == "yes"
    assert verdicts["10k pinging connections: probe p99 within 2x of alone"] == "**no**"
    assert verdicts["a hold costs at most 300 bytes at 1M"] == "yes"
    assert verdicts["restart at 1M holds at most 5 s"] == "yes"
    assert verdicts["a health probe answered within 1 s at every size (filling included)"] == (
        "**no**"
    )
    assert verdicts["a grant from the head of a 100k queue in 1 ms of server time"] == (
        "not measured"
    )
    assert len(verdicts) == len(report.TARGETS)


def test_a_failed_size_is_a_row_that_says_why() -> None:
    table = report.dimension_table("waiters", rows()["waiters"])
    assert "failed: RuntimeError: worker exited" in table[-1]
    holds = report.dimension_table("holds", rows()["holds"])
    assert holds[0].startswith("| size | RSS MB | bytes/item (RSS) |")
    assert "| 1,000,000 | 100 | 280 |" in holds[2]


def test_the_projection_takes_the_keepalives_cpu_beyond_the_probes_own() -> None:
    lines = projection(rows())
    (connections,) = [line for line in lines if line.startswith("- **Connections**")]
    # (40% - 20%) of a core over 10,000 connections: 20 µs of CPU a second each.
    assert "20.00 µs of CPU a second" in connections
    (holds,) = [line for line in lines if line.startswith("- **Holds**")]
    assert "4 µs a hold" in holds or "4.0 µs a hold" in holds
    assert projection({}) == ["- nothing measured yet."]


def test_the_page_keeps_its_hand_written_notes(tmp_path: Path) -> None:
    out = tmp_path / "scale.md"
    out.write_text("old\n<!-- notes -->\nwhy the p99 target is missed\n<!-- /notes -->\n")
    report.write(rows(), {"command": "scripts/bench --scale"}, out)
    page = out.read_text()
    assert "why the p99 target is missed" in page
    assert (tmp_path / "scale" / "connections.png").stat().st_size > 0
    assert "![connections](scale/connections.png)" in page
