"""``scripts/faults``'s command line (:mod:`tools.faults.cli`): its names are the
suite's, and it answers ``--help`` or a wrong argument before installing anything."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tools.faults import cli
from tools.faults.report_texts import TARGETS
from tools.faults.scenarios import SCENARIOS

ROOT = Path(__file__).resolve().parents[2]

#: A stand-in for scripts/ensure-venv: says it was called, and fails.
FAKE_INSTALL = """#!/usr/bin/env bash
cd "$(dirname "$0")/.."
echo "install $*" >>install.log
exit 9
"""


def test_the_names_are_those_of_the_report_and_the_scenarios() -> None:
    assert tuple(TARGETS) == cli.TARGET_NAMES
    assert tuple(SCENARIOS) == cli.SCENARIO_NAMES


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """scripts/faults and the command line alone: nothing else of the suite, no .venv."""
    for part in (
        "scripts/faults",
        "tools/__init__.py",
        "tools/faults/__init__.py",
        "tools/faults/cli.py",
    ):
        (tmp_path / part).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / part, tmp_path / part)
    install = tmp_path / "scripts" / "ensure-venv"
    install.write_text(FAKE_INSTALL)
    install.chmod(0o755)
    return tmp_path


def faults(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the copy's scripts/faults with the system's Python (no PYTHON override)."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHON"}
    return subprocess.run(
        [str(repo / "scripts" / "faults"), *args],
        cwd="/",
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def installs(repo: Path) -> list[str]:
    log = repo / "install.log"
    return log.read_text().splitlines() if log.exists() else []


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_is_printed_before_anything_is_installed(repo: Path, flag: str) -> None:
    done = faults(repo, "--target", "redis", flag)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: scripts/faults")
    assert "--minutes" in done.stdout
    assert installs(repo) == []


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["--target", "zookeeper"], "invalid choice: 'zookeeper'"),
        (["--only", "flood"], "invalid choice: 'flood'"),
        (["--minutes", "0"], "must be above 0"),
        (["--workers", "two"], "not a whole number"),
        (["--min", "1"], "unrecognized arguments: --min"),  # no abbreviations
    ],
)
def test_a_wrong_argument_is_refused_before_anything_is_installed(
    repo: Path, args: list[str], reason: str
) -> None:
    done = faults(repo, *args)
    assert done.returncode == 2
    assert reason in done.stderr
    assert installs(repo) == []


@pytest.mark.parametrize("flag", ["--only", "--scenario"])
def test_right_arguments_go_on_to_the_install(repo: Path, flag: str) -> None:
    done = faults(repo, "--target", "tenure", flag, "tenant", "--minutes", "1")
    assert done.returncode == 9  # the stand-in's failure: the run stops there
    assert installs(repo) == ["install test"]


def test_scenario_is_another_name_of_only() -> None:
    args = cli.parser().parse_args(["--scenario", "tenant", "--only", "crash"])
    assert args.only == ["tenant", "crash"]
