"""The sans-I/O coordination engine.

Commands in, replies and effects out; time is an argument. Nothing in this package
imports asyncio, sockets, threads, or reads a clock (a test enforces it).
"""

from __future__ import annotations

from tenure._core.commands import (
    Acquire,
    AcquireResult,
    AcquireStatus,
    AlterNode,
    AttachSession,
    CancelAcquire,
    CancelWatch,
    CloseSession,
    Command,
    CreateNode,
    CreateSemaphore,
    CreateSession,
    DeleteSemaphore,
    DescribeNode,
    DescribeResult,
    DescribeSemaphore,
    DetachSession,
    DropNode,
    Release,
    Renew,
    SessionInfo,
    UpdateSemaphore,
)
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
    "Acquire",
    "AcquireFailed",
    "AcquireResult",
    "AcquireStatus",
    "AlterNode",
    "AttachSession",
    "CancelAcquire",
    "CancelWatch",
    "CloseSession",
    "Command",
    "CreateNode",
    "CreateSemaphore",
    "CreateSession",
    "DeleteSemaphore",
    "DescribeNode",
    "DescribeResult",
    "DescribeSemaphore",
    "DetachSession",
    "DropNode",
    "Effect",
    "Engine",
    "Granted",
    "LeaseLost",
    "MAX_COUNT",
    "NodeConfig",
    "NodeDescription",
    "OwnerInfo",
    "Release",
    "Renew",
    "SemaphoreDescription",
    "SessionEnded",
    "SessionInfo",
    "UpdateSemaphore",
    "WaiterInfo",
    "WatchFired",
]
