"""The README's snippets run as written: its quick start against a real ``tenure
serve`` (twice), its memory:// programs, its pytest example with tenure's fixtures in
a project of its own, and its conformance command against a server."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.server.wire import ServerProcess

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DEFAULT_ADDRESS = "127.0.0.1:6388"
PYPROJECT_EXTRAS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
    "optional-dependencies"
]


def server_blocks() -> list[str]:
    """The README's Python blocks that talk to the server of its first command."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    return [block for block in blocks if f"tenure://{DEFAULT_ADDRESS}" in block]


def test_the_readme_has_server_examples() -> None:
    assert len(server_blocks()) >= 2  # the async quick start and its sync twin


@pytest.mark.parametrize("index", range(len(server_blocks())))
def test_a_readme_example_runs_and_runs_again(index: int, tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "data") as server:
        source = server_blocks()[index].replace(DEFAULT_ADDRESS, f"127.0.0.1:{server.port}")
        for attempt in (1, 2):  # a second run finds the node and semaphore in place
            result = subprocess.run(
                [sys.executable, "-W", "error", "-c", source],
                cwd=ROOT,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            report = f"run {attempt}:\n{result.stdout}\n{result.stderr}"
            assert result.returncode == 0, report
            assert result.stderr == "", report
            assert "token" in result.stdout, report


def memory_blocks() -> list[str]:
    """The README's complete programs that need no server (memory://, a FakeClock)."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    return [block for block in blocks if "memory://" in block and "asyncio.run(" in block]


def test_the_readme_has_a_fake_clock_example() -> None:
    assert any("FakeClock" in block for block in memory_blocks())


@pytest.mark.parametrize("index", range(len(memory_blocks())))
def test_a_readme_memory_example_runs(index: int) -> None:
    # The FakeClock example asserts itself that the lock is still held inside the
    # window it chose and passes on once the clock is past it.
    result = subprocess.run(
        [sys.executable, "-W", "error", "-c", memory_blocks()[index]],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    report = f"{result.stdout}\n{result.stderr}"
    assert result.returncode == 0, report
    assert result.stderr == "", report
    assert "token" in result.stdout, report


def python_blocks() -> list[str]:
    """Every ```python block of the README."""
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)


def pytest_blocks() -> list[str]:
    """The README's test files for pytest (tenure's fixtures)."""
    return [block for block in python_blocks() if "\ndef test_" in block or "def test_" in block]


def test_every_python_block_of_the_readme_is_run() -> None:
    # Issue 50: the pytest snippet ran nowhere, and did not run as written (no
    # imports, no asyncio marker, an undefined name). A block of none of the kinds
    # above would be run by no test here.
    run = server_blocks() + memory_blocks() + pytest_blocks()
    assert pytest_blocks(), "the README's pytest example is gone: update this test"
    assert [block for block in python_blocks() if block not in run] == []


def clean_env() -> dict[str, str]:
    """This environment without the outer pytest's variables (a run of its own)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}


@pytest.mark.parametrize("index", range(len(pytest_blocks())))
def test_a_readme_pytest_example_passes_as_written(index: int, tmp_path: Path) -> None:
    # In a directory of its own: none of this repository's pytest settings apply (as
    # in a user's project: pytest-asyncio in strict mode, tenure's plugin by its
    # entry point).
    (tmp_path / "test_example.py").write_text(pytest_blocks()[index])
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_example.py"],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=clean_env(),
    )
    report = f"{result.stdout}\n{result.stderr}"
    assert result.returncode == 0, report
    assert re.search(r"\b1 passed\b", result.stdout), report
    assert "warning" not in result.stdout.lower(), report


def conformance_lines() -> list[str]:
    """The README's shell block that runs the conformance kit, one command a line."""
    blocks = re.findall(r"```sh\n(.*?)```", README.read_text(), flags=re.DOTALL)
    [block] = [block for block in blocks if "tenure.testing.conformance" in block]
    return [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]


def test_the_readme_conformance_command_installs_what_it_needs() -> None:
    # Issue 50: it needed pytest in the venv scripts/start made, which has none.
    install, run = conformance_lines()
    assert install == "scripts/bootstrap testing"
    assert 'spec=".[server,cli,$extras]"' in (ROOT / "scripts" / "bootstrap").read_text()
    testing = PYPROJECT_EXTRAS["testing"]
    assert {"pytest", "pytest-asyncio", "hypothesis"} <= {
        re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0] for requirement in testing
    }
    assert run.startswith(".venv/bin/python -m pytest ")


def test_the_readme_conformance_command_runs_against_a_server(tmp_path: Path) -> None:
    # The README's line as written (this venv's python for .venv/bin/python, this
    # server's port), narrowed to the kit's mutex tests: tests/test_conformance_kit.py
    # runs the whole kit from an installed package.
    run = conformance_lines()[1].split()
    assert run[0] == ".venv/bin/python"
    with ServerProcess(tmp_path / "data", "--fsync", "off") as server:
        args = [arg.replace(DEFAULT_ADDRESS, f"127.0.0.1:{server.port}") for arg in run[1:]]
        result = subprocess.run(
            [sys.executable, *args, "-q", "-p", "no:cacheprovider", "-k", "mutex"],
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
            env=clean_env(),
        )
    report = f"{result.stdout}\n{result.stderr}"
    assert result.returncode == 0, report
    assert re.search(r"\b\d+ passed\b", result.stdout), report
