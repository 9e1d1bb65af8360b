"""Fixtures of the CLI tests: the installed ``tenure`` executable and one shared server.

The tests share one ``tenure serve`` (``cli_server``) and keep apart by working in
nodes of their own (``node``); a test that stops its server uses the root
conftest's ``tenure_server``.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.support import TENURE
from tests.server.wire import ServerProcess

_nodes = itertools.count()


@pytest.fixture(scope="session")
def tenure_executable() -> Path:
    """The installed console script (its absence is a failure, not a skip)."""
    assert TENURE.exists(), f"{TENURE} is missing: run scripts/bootstrap test"
    return TENURE


@pytest.fixture(scope="session")
def cli_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One real ``tenure serve`` shared by the CLI tests (fsync off: the disk is not tested)."""
    with ServerProcess(tmp_path_factory.mktemp("cli") / "data", "--fsync", "off") as server:
        yield server


@pytest.fixture
def url(cli_server: ServerProcess, tenure_executable: Path) -> str:
    """The shared server's URL."""
    return f"tenure://127.0.0.1:{cli_server.port}"


@pytest.fixture
def node() -> str:
    """A node name no other test of this run uses."""
    return f"cli-{os.getpid()}-{next(_nodes)}"
