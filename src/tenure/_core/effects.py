"""Effects: what the engine tells parties other than the caller of a command. [compiled]

A command's own answer is its reply. Everything else it causes (a waiter granted
later, a watch fired, a session expired by ``tick``) comes out of
``Engine.take_effects()`` in the order it happened, addressed to a session. The host
delivers each to the connection that owns that session.
"""

from __future__ import annotations

from tenure._core._dataclass import dataclass
from tenure._core.values import SemaphoreDescription
from tenure.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class Granted:
    """A queued acquire was granted."""

    session_id: int
    request_id: int
    name: str
    token: int
    count: int
    lease_ttl: float | None = None
    hold: int = 0


@dataclass(frozen=True, slots=True)
class AcquireFailed:
    """A queued acquire ended without a grant (timeout, cancelled, superseded, deleted)."""

    session_id: int
    request_id: int
    name: str
    code: ErrorCode
    message: str
    hold: int = 0


@dataclass(frozen=True, slots=True)
class LeaseLost:
    """A grant ended without its session releasing it (force delete, node drop, lease TTL)."""

    session_id: int
    name: str
    token: int
    code: ErrorCode
    message: str
    hold: int = 0


@dataclass(frozen=True, slots=True)
class WatchFired:
    """An armed one-shot watch saw its semaphore change; the watch is gone.

    ``description`` is the state the change left, listing owners and waiters as the
    arming describe asked (``exists`` false if the semaphore is gone), or None when
    it is not sent (more to list than ``max_listed_per_firing``; larger than the
    watcher's frames; queued for a detached session): describe to learn it. Describe
    again (with a watch) to go on watching: that reads the latest state.
    """

    session_id: int
    watch_id: int
    name: str
    description: SemaphoreDescription | None = None


@dataclass(frozen=True, slots=True)
class SessionEnded:
    """A session ended other than by CloseSession: expired, or its node was dropped."""

    session_id: int
    code: ErrorCode
    message: str


Effect = Granted | AcquireFailed | LeaseLost | WatchFired | SessionEnded
