"""Commands on semaphores: create, acquire, release, cancel, renew, data, delete, describe."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from tenure._core.commands.base import Command
from tenure._core.values import (
    SemaphoreDescription,
)


class AcquireStatus(enum.Enum):
    """Outcome of an Acquire at the moment it is applied."""

    GRANTED = "granted"  # held now; token is set
    QUEUED = "queued"  # waiting; a Granted or AcquireFailed effect follows
    BUSY = "busy"  # timeout was 0 and it could not be granted at once


@dataclass(frozen=True, slots=True)
class AcquireResult:
    """Reply to Acquire."""

    status: AcquireStatus
    token: int | None = None
    count: int = 0
    lease_ttl: float | None = None


@dataclass(frozen=True, slots=True)
class CreateSemaphore(Command[None]):
    """Create a persistent semaphore in the session's node."""

    session_id: int
    name: str
    limit: int
    data: bytes = b""


@dataclass(frozen=True, slots=True)
class Acquire(Command[AcquireResult]):
    """Ask for ``count`` tokens of a semaphore, with owner ``data``.

    ``timeout``: ``None`` waits forever, ``0`` only tries, else seconds of waiting.
    ``ephemeral``: create the semaphore (limit MAX_COUNT) if it does not exist.
    ``request_id`` names this request in later Granted / AcquireFailed effects.
    ``lease_ttl``: the grant lasts this long unless renewed (``None``: the node's
    ``default_lease``).
    ``hold``: which of the session's holds on the semaphore this is (its client
    numbers them; 0 if it keeps one). Asking again for a hold the session has, or
    waits for, restates it: no more tokens than held (or new data) at once with
    the same token, more as an upgrade queued behind the others, which replaces the
    hold with a new token when granted; a queued request is superseded. Holds with
    other numbers are separate owners and queue like other sessions' do.
    ``keep_place``: a queued request of the hold asked again (not only tried) with
    no more tokens than it waits for is restated *in place*: it keeps its place in
    the queue and takes this request's count, data, timeout (counted from now),
    lease TTL and ``request_id`` (the earlier request ends superseded), and is
    granted at once if it is at the head and now fits (YDB's rule). Without it (the
    rule of logs and clients from before it existed), the queued request is
    superseded and this one queues at the back.
    ``task``: the client's number of the task that asks (0: not known), kept on the
    waiter and on the hold it becomes. A request that must wait (``timeout`` not 0)
    and would close a cycle of tasks waiting on each other fails at once with
    DeadlockError (:mod:`tenure._core.deadlocks`); one of task 0 is never checked.
    ``max_hold``: the grant ends this many seconds after it is made, whatever its
    session does (renewals do not extend it; ``None``: the node's ``max_hold``, and
    one asked here may only shorten the node's). An upgrade granted later keeps the
    end of the hold it replaces (it never extends it).
    """

    session_id: int
    name: str
    count: int
    request_id: int
    data: bytes = b""
    timeout: float | None = None
    ephemeral: bool = False
    lease_ttl: float | None = None
    hold: int = 0
    keep_place: bool = False
    task: int = 0
    max_hold: float | None = None


@dataclass(frozen=True, slots=True)
class Release(Command[bool]):
    """Release the session's hold ``hold`` on a semaphore and cancel its queued acquire.

    Replies whether there was anything to release or cancel.
    """

    session_id: int
    name: str
    hold: int = 0


@dataclass(frozen=True, slots=True)
class CancelAcquire(Command[bool]):
    """Withdraw one queued acquire (by request id), leaving any existing hold alone.

    Replies whether that request was still queued.
    """

    session_id: int
    name: str
    request_id: int
    hold: int = 0


@dataclass(frozen=True, slots=True)
class Renew(Command[float]):
    """Extend the grant of hold ``hold`` (it has a lease TTL); replies with the TTL in force."""

    session_id: int
    name: str
    lease_ttl: float | None = None
    hold: int = 0


@dataclass(frozen=True, slots=True)
class UpdateSemaphore(Command[None]):
    """Replace a semaphore's data."""

    session_id: int
    name: str
    data: bytes


@dataclass(frozen=True, slots=True)
class SwapSemaphoreData(Command[bool]):
    """Replace a semaphore's data with ``data`` if it is ``expected`` now (compare and
    swap, in one step); replies whether it did."""

    session_id: int
    name: str
    expected: bytes
    data: bytes


@dataclass(frozen=True, slots=True)
class DeleteSemaphore(Command[None]):
    """Delete a semaphore; PreconditionFailedError if held or awaited, unless ``force``."""

    session_id: int
    name: str
    force: bool = False


@dataclass(frozen=True, slots=True)
class DescribeResult:
    """Reply to DescribeSemaphore: the description and the armed watch, if one was asked for."""

    description: SemaphoreDescription
    watch_id: int | None = None


@dataclass(frozen=True, slots=True)
class DescribeSemaphore(Command[DescribeResult]):
    """Describe a semaphore, optionally arming a watch.

    Without a watch, a missing semaphore raises NotFoundError. With one, it is
    described as missing and the watch fires when it appears. A watch fires once,
    unless ``watch_repeat``: then on every change it watches, until CancelWatch (or
    the end of the session).
    """

    session_id: int
    name: str
    owners: bool = False
    waiters: bool = False
    watch_data: bool = False
    watch_owners: bool = False
    watch_waiters: bool = False
    watch_repeat: bool = False

    @property
    def watches(self) -> bool:
        """Whether this describe arms a watch."""
        return self.watch_data or self.watch_owners or self.watch_waiters
