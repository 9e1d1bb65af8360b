"""Public value types of the engine: node settings, descriptions, a client's identity.

These frozen dataclasses cross every boundary unchanged: the engine returns them,
the wire carries them, and the client hands them to users. A node's settings
(:mod:`tenure._core.node_settings`: ``NodeConfig``, its renamed settings, a
server's ceilings), the fixed limits (:mod:`tenure._core.limits`) and the checks of
user input (:mod:`tenure._core.checks`) have modules of their own; this one
re-exports them, where their users import them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from tenure._core.checks import (
    check_annex_key,
    check_count,
    check_data,
    check_description,
    check_duration,
    check_hold,
    check_long_hold,
    check_max_hold,
    check_name,
    check_page_limit,
    check_prefix,
    check_task,
    check_timeout,
)
from tenure._core.limits import (
    DEADLOCK_SEARCH_LIMIT,
    MAX_ANNEX_BYTES,
    MAX_ANNEX_KEY_BYTES,
    MAX_ANNEX_KEYS,
    MAX_COUNT,
    MAX_DEADLOCKS_SHOWN,
    MAX_DESCRIPTION_BYTES,
    MAX_HOLD,
    MAX_HOLD_SECONDS,
    MAX_LISTED_PER_FIRING,
    MAX_NAME_BYTES,
    MAX_PAGE,
    MAX_PID,
    MAX_PREFIX_WATCHES_PER_NODE,
    MAX_RECOVERY_WINDOW,
    MAX_SET_NAMES,
    MAX_TASK,
    MAX_WATCHES_PER_SEMAPHORE,
    WHY_LOOK_LIMIT,
    WHY_PAGE,
)
from tenure._core.node_settings import (
    DEFAULT_NODE_CEILINGS,
    RENAMED_SETTINGS,
    NodeConfig,
    check_ceilings,
    renamed_settings,
)
from tenure.errors import InvalidArgumentError


@dataclass(frozen=True, slots=True)
class BrokenDeadlock:
    """A deadlock the store broke: an acquire it refused with DeadlockError.

    Attributes:
        at: when, in UNIX seconds by the store's clock (None where it cannot know).
        session_id: the session whose acquire was refused.
        task: the client's number of the task that asked (0: not known).
        cycle: the cycle it would have closed, as DeadlockError's message names it.
    """

    at: float | None
    session_id: int
    task: int
    cycle: str


@dataclass(frozen=True, slots=True)
class NodeDescription:
    """A node's configuration and how much it holds right now.

    ``deadlocks`` are the latest deadlocks the store broke on this node, oldest first
    (at most MAX_DEADLOCKS_SHOWN; a store without DEADLOCK_DETECTION has none; a
    server forgets them when it restarts or its cluster fails over).
    """

    name: str
    config: NodeConfig
    sessions: int
    semaphores: int
    deadlocks: tuple[BrokenDeadlock, ...] = ()


@dataclass(frozen=True, slots=True)
class ClientIdentity:
    """Who runs a session's client: host name, process id, and a name given to connect().

    Attributes:
        host: the client's ``socket.gethostname()``, at most MAX_NAME_BYTES UTF-8 bytes.
        pid: the client's ``os.getpid()`` (0: not known).
        name: what ``tenure.connect(url, client_name=...)`` was given, at most
            MAX_DESCRIPTION_BYTES UTF-8 bytes.
    """

    host: str = ""
    pid: int = 0
    name: str = ""


#: The identity of a client that gave none (an old client, a store that keeps none).
NO_IDENTITY: Final = ClientIdentity()


@dataclass(frozen=True, slots=True)
class OwnerInfo:
    """One holder of a semaphore: which session, how many tokens, its data and fencing token.

    ``description`` and ``identity`` are the holding session's; ``since`` is when the
    grant was made, in UNIX seconds by the store's clock (None where the store cannot
    know).
    """

    session_id: int
    count: int
    data: bytes
    token: int
    description: str = ""
    identity: ClientIdentity = NO_IDENTITY
    since: float | None = None


@dataclass(frozen=True, slots=True)
class WaiterInfo:
    """One queued acquire, in the order it will be served.

    ``description`` and ``identity`` are the waiting session's; ``since`` is when the
    request was queued, in UNIX seconds by the store's clock (None where the store
    cannot know).
    """

    session_id: int
    count: int
    data: bytes
    description: str = ""
    identity: ClientIdentity = NO_IDENTITY
    since: float | None = None


@dataclass(frozen=True, slots=True)
class SemaphoreSummary:
    """One line of a listing: a semaphore's limit, tokens held, owners and waiters."""

    name: str
    limit: int
    count: int
    owners: int
    waiters: int
    ephemeral: bool


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """One live session of a node.

    Attributes:
        session_id: the store's id of the session.
        description: what the session was opened with.
        identity: its client's identity.
        timeout: its recovery window, seconds.
        created_at: when it was opened, UNIX seconds by the store's clock (None where
            the store cannot know).
        expires_in: seconds until the store ends it if its client stays silent; None
            while a connection keeps it (``tenure://``, attached ``memory://`` sessions).
        holds: grants it holds.
        waits: requests it has queued.
    """

    session_id: int
    description: str
    identity: ClientIdentity
    timeout: float
    created_at: float | None
    expires_in: float | None
    holds: int
    waits: int


@dataclass(frozen=True, slots=True)
class SemaphoreDescription:
    """A snapshot of a semaphore.

    ``owners`` are in grant order and ``waiters`` in service (FIFO) order; each is
    empty unless asked for. A watch on a semaphore that does not exist (yet, or any
    more) sees ``exists=False`` with zero limit, no data and no owners.
    """

    name: str
    limit: int
    count: int
    data: bytes
    ephemeral: bool
    owners: tuple[OwnerInfo, ...] = ()
    waiters: tuple[WaiterInfo, ...] = ()
    exists: bool = True

    @classmethod
    def missing(cls, name: str) -> SemaphoreDescription:
        """The description of a semaphore that does not exist."""
        return cls(name=name, limit=0, count=0, data=b"", ephemeral=False, exists=False)


@dataclass(frozen=True, slots=True)
class MutexDescription:
    """A mutex as ``session.mutex(name).describe()`` reads it.

    A free mutex is ``held=False`` with no owner (never NotFoundError); ``waiters``
    are in service order.
    """

    name: str
    held: bool
    owner: OwnerInfo | None
    waiters: tuple[WaiterInfo, ...] = ()

    @property
    def limit(self) -> int:
        """A mutex admits one holder at a time."""
        return 1


@dataclass(frozen=True, slots=True)
class RWLockDescription:
    """A readers-writer lock as ``session.rwlock(name).describe()`` reads it.

    A free lock has no readers and no writer (never NotFoundError); ``waiters`` are
    in service order, a writer's ``count`` being ``MAX_COUNT`` and a reader's 1.
    """

    name: str
    readers: tuple[OwnerInfo, ...]
    writer: OwnerInfo | None
    waiters: tuple[WaiterInfo, ...] = ()

    @property
    def held(self) -> bool:
        """Whether anyone holds the lock, reading or writing."""
        return self.writer is not None or bool(self.readers)


def check_identity(identity: object) -> ClientIdentity:
    """A client identity: host and name bounded like names and descriptions, pid >= 0."""
    if not isinstance(identity, ClientIdentity):
        raise InvalidArgumentError(
            f"identity must be a ClientIdentity, got {type(identity).__name__}"
        )
    host = check_description(identity.host, "identity host")
    if len(host.encode("utf-8")) > MAX_NAME_BYTES:
        raise InvalidArgumentError(f"identity host is longer than {MAX_NAME_BYTES} bytes")
    check_description(identity.name, "client name")
    if type(identity.pid) is not int or not 0 <= identity.pid <= MAX_PID:
        raise InvalidArgumentError(
            f"identity pid must be an integer in [0, {MAX_PID}], got {identity.pid!r}"
        )
    return identity


#: The node's settings, the limits and the checks live in modules of their own;
#: importers find them here too.
__all__ = [
    "BrokenDeadlock",
    "ClientIdentity",
    "DEADLOCK_SEARCH_LIMIT",
    "DEFAULT_NODE_CEILINGS",
    "MAX_ANNEX_BYTES",
    "MAX_ANNEX_KEYS",
    "MAX_ANNEX_KEY_BYTES",
    "MAX_COUNT",
    "MAX_DEADLOCKS_SHOWN",
    "MAX_DESCRIPTION_BYTES",
    "MAX_HOLD",
    "MAX_HOLD_SECONDS",
    "MAX_LISTED_PER_FIRING",
    "MAX_NAME_BYTES",
    "MAX_PAGE",
    "MAX_PID",
    "MAX_PREFIX_WATCHES_PER_NODE",
    "MAX_RECOVERY_WINDOW",
    "MAX_SET_NAMES",
    "MAX_TASK",
    "MAX_WATCHES_PER_SEMAPHORE",
    "MutexDescription",
    "NO_IDENTITY",
    "NodeConfig",
    "NodeDescription",
    "OwnerInfo",
    "RENAMED_SETTINGS",
    "RWLockDescription",
    "SemaphoreDescription",
    "SemaphoreSummary",
    "SessionSummary",
    "WHY_LOOK_LIMIT",
    "WHY_PAGE",
    "WaiterInfo",
    "check_annex_key",
    "check_ceilings",
    "check_count",
    "check_data",
    "check_description",
    "check_duration",
    "check_hold",
    "check_identity",
    "check_long_hold",
    "check_max_hold",
    "check_name",
    "check_page_limit",
    "check_prefix",
    "check_task",
    "check_timeout",
    "renamed_settings",
]
