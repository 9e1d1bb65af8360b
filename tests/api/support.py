"""The kit's waiting helpers, under their old name for the repo's other suites."""

from __future__ import annotations

from tenure.testing.conformance.support import (
    PATIENCE,
    describe,
    eventually,
    exists,
    owners,
    reap_spawned,
    settle,
    spawn,
    wait_for_owner,
    wait_for_waiters,
    waiters,
    within,
)

__all__ = [
    "PATIENCE",
    "describe",
    "eventually",
    "exists",
    "owners",
    "reap_spawned",
    "settle",
    "spawn",
    "wait_for_owner",
    "wait_for_waiters",
    "waiters",
    "within",
]
