"""``scripts/start`` installs only when it must: fresh, or after what it installs from changed.

The real script runs in a copy of the repo's layout whose ``scripts/bootstrap`` is a
stand-in that logs each call and installs a ``.venv/bin/tenure`` that echoes its
arguments: the decision to install is what is under test, not pip (bootstrap's own
install is exercised by every CI run). Likewise ``scripts/compile`` is a stand-in
that logs each build: whether the server's compiled build is made, and the pure
build's fallback when it cannot be (``tests/test_build.py`` checks the real one).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

FAKE_BOOTSTRAP = """#!/usr/bin/env bash
set -euo pipefail
cd "$(dirname "$0")/.."
echo "installed $*" >>bootstrap.log
[ -e fail-bootstrap ] && exit 7
mkdir -p .venv/bin
printf '#!/bin/sh\\necho "tenure $*"\\n' >.venv/bin/tenure
chmod +x .venv/bin/tenure
"""

FAKE_COMPILE = """#!/usr/bin/env bash
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  --check) [ -e compiled ] ;;
  --clean) rm -f compiled; echo clean >>compile.log ;;
  *) echo build >>compile.log; [ -e fail-compile ] && exit 3; touch compiled ;;
esac
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "scripts").mkdir()
    for script in ("start", "ensure-venv"):  # ensure-venv: the decision, shared
        shutil.copy2(ROOT / "scripts" / script, tmp_path / "scripts" / script)
    for name, text in (("bootstrap", FAKE_BOOTSTRAP), ("compile", FAKE_COMPILE)):
        (tmp_path / "scripts" / name).write_text(text)
        (tmp_path / "scripts" / name).chmod(0o755)
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "tenure"\n')
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "module.py").write_text("x = 1\n")
    return tmp_path


def start(repo: Path, *args: str, **env: str) -> tuple[int, str]:
    """Run scripts/start; its exit status and output."""
    result = subprocess.run(
        [str(repo / "scripts" / "start"), *args],
        cwd="/",  # the script finds the repo from its own path
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    return result.returncode, result.stdout + result.stderr


def installs(repo: Path) -> int:
    log = repo / "bootstrap.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def compiles(repo: Path) -> list[str]:
    log = repo / "compile.log"
    return log.read_text().splitlines() if log.exists() else []


def test_installs_once_then_starts_straight_away(repo: Path) -> None:
    assert "tenure serve --help\n" in start(repo, "--help")[1]
    assert installs(repo) == 1
    assert start(repo, "--port", "7000") == (0, "tenure serve --port 7000\n")  # compiled: quiet
    assert start(repo, "--help")[0] == 0
    assert installs(repo) == 1  # nothing changed: no install, no registry round trip


def test_a_source_change_needs_no_install(repo: Path) -> None:
    start(repo)
    (repo / "src" / "module.py").write_text("x = 2\n")  # editable install: seen as is
    start(repo)
    assert installs(repo) == 1


def test_a_changed_pyproject_or_bootstrap_installs_again(repo: Path) -> None:
    start(repo)
    with (repo / "pyproject.toml").open("a") as file:
        file.write('dependencies = ["msgpack"]\n')
    start(repo)
    assert installs(repo) == 2
    start(repo)
    assert installs(repo) == 2
    with (repo / "scripts" / "bootstrap").open("a") as file:
        file.write("# changed\n")
    start(repo)
    assert installs(repo) == 3


def test_a_lost_venv_or_a_forced_reinstall_installs(repo: Path) -> None:
    start(repo)
    shutil.rmtree(repo / ".venv")
    assert "tenure serve\n" in start(repo)[1]
    assert installs(repo) == 2
    start(repo, TENURE_REINSTALL="1")
    assert installs(repo) == 3


def test_a_failed_install_is_tried_again_next_time(repo: Path) -> None:
    start(repo)
    (repo / "fail-bootstrap").touch()
    with (repo / "pyproject.toml").open("a") as file:
        file.write("# changed\n")
    status, _ = start(repo)
    assert status == 7  # the failure is the script's, not hidden behind a stale venv
    (repo / "fail-bootstrap").unlink()
    assert start(repo) == (0, "tenure serve\n")  # compiled by the first start
    assert installs(repo) == 3


def test_each_set_of_extras_is_installed_once(repo: Path) -> None:
    # scripts/test and scripts/faults ask for the test extras, scripts/start for none.
    ensure = [str(repo / "scripts" / "ensure-venv"), "test"]
    for _ in range(2):
        subprocess.run(ensure, cwd="/", capture_output=True, timeout=30, check=True)
    start(repo)
    start(repo)
    assert (repo / "bootstrap.log").read_text().splitlines() == [
        "installed test",
        "installed compile",
    ]


def test_the_server_runs_the_compiled_build_compiled_once(repo: Path) -> None:
    status, output = start(repo)
    assert status == 0
    assert "compiling the server's hot path" in output
    assert start(repo) == (0, "tenure serve\n")  # current: no build
    assert compiles(repo) == ["build"]
    assert (repo / "compiled").exists()


def test_a_failed_compile_runs_the_pure_build(repo: Path) -> None:
    (repo / "fail-compile").touch()
    status, output = start(repo, "--port", "7000")
    assert status == 0
    assert "the pure build runs" in output
    assert "tenure serve --port 7000\n" in output
    assert compiles(repo) == ["build", "clean"]


def test_tenure_pure_runs_the_pure_build(repo: Path) -> None:
    start(repo)
    assert "tenure serve\n" in start(repo, TENURE_PURE="1")[1]
    assert not (repo / "compiled").exists()
    assert compiles(repo) == ["build", "clean"]
