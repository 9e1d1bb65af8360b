"""``python -m tenure.testing.lincheck`` as a user runs it: a process, its exit status
and what it prints (the in-process tests are ``test_cli.py``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

DATA = Path(__file__).parent / "data" / "porcupine"


def test_the_module_runs_and_exits_with_the_verdict() -> None:
    ran = subprocess.run(
        [
            sys.executable,
            "-m",
            "tenure.testing.lincheck",
            "--format",
            "jepsen-log",
            "--model",
            "register",
            str(DATA / "jepsen" / "etcd_000.log"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert ran.returncode == 1, ran.stderr
    assert ran.stdout.startswith("not linearizable: ")
    assert "could not linearize" in ran.stdout
    helped = subprocess.run(
        [sys.executable, "-m", "tenure.testing.lincheck", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "--timeout" in helped.stdout
    assert "--html" in helped.stdout
