"""bench.peers.lockload as the orchestrator runs it: several workloads in one process, quick
mode's cap, and the sizes it is given. On memory:// (no server); nothing is timed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]


def lockload(*args: str) -> list[dict[str, Any]]:
    """Run ``python -m bench.peers.lockload`` on memory://; its Measures as dicts."""
    argv = [sys.executable, "-m", "bench.peers.lockload", "--system", "tenure-memory"]
    argv += ["--url", "memory://", "--timeout", "60", *args]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=90, check=True)
    found: list[dict[str, Any]] = json.loads(done.stdout)
    return found


def test_several_workloads_in_one_process_each_report_their_own_metrics() -> None:
    found = lockload("--workload", "seq,par,cont", "--n", "seq=64,par=96,cont=64", "--clients", "4")
    by_workload: dict[str, set[str]] = {}
    for m in found:
        by_workload.setdefault(m["workload"], set()).add(m["metric"])
        assert "quick mode" not in m["note"]  # every size was done: no cap was reached
    assert by_workload["seq"] >= {"pairs_per_s", "client_cpu_us"}
    assert "server_cpu_us" not in by_workload["seq"]  # memory:// has no server process
    assert by_workload["par"] == {"pairs_per_s", "p50_ms", "p99_ms"}
    assert {"grants_per_s", "jain", "max_overtaken"} <= by_workload["cont"]
    cont = {m["metric"]: m["value"] for m in found if m["workload"] == "cont"}
    assert cont["max_overtaken"] == 0  # the engine is FIFO
    assert 0.99 <= cont["jain"] <= 1.0


def test_seq_awaited_reports_what_seq_reports() -> None:
    found = lockload("--workload", "seq,seq-awaited", "--n", "64")
    metrics: dict[str, set[str]] = {}
    for m in found:
        metrics.setdefault(m["workload"], set()).add(m["metric"])
    assert metrics["seq-awaited"] == metrics["seq"]
    assert {"pairs_per_s", "release_p50_ms", "client_cpu_us"} <= metrics["seq-awaited"]
    rate = next(m for m in found if (m["workload"], m["metric"]) == ("seq-awaited", "pairs_per_s"))
    assert rate["value"] > 0
    assert rate["unit"] == "pairs/s"


def test_the_cap_stops_a_workload_early_and_the_note_says_so() -> None:
    # Ten million pairs cannot be done in a tenth of a second: the cap ends the loop.
    found = lockload("--workload", "seq", "--n", "10000000", "--max-seconds", "0.1")
    (rate,) = [m for m in found if m["metric"] == "pairs_per_s"]
    assert rate["value"] > 0
    assert rate["note"].startswith("quick mode: at most 0.1 s per repeat")


def test_a_workload_without_a_size_is_refused() -> None:
    argv = [sys.executable, "-m", "bench.peers.lockload", "--system", "tenure-memory"]
    argv += ["--url", "memory://", "--workload", "seq,cont", "--n", "seq=10"]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "--n gives no size for ['cont']" in done.stderr


@pytest.mark.parametrize("workload", ["seq,bogus", ""])
def test_an_unknown_workload_is_refused(workload: str) -> None:
    argv = [sys.executable, "-m", "bench.peers.lockload", "--system", "tenure-memory"]
    argv += ["--url", "memory://", "--workload", workload, "--n", "10"]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "workloads of seq, seq-awaited, par, cont" in done.stderr
