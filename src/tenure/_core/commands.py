"""Commands the engine accepts, and the replies it gives them.

A command is a frozen value; ``Engine.apply(command, now)`` returns its reply (the
type parameter of the command) or raises a :mod:`tenure.errors` exception. Being
plain values, commands can be logged and replayed: the same commands at the same
times always produce the same state.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Generic, TypeVar

from tenure._core.claims import ClaimRecord
from tenure._core.effects import AcquireFailed, LeaseLost
from tenure._core.values import (
    NO_IDENTITY,
    ClientIdentity,
    NodeConfig,
    NodeDescription,
    SemaphoreDescription,
    SemaphoreSummary,
    SessionSummary,
)

R = TypeVar("R", covariant=True)


class Command(Generic[R]):
    """Base of all commands; ``R`` is the reply type."""

    __slots__ = ()


# -- nodes ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CreateNode(Command[None]):
    """Create a node; AlreadyExistsError if it exists."""

    name: str
    config: NodeConfig = field(default_factory=NodeConfig)


@dataclass(frozen=True, slots=True)
class DescribeNode(Command[NodeDescription]):
    """Describe a node; NotFoundError if missing."""

    name: str


@dataclass(frozen=True, slots=True)
class AlterNode(Command[NodeDescription]):
    """Change some settings of a node; returns the new description."""

    name: str
    changes: Mapping[str, object]


@dataclass(frozen=True, slots=True)
class DropNode(Command[None]):
    """Drop a node; PreconditionFailedError if it has sessions, unless ``force``."""

    name: str
    force: bool = False


@dataclass(frozen=True, slots=True)
class SetNodeAnnex(Command[None]):
    """Keep ``value`` with node ``name`` under ``key``; ``value == b""`` removes the key.

    The annex is opaque to the engine: bytes a face (or any native client)
    stores with a node and reads back, kept in snapshots and the journal and
    dropped with the node. Limits: MAX_ANNEX_KEY_BYTES per key, MAX_ANNEX_BYTES per
    value, MAX_ANNEX_KEYS per node (tenure._core.values). NotFoundError if the node
    is missing.
    """

    name: str
    key: str
    value: bytes


@dataclass(frozen=True, slots=True)
class GetNodeAnnex(Command[bytes]):
    """The bytes node ``name`` keeps under ``key`` (``b""``: unset); NotFoundError if missing."""

    name: str
    key: str


# -- sessions -------------------------------------------------------------------------


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


# -- listing (read-only; paged: sorted, ``after`` exclusive, ``limit`` in [1, MAX_PAGE]) --


@dataclass(frozen=True, slots=True)
class NodePage:
    """Reply to ListNodes: node names, sorted."""

    names: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SemaphorePage:
    """Reply to ListSemaphores: summaries, by name."""

    semaphores: tuple[SemaphoreSummary, ...] = ()


@dataclass(frozen=True, slots=True)
class SessionPage:
    """Reply to ListSessions: summaries, by session id."""

    sessions: tuple[SessionSummary, ...] = ()


@dataclass(frozen=True, slots=True)
class ListNodes(Command[NodePage]):
    """Up to ``limit`` node names greater than ``after``, sorted."""

    after: str = ""
    limit: int = 1000


@dataclass(frozen=True, slots=True)
class ListSemaphores(Command[SemaphorePage]):
    """Up to ``limit`` semaphores of ``node`` named with ``prefix`` and after ``after``, sorted."""

    node: str
    prefix: str = ""
    after: str = ""
    limit: int = 1000


@dataclass(frozen=True, slots=True)
class ListSessions(Command[SessionPage]):
    """Up to ``limit`` live sessions of ``node`` with ids above ``after``, by id.

    ``created_at`` in the reply is engine time; the host shows it in UNIX seconds.
    """

    node: str
    after: int = 0
    limit: int = 1000


# -- semaphores -----------------------------------------------------------------------


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


@dataclass(frozen=True, slots=True)
class AcquireAllResult:
    """Reply to AcquireAll: GRANTED with a token per name (in the command's order),
    QUEUED (a Granted effect per name follows, all in one step, or an AcquireFailed
    per name), or BUSY."""

    status: AcquireStatus
    tokens: tuple[int, ...] = ()
    lease_ttl: float | None = None


@dataclass(frozen=True, slots=True)
class AcquireAll(Command[AcquireAllResult]):
    """Ask for ``count`` tokens of each semaphore of ``names``, all or none, in one step.

    The request is granted only when it can have every one at once, and is queued
    in every queue at once (one arrival across names: queues then agree on the
    order of requests, so requests for overlapping names in any order never
    deadlock; :meth:`tenure._core.state.EngineState.settle`). Each name is a hold of
    its own: ``holds[i]`` and ``request_ids[i]`` are the hold and the request id of
    ``names[i]`` (Granted and AcquireFailed effects name them, one per name), none
    of which the session may hold or wait for already. A member that leaves its
    queue (cancelled, timed out, released, its semaphore deleted) takes the others
    with it. ``timeout``, ``ephemeral``, ``data``, ``lease_ttl`` and ``task`` are
    Acquire's, for every name (a request that must wait is checked for deadlocks
    as one request waiting in every queue).
    """

    session_id: int
    names: tuple[str, ...]
    holds: tuple[int, ...]
    request_ids: tuple[int, ...]
    count: int
    data: bytes = b""
    timeout: float | None = None
    ephemeral: bool = True
    lease_ttl: float | None = None
    task: int = 0


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
class RateReservation:
    """Reply to ReserveUnits: whether the units were reserved, and when they may go.

    ``at`` is when they may go (UNIX seconds of the store's clock, never before the
    time the reservation was made) and ``wait`` how long that is from then; both
    are set whether or not it was ``granted`` (a refused one says how long it would
    have had to wait).
    """

    granted: bool
    wait: float
    at: float


@dataclass(frozen=True, slots=True)
class ReserveUnits(Command[RateReservation]):
    """Reserve ``count`` units of the rate limiter ``name`` (a persistent semaphore whose
    data is a bucket: :mod:`tenure._core.rates`), unless they would have to wait more
    than ``max_wait`` seconds (None: no limit).

    ``at`` is the store's clock, UNIX seconds: the host that applies the command sets
    it (whatever a client sent), so that a replay of the journal decides the same.
    """

    session_id: int
    name: str
    count: float
    max_wait: float | None
    at: float = 0.0


@dataclass(frozen=True, slots=True)
class ClaimName(Command[ClaimRecord]):
    """Claim ``name`` for at least ``at_least`` and at most ``at_most`` seconds
    (:mod:`tenure._core.claims`); replies with the claim that holds the name now:
    the new one (its id is ``claim_id``), the live one of that id (a retry), or
    another's (refused: the name is claimed).

    ``at`` is the store's wall clock, UNIX seconds: the host that applies the command
    sets it (whatever a client sent), so that a replay of the journal records the
    same grant time. The claim's end is timed on the engine's clock.
    """

    session_id: int
    name: str
    claim_id: str
    at_least: float
    at_most: float
    data: bytes = b""
    at: float = 0.0


@dataclass(frozen=True, slots=True)
class ReleaseClaim(Command[bool]):
    """Release the claim ``claim_id`` of ``name`` in ``node``, by anyone (no session):
    it ends at the later of now and ``at_least`` after its grant. Replies whether it
    shortened a live claim of that id (False: none, ended, another's, released).

    ``at`` is set by the host, as ClaimName's (the record's release time).
    """

    node: str
    name: str
    claim_id: str
    at: float = 0.0


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


@dataclass(frozen=True, slots=True)
class WatchArmed:
    """Reply to WatchPrefix: the id of the watch it armed (for CancelWatch)."""

    watch_id: int


@dataclass(frozen=True, slots=True)
class WatchPrefix(Command[WatchArmed]):
    """Arm a repeating watch of every semaphore of the session's node whose name starts
    with ``prefix`` (``""``: every one), those made later included.

    It fires a WatchFired (with the name and the state the change left) on every
    change of a watched aspect (``watch_data``, ``watch_owners``, ``watch_waiters``;
    a semaphore's appearing or vanishing always) of any such semaphore, until
    CancelWatch or the end of the session. The state lists owners if they are
    watched and waiters if they are. Counts against the node's
    ``max_watches_per_session``.
    """

    session_id: int
    prefix: str
    watch_data: bool = False
    watch_owners: bool = False
    watch_waiters: bool = False


@dataclass(frozen=True, slots=True)
class CancelWatch(Command[bool]):
    """Disarm a watch (one-shot: that has not fired yet); replies whether it was armed."""

    session_id: int
    watch_id: int
