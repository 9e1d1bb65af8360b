"""The `tenure` console script."""

from __future__ import annotations

import subprocess
import sys

import tenure


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tenure", *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def test_version() -> None:
    result = run("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"tenure {tenure.__version__}"


def test_demo_serves_workers_in_order() -> None:
    result = run("demo")
    assert result.returncode == 0, result.stderr
    assert "served in arrival order: ['worker-0', 'worker-1', 'worker-2']" in result.stdout
    tokens = [int(line.rsplit(" ", 1)[1]) for line in result.stdout.splitlines() if "holds" in line]
    assert tokens == sorted(tokens)
    assert len(set(tokens)) == 3
    assert "leader of 'primary': host-a:9090 (is me: True)" in result.stdout


def test_no_command_prints_help_and_fails() -> None:
    result = run()
    assert result.returncode == 2
    assert "demo" in result.stderr
