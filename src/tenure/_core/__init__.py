"""The sans-I/O coordination engine.

Commands in, replies and effects out; time is an argument. Nothing in this package
imports asyncio, sockets, threads, or reads a clock (a test enforces it).

Re-exported here: every command and reply (those of :mod:`tenure._core.commands`,
its ``__all__``), the effects, the engine, and the values most callers need.

Layer (CONTRIBUTING.md): its modules may import each other and tenure.errors.
"""

from __future__ import annotations

from tenure._core import commands
from tenure._core.claims import ClaimRecord
from tenure._core.commands import *  # noqa: F403
from tenure._core.effects import (
    AcquireFailed,
    Effect,
    Granted,
    LeaseLost,
    SessionEnded,
    WatchFired,
)
from tenure._core.engine import Engine
from tenure._core.values import (
    MAX_COUNT,
    NodeConfig,
    NodeDescription,
    OwnerInfo,
    SemaphoreDescription,
    WaiterInfo,
)

__all__ = [
    "AcquireFailed",
    "ClaimRecord",
    "Effect",
    "Engine",
    "Granted",
    "LeaseLost",
    "MAX_COUNT",
    "NodeConfig",
    "NodeDescription",
    "OwnerInfo",
    "SemaphoreDescription",
    "SessionEnded",
    "WaiterInfo",
    "WatchFired",
]
__all__ += commands.__all__  # every command and reply, as commands lists them
