"""Public value types of the engine, and the validation of user input.

These frozen dataclasses cross every boundary unchanged: the engine returns them,
the wire carries them, and the client hands them to users.
"""

from __future__ import annotations

import dataclasses
import math
import unicodedata
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from tenure.errors import InvalidArgumentError, LimitExceededError

#: The largest token count. An ephemeral semaphore has this limit, and a mutex
#: acquires this many tokens, so "exclusive" needs no special case anywhere.
MAX_COUNT: Final = 2**64 - 1

#: The largest hold number a session may give one of its holds on a semaphore.
MAX_HOLD: Final = 2**32 - 1

#: The largest task number a client may give the task that asks (a uint on the wire).
MAX_TASK: Final = 2**64 - 1

#: The most semaphores one all-or-none acquire (AcquireAll, ``session.lock_all``) may
#: ask for: each is a waiter in its own queue, and every change to any of them looks
#: at all of them.
MAX_SET_NAMES: Final = 64

#: How many holds, queued requests and set members one deadlock check may look at, by
#: default (``EngineState.deadlock_search_limit``, :mod:`tenure._core.deadlocks`;
#: ``tenure serve --deadlock-search-limit``). Past it the request waits: no deadlock
#: is reported.
DEADLOCK_SEARCH_LIMIT: Final = 1_000

#: The most broken deadlocks a node's description shows (the latest; the engine keeps
#: no more of them).
MAX_DEADLOCKS_SHOWN: Final = 8

#: Longest node or semaphore name, in UTF-8 bytes.
MAX_NAME_BYTES: Final = 1024

#: Longest key of a node's annex, in UTF-8 bytes (checked like a name otherwise).
MAX_ANNEX_KEY_BYTES: Final = 64

#: Largest value one key of a node's annex holds, in bytes.
MAX_ANNEX_BYTES: Final = 4096

#: Most keys one node's annex holds. With the two limits above, a node's annex is at
#: most about 65 KiB: small enough for any snapshot, journal record and reply frame.
MAX_ANNEX_KEYS: Final = 16

#: Longest session description, in UTF-8 bytes.
MAX_DESCRIPTION_BYTES: Final = 1024

#: Largest process id a client identity carries (fits the wire's 32-bit field).
MAX_PID: Final = 2**32 - 1

#: Most entries one page of a listing (list_nodes, list_semaphores, list_sessions)
#: returns, so that no reply outgrows a frame.
MAX_PAGE: Final = 10_000

#: Longest recovery window a node or a session accepts, in seconds.
MAX_RECOVERY_WINDOW: Final = 24 * 3600.0

#: Settings of NodeConfig that were renamed: the old name -> today's. The old name
#: still works where users type it (NodeConfig.replace, create_node, alter_node, the
#: CLI's --set), with a DeprecationWarning; stored data and the wire keep it (see
#: tenure._core.stored_config).
RENAMED_SETTINGS: Final = {"session_timeout": "recovery_window"}


@dataclass(frozen=True, slots=True)
class NodeConfig:
    """Settings of a coordination node; every limit is named here and enforced by the engine.

    Attributes:
        recovery_window: seconds a session whose client went silent is kept before it
            expires (its holds released), for sessions that do not choose their own.
            Named ``session_timeout`` before (that name still works in ``replace``,
            with a DeprecationWarning).
        lock_delay: after a holder *failed* (its session or lease expired), no grant
            on that semaphore happens for this many seconds (Chubby's lock-delay).
        default_lease: if set, every grant on this node lasts this many seconds
            unless renewed; ``None`` means a grant lasts as long as its session.
        max_sessions: live sessions attached to the node.
        max_semaphores: semaphores in the node (persistent and ephemeral).
        max_waiters: queued acquires per semaphore.
        max_data_size: bytes of semaphore data and of each owner's data.
        max_watches_per_session: armed watches one session may hold.
        max_missed_per_session: endings of acquires and grants a session did not
            cause (timeouts, deletions, lease expiries) that the node keeps for its
            client to read back after a re-attach, one per semaphore, the oldest
            dropped first (see DescribeSession).
        max_claims: live claims (``session.claim``) in the node, released ones
            included until they end (:mod:`tenure._core.claims`).
    """

    recovery_window: float = 30.0
    lock_delay: float = 0.0
    default_lease: float | None = None
    max_sessions: int = 10_000
    max_semaphores: int = 100_000
    max_waiters: int = 10_000
    max_data_size: int = 65_536
    max_watches_per_session: int = 1_000
    max_missed_per_session: int = 256
    max_claims: int = 10_000

    def validated(self) -> NodeConfig:
        """Return ``self`` if every field is in range, else raise InvalidArgumentError."""
        check_duration("recovery_window", self.recovery_window, maximum=MAX_RECOVERY_WINDOW)
        check_duration("lock_delay", self.lock_delay, allow_zero=True)
        if self.default_lease is not None:
            check_duration("default_lease", self.default_lease)
        for name in (
            "max_sessions",
            "max_semaphores",
            "max_waiters",
            "max_data_size",
            "max_watches_per_session",
            "max_missed_per_session",
            "max_claims",
        ):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise InvalidArgumentError(f"{name} must be a positive integer, got {value!r}")
        return self

    def replace(self, **changes: object) -> NodeConfig:
        """A copy with ``changes`` applied and validated; unknown names are rejected.

        A renamed setting's old name (``session_timeout``) is still taken, with a
        DeprecationWarning naming the new one.
        """
        changes = renamed_settings(changes, stacklevel=2)
        known = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(changes) - known)
        if unknown:
            raise InvalidArgumentError(f"unknown node setting(s): {', '.join(unknown)}")
        return dataclasses.replace(self, **changes).validated()  # type: ignore[arg-type]


#: The most each node limit may be on a server that does not set its own ceilings
#: (``tenure serve --max-node-*``): high enough for every use, low enough that no
#: limit is one in name only (a limit of 2**63 never stops anything).
DEFAULT_NODE_CEILINGS: Final[Mapping[str, int]] = {
    "max_sessions": 1_000_000,
    "max_semaphores": 1_000_000,
    "max_waiters": 1_000_000,
    "max_data_size": 16 * 1024 * 1024,
    "max_watches_per_session": 100_000,
    "max_missed_per_session": 100_000,
    "max_claims": 1_000_000,
}


def check_ceilings(
    config: NodeConfig, ceilings: Mapping[str, int], *, only: Mapping[str, object] | None = None
) -> None:
    """Raise LimitExceededError if a limit of ``config`` (of those named in ``only``,
    if given) is above its ceiling.

    ``ceilings`` maps a NodeConfig field to the most it may be (a server's
    ``--max-node-*`` setting: ``max_semaphores`` is ``--max-node-semaphores``).
    """
    for name, ceiling in ceilings.items():
        if only is not None and name not in only:
            continue
        value = getattr(config, name)
        if value > ceiling:
            flag = "--max-node-" + name.removeprefix("max_").replace("_", "-")
            raise LimitExceededError(
                f"{name} ({value}) is above this server's ceiling of {ceiling} ({flag})"
            )


def renamed_settings(changes: Mapping[str, object], *, stacklevel: int = 2) -> dict[str, object]:
    """``changes`` with each old setting name (RENAMED_SETTINGS) under today's name.

    Each old name warns (DeprecationWarning, ``stacklevel`` as :func:`warnings.warn`'s,
    counted from the caller of this function); both names of one setting at once is
    InvalidArgumentError, since which one was meant cannot be known.
    """
    out = dict(changes)
    for old, new in RENAMED_SETTINGS.items():
        if old not in out:
            continue
        if new in out:
            raise InvalidArgumentError(f"{old} and {new} name the same setting: give {new} only")
        warnings.warn(
            f"the node setting {old} is now called {new}; {old} will be removed",
            DeprecationWarning,
            stacklevel=stacklevel + 1,
        )
        out[new] = out.pop(old)
    return out


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


# -- validation -----------------------------------------------------------------------


def check_name(kind: str, name: object) -> str:
    """A node or semaphore name: a non-empty str, no control characters, bounded length."""
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError(f"{kind} name must be a non-empty string, got {name!r}")
    if name.isascii() and name.isprintable() and len(name) <= MAX_NAME_BYTES:
        return name  # the common case, checked in C: printable ASCII has no Cc and no Cs
    if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        raise InvalidArgumentError(f"{kind} name is longer than {MAX_NAME_BYTES} bytes")
    # Control characters (Cc) confuse logs and terminals; lone surrogates (Cs) are
    # not text. Every other character, non-ASCII spaces included, is allowed.
    if any(unicodedata.category(ch) in ("Cc", "Cs") for ch in name):
        raise InvalidArgumentError(
            f"{kind} name must not contain control characters or surrogates: {name!r}"
        )
    return name


def check_prefix(prefix: object, what: str = "prefix") -> str:
    """A prefix of semaphore names: ``""`` (every name), or what :func:`check_name`
    takes (a prefix that no name could start with is refused, not watched in vain)."""
    if prefix == "" and isinstance(prefix, str):
        return prefix
    if not isinstance(prefix, str):
        raise InvalidArgumentError(f"{what} must be a string, got {type(prefix).__name__}")
    return check_name(what, prefix)


def check_annex_key(key: object) -> str:
    """A key of a node's annex: a name (see :func:`check_name`) of at most MAX_ANNEX_KEY_BYTES."""
    key = check_name("annex key", key)  # no surrogates after this: it encodes
    # (Bytes, not characters: a key of 64 characters may be up to 256 bytes.)
    if len(key.encode("utf-8")) > MAX_ANNEX_KEY_BYTES:
        raise InvalidArgumentError(f"annex key is longer than {MAX_ANNEX_KEY_BYTES} bytes")
    return key


def check_data(what: str, data: object, limit: int, limit_name: str = "max_data_size") -> bytes:
    """Opaque user data: bytes of at most ``limit`` bytes (``limit_name`` names the limit)."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise InvalidArgumentError(f"{what} must be bytes, got {type(data).__name__}")
    data = bytes(data)
    if len(data) > limit:
        raise LimitExceededError(f"{what} is {len(data)} bytes; {limit_name} is {limit}")
    return data


def check_count(count: object, *, allow_zero: bool = False, what: str = "count") -> int:
    """A token count: an int in [1, MAX_COUNT] (or 0 when allowed); ``what`` names it."""
    low = 0 if allow_zero else 1
    if type(count) is not int or not low <= count <= MAX_COUNT:
        raise InvalidArgumentError(f"{what} must be an integer in [{low}, 2**64-1], got {count!r}")
    # Every mutex holds MAX_COUNT: one shared int object instead of one per hold.
    return MAX_COUNT if count == MAX_COUNT else count


def check_hold(hold: object) -> int:
    """A hold number: an int in [0, MAX_HOLD]."""
    if type(hold) is not int or not 0 <= hold <= MAX_HOLD:
        raise InvalidArgumentError(f"hold must be an integer in [0, 2**32-1], got {hold!r}")
    return hold


def check_task(task: object) -> int:
    """A client's task number: an int in [0, MAX_TASK] (0: not known)."""
    if type(task) is not int or not 0 <= task <= MAX_TASK:
        raise InvalidArgumentError(f"task must be an integer in [0, 2**64-1], got {task!r}")
    return task


def check_description(description: object, what: str = "description") -> str:
    """A session description: a str of at most MAX_DESCRIPTION_BYTES UTF-8 bytes."""
    if not isinstance(description, str):
        raise InvalidArgumentError(f"{what} must be a string, got {type(description).__name__}")
    try:
        size = len(description.encode("utf-8"))
    except UnicodeEncodeError:  # a lone surrogate: not text, and no wire can carry it
        raise InvalidArgumentError(f"{what} must not contain surrogates: {description!r}") from None
    if size > MAX_DESCRIPTION_BYTES:
        raise InvalidArgumentError(f"{what} is longer than {MAX_DESCRIPTION_BYTES} bytes")
    return description


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


def check_page_limit(limit: object) -> int:
    """A listing page's size: an int in [1, MAX_PAGE]."""
    if type(limit) is not int or not 1 <= limit <= MAX_PAGE:
        raise InvalidArgumentError(f"limit must be an integer in [1, {MAX_PAGE}], got {limit!r}")
    return limit


def check_duration(
    what: str, value: object, *, allow_zero: bool = False, maximum: float = math.inf
) -> float:
    """A finite, positive (or zero when allowed) number of seconds, at most ``maximum``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgumentError(f"{what} must be a number of seconds, got {value!r}")
    value = float(value)
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise InvalidArgumentError(f"{what} must be a finite positive number, got {value!r}")
    if value > maximum:
        raise InvalidArgumentError(f"{what} must be at most {maximum} seconds, got {value!r}")
    return value


def check_timeout(timeout: object) -> float | None:
    """An acquire timeout: ``None`` waits forever, ``0`` only tries, else seconds."""
    if timeout is None:
        return None
    return check_duration("timeout", timeout, allow_zero=True)
