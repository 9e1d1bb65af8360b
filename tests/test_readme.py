"""The README's quick start runs, as written, against a real ``tenure serve`` (twice)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.server.wire import ServerProcess

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DEFAULT_ADDRESS = "127.0.0.1:6388"


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
