"""Commands on sessions: open, attach, resume, detach, close, describe, kill; their replies."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from tenure._core.commands.base import Command
from tenure._core.effects import AcquireFailed, LeaseLost
from tenure._core.values import (
    NO_IDENTITY,
    ClientIdentity,
)


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """Reply to CreateSession / AttachSession."""

    session_id: int
    timeout: float
    seq_no: int


@dataclass(frozen=True, slots=True)
class CreateSession(Command[SessionInfo]):
    """Open an attached session on ``node``.

    ``timeout`` is the recovery window (``None``: the node's default).
    ``protection_key`` is a secret chosen by the client; only a holder of it may
    re-attach the session later. ``identity`` is who runs the client (shown with
    ``description`` in owners, waiters and listings).
    """

    node: str
    protection_key: bytes
    timeout: float | None = None
    description: str = ""
    identity: ClientIdentity = NO_IDENTITY


@dataclass(frozen=True, slots=True)
class AttachSession(Command[SessionInfo]):
    """Re-attach a detached (or attached) session from a new connection.

    ``seq_no`` must be greater than every earlier attach of this session, so a
    stale connection can never take a session back from a newer one. ``timeout``
    and ``description``, when given, replace the session's (YDB's re-attaching
    SessionStart restates them); None keeps them.
    """

    session_id: int
    protection_key: bytes
    seq_no: int
    timeout: float | None = None
    description: str | None = None


@dataclass(frozen=True, slots=True)
class ResumeSession(Command[SessionInfo]):
    """Take a live session back from its owner (a process that crashed, or did not).

    The key holder takes the session whatever its ``seq_no``: a new process cannot
    know the latest one. The engine bumps it (the reply carries the new one), so
    every later :class:`AttachSession` of the previous owner is stale and refused.
    The session stays with its holds and tokens; its queued acquires are withdrawn
    (the previous owner waited for them, not the new one) and its watches dropped;
    the previous owner is told its session ended (SessionEnded, SESSION_EXPIRED).
    ``node`` must be the session's node, or the session is as good as missing.
    """

    session_id: int
    protection_key: bytes
    node: str


@dataclass(frozen=True, slots=True)
class DetachSession(Command[None]):
    """The session's connection is gone: its recovery window starts.

    The window is counted from when its client was last heard from, ``silent_for``
    seconds before now (ZooKeeper's rule): a partition that kept the connection
    open adds nothing to it. ``silent_for`` is clamped to the window; a session
    silent for its whole window expires at once. A duration, not a time, so that
    replaying the command gives the same state on any clock. A second detach can
    only bring the expiry closer.
    """

    session_id: int
    silent_for: float = 0.0


@dataclass(frozen=True, slots=True)
class CloseSession(Command[None]):
    """Close a session cleanly: release all it holds, cancel all it waits for."""

    session_id: int


@dataclass(frozen=True, slots=True)
class HeldGrant:
    """One grant a session holds (in a :class:`SessionState`)."""

    name: str
    token: int
    count: int
    lease_ttl: float | None = None
    hold: int = 0


@dataclass(frozen=True, slots=True)
class QueuedAcquire:
    """One acquire a session has waiting (in a :class:`SessionState`)."""

    name: str
    request_id: int
    count: int
    hold: int = 0


@dataclass(frozen=True, slots=True)
class SessionState:
    """Reply to DescribeSession: one page of what a session holds and waits for.

    Items are those of the semaphores named after the command's ``after``, in name
    order: ``holds`` and ``waits`` as they are now, and ``missed``, the latest ending
    of an acquire or a grant on each semaphore that the session did not cause
    (timeout, deletion, lease expiry) and has not acted on since. ``next_after`` is
    the ``after`` of the next page, or None on the last one.
    """

    session_id: int
    holds: tuple[HeldGrant, ...] = ()
    waits: tuple[QueuedAcquire, ...] = ()
    missed: tuple[AcquireFailed | LeaseLost, ...] = ()
    next_after: str | None = None


#: The most semaphores one DescribeSession page may cover.
MAX_DESCRIBE_SESSION_LIMIT: Final = 10_000


@dataclass(frozen=True, slots=True)
class DescribeSession(Command[SessionState]):
    """Describe what a session holds, waits for and may have missed (one page).

    A client that re-attaches reads this to agree with the server on its session's
    state: pushes sent on a connection that died, or queued by a server that then
    restarted, are lost, but what they told is here. Pages cover up to ``limit``
    semaphores named after ``after`` (``""``: from the first).
    """

    session_id: int
    after: str = ""
    limit: int = 128


@dataclass(frozen=True, slots=True)
class KillSession(Command[None]):
    """End a live session of ``node`` as if its recovery window had passed (an operator's act).

    Its holds are released (lock-delay applies, as on expiry), its waits withdrawn,
    and its client is told its session expired because an operator ended it.
    NotFoundError if the node or the live session does not exist.
    """

    node: str
    session_id: int
