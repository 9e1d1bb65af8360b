"""Helpers of the fault suite's tests: the tools a scenario needs.

A scenario whose tool is missing (libfaketime, gcc, mounting as root, network
namespaces) skips on a developer machine but *fails* in CI (``CI=true``):
scripts/bootstrap installs them, and CI must never go green by not testing.
"""

from __future__ import annotations

import os
import shutil

import pytest

from tests.api.harness import in_ci
from tools.faults.harness import faketime_library
from tools.faults.netns import unavailable as netns_unavailable
from tools.faults.scenarios import FAKETIME, GCC, MOUNT, Scenario


def missing_tools(scenario: Scenario) -> list[str]:
    """The tools ``scenario`` needs that this machine lacks."""
    missing = []
    if FAKETIME in scenario.needs and faketime_library() is None:
        missing.append("libfaketime (apt-get install faketime)")
    if GCC in scenario.needs and shutil.which("gcc") is None:
        missing.append("gcc (apt-get install gcc libc6-dev)")
    if MOUNT in scenario.needs and (os.geteuid() != 0 or shutil.which("mount") is None):
        missing.append("mount as root (a tmpfs data directory)")
    return missing


def require_tools(scenario: Scenario) -> None:
    """Skip (fail in CI) if ``scenario`` needs a tool this machine lacks."""
    missing = missing_tools(scenario)
    if missing:
        _skip(f"scenario {scenario.name} needs {', '.join(missing)}")


def require_netns(what: str) -> None:
    """Skip (fail in CI) if no network namespace can be made here (tools/faults/netns.py)."""
    reason = netns_unavailable()
    if reason is not None:
        _skip(f"{what} runs in network namespaces: {reason}")


def _skip(message: str) -> None:
    if in_ci():
        pytest.fail(f"{message} (CI=true: a missing tool is a failure, never a skip)")
    pytest.skip(message)
