"""The wire codes of the errors, and the base class of every error tenure raises on
purpose (:mod:`tenure.errors`, which re-exports them).
"""

from __future__ import annotations

import enum
from typing import ClassVar

__all__ = ["ErrorCode", "TenureError"]


class ErrorCode(enum.IntEnum):
    """Wire codes of the errors; stable across versions (new codes are only added)."""

    INTERNAL = 1
    SESSION_CLOSED = 10
    SESSION_EXPIRED = 11
    LEASE_LOST = 12
    LEADER_CHANGED = 13
    NOT_FOUND = 20
    ALREADY_EXISTS = 21
    LIMIT_EXCEEDED = 22
    PRECONDITION_FAILED = 23
    INVALID_ARGUMENT = 24
    TIMEOUT = 25
    CANCELLED = 26
    DEADLOCK = 27
    AUTHENTICATION = 30
    PERMISSION_DENIED = 31
    PROTOCOL = 40
    UNAVAILABLE = 41
    UNSUPPORTED = 42
    NOT_LEADER = 43
    WRONG_CELL = 44


class TenureError(Exception):
    """Base class of every error tenure raises on purpose."""

    code: ClassVar[ErrorCode] = ErrorCode.INTERNAL
