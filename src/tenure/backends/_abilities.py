"""The backend session's core, and its abilities: what every backend must do, and what it may.

**The core** (:class:`CoreSession`, ten members) is what the client cannot do
without: every recipe that can be written at all is written over it, so a backend
that implements only the core (a third party's, say) locks, counts, elects, joins
groups and watches. The ten, and why each is in:

1. ``session_id`` and 2. ``recovery_window``: what the client shows of the session
   (owners and waiters name sessions by id; ``Session.recovery_window``). Two
   read-only values, kept as two members rather than one record: every backend has
   both at hand, and a record would be one more type to build for nothing.
3. ``acquire`` (a new hold, with its wait, timeout and ephemeral semaphore): the one
   primitive every lock is made of. Whose caller asks (the ``task`` number) is an
   ability (below): a backend that does not look for deadlocks has no use for it.
4. ``restate``: a hold changed in place, keeping its token (a reader's count, a
   member's data). Not buildable over acquire and release: between the two the
   hold would be nobody's, and its token would change.
5. ``release``: the end of one hold.
6. ``deadline_passed``: the session's keep-alive as the client sees it (the
   backend keeps the session alive by itself; the client asks before it acts as a
   holder whether the local deadline passed, so that it never believes in its holds
   longer than the store could keep them). A store that never loses a session
   (a dict in this process) answers False.
7. ``describe_semaphore``: the one read.
8. ``write_semaphore``: every change to a semaphore that is not a hold, as one
   member taking one of four small values (:data:`SemaphoreWrite`: create, update
   the data, compare-and-set the data, delete). Four members before; one now,
   because a backend writes them alike (a row, a key, a command) and a new kind of
   write is a new value, not a new member every backend must grow. The
   compare-and-set is what counters, latches, barriers and rate limiters are built
   over.
9. ``watch_semaphore``: news of one semaphore pushed as it happens (or, on a
   backend without :attr:`~tenure.backends._base.Capability.WATCH`, found by
   reading back: the stream is the same).
10. ``close``: the session's end, every hold released.

What is left out of the core is what the code shows can be done without, or built
over it: an all-or-none set of locks, a lease's own TTL, a session taken back by
another process, the store's clock for rate limiters and claims, a watch of a whole
prefix, the asking task's number for deadlock detection. Each is an **ability**: a
small protocol of its own (one or two members), tied to one
:class:`~tenure.backends._base.Capability` by :data:`ABILITIES`. A backend that
declares the capability implements the protocol, and one that implements the
protocol declares the capability (``tests/backends/test_abilities.py`` checks it
both ways for every built-in backend). The client reaches an ability only through
:func:`ability` and its typed twins here, which refuse a session without it with
UnsupportedError naming the capability; where a feature can be built over the core
instead, the client asks whether the session has the ability (an ``isinstance`` of
its protocol) and otherwise takes the core's path (the rate limiter:
``tenure.client._rates_over_core``), the ability only making it faster or stronger.

:class:`~tenure.backends._base.BackendSession` remains the name of the full set:
the core and every ability, what the built-in backends implement.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from types import MappingProxyType
from typing import Final, Protocol, cast, runtime_checkable

from tenure._core.claims import ClaimRecord
from tenure._core.commands import RateReservation
from tenure._core.values import SemaphoreDescription
from tenure.backends._backend_session import Grant, HeldGrant
from tenure.backends._capability import Capability
from tenure.backends._tickets import SessionTicket
from tenure.backends._watch_streams import PrefixWatchStream, WatchStream
from tenure.backends._writes import CreateWrite, DeleteWrite, SemaphoreWrite, SwapWrite, UpdateWrite
from tenure.errors import UnsupportedError

__all__ = [
    "ABILITIES",
    "ABILITY_MEMBERS",
    "AllOrNone",
    "Claiming",
    "CoreSession",
    "CreateWrite",
    "DeleteWrite",
    "LeaseRenewal",
    "PrefixWatch",
    "RateReservations",
    "SemaphoreWrite",
    "SessionRecovery",
    "SwapWrite",
    "TaskNumbers",
    "UpdateWrite",
    "abilities_of",
    "ability",
    "all_or_none",
    "claims",
    "lease_renewal",
    "prefix_watch",
    "rate_reservations",
    "session_recovery",
    "task_numbers",
]


# -- the core ------------------------------------------------------------------------------


class CoreSession(Protocol):
    """The ten members every backend session has (module docstring: why these ten).

    Each has :class:`~tenure.backends._base.BackendSession`'s meaning, stated there in
    full; :meth:`write_semaphore` is that protocol's four semaphore writes as one.
    """

    @property
    def session_id(self) -> int:
        """The backend's id of this session, as owners and waiters show it."""

    @property
    def recovery_window(self) -> float:
        """The recovery window in force, in seconds (as the backend keeps it)."""

    async def acquire(
        self, name: str, *, count: int, data: bytes, timeout: float | None, ephemeral: bool
    ) -> Grant | None:
        """A new hold of ``count`` tokens of ``name`` (BackendSession.acquire)."""

    async def restate(
        self, name: str, grant: Grant, *, count: int, data: bytes, timeout: float | None
    ) -> Grant | None:
        """Change the hold ``grant`` in place (BackendSession.restate)."""

    def release(self, name: str, grant: Grant) -> Awaitable[bool]:
        """Drop the hold ``grant``; await whether it was there (BackendSession.release)."""

    def deadline_passed(self) -> bool:
        """Give the session up if its local deadline passed; whether it has ended."""

    async def describe_semaphore(
        self, name: str, *, owners: bool, waiters: bool
    ) -> SemaphoreDescription:
        """Describe a semaphore; NotFoundError if missing."""

    async def write_semaphore(self, name: str, write: SemaphoreWrite) -> bool:
        """Apply ``write`` to the semaphore ``name``: whether it did (False only for a
        :class:`SwapWrite` whose data was not its ``expected``); each kind's errors
        are in its docstring."""

    async def watch_semaphore(
        self, name: str, *, data: bool, owners: bool, waiters: bool
    ) -> WatchStream:
        """Arm a watch on one semaphore (BackendSession.watch_semaphore)."""

    async def close(self) -> None:
        """End the session: every hold released, every request withdrawn. Idempotent."""


# -- the abilities -------------------------------------------------------------------------


@runtime_checkable
class AllOrNone(Protocol):
    """:attr:`Capability.ALL_OR_NONE`: several semaphores held all or none, in one step."""

    async def acquire_all(
        self,
        names: Sequence[str],
        *,
        count: int,
        data: bytes,
        timeout: float | None,
        ephemeral: bool,
    ) -> list[Grant] | None:
        """A hold of each of ``names``, all or none (BackendSession.acquire_all)."""


@runtime_checkable
class LeaseRenewal(Protocol):
    """:attr:`Capability.LEASE_TTL`: a hold with a TTL of its own, renewed by its holder."""

    async def renew(self, name: str, grant: Grant) -> float:
        """Extend the hold ``grant``; the TTL now in force."""


@runtime_checkable
class SessionRecovery(Protocol):
    """:attr:`Capability.SESSION_RECOVERY`: a session taken back by a later process."""

    def ticket(self) -> SessionTicket:
        """What a later process needs to take this session back."""

    async def holds(self) -> list[HeldGrant]:
        """The session's holds as the backend keeps them now, in (name, hold) order."""


@runtime_checkable
class RateReservations(Protocol):
    """:attr:`Capability.RATE_RESERVATION`: a rate limiter's units reserved by the store,
    on the store's clock."""

    async def reserve_units(
        self, name: str, count: float, max_wait: float | None
    ) -> RateReservation:
        """Reserve ``count`` units of the rate limiter ``name`` (BackendSession.reserve_units)."""


@runtime_checkable
class Claiming(Protocol):
    """:attr:`Capability.CLAIMS`: a name claimed for a slot of the store's clock."""

    async def claim(
        self, name: str, claim_id: str, at_least: float, at_most: float, data: bytes
    ) -> ClaimRecord:
        """Claim ``name``; the claim that holds it now (BackendSession.claim)."""


@runtime_checkable
class PrefixWatch(Protocol):
    """:attr:`Capability.PREFIX_WATCH`: every semaphore under a prefix watched at once."""

    async def watch_prefix(
        self, prefix: str, *, data: bool, owners: bool, waiters: bool
    ) -> PrefixWatchStream:
        """Arm a watch of every semaphore whose name starts with ``prefix``."""


@runtime_checkable
class TaskNumbers(Protocol):
    """:attr:`Capability.DEADLOCK_DETECTION`: requests carry the asking task's number.

    The store keeps it with each request and the hold it becomes, and refuses a
    request that must wait and would close a deadlock (DeadlockError). A session with
    this ability takes ``task`` in :meth:`acquire` and :meth:`restate`, and in
    ``acquire_all`` too if it has :class:`AllOrNone`.
    """

    @property
    def task_numbers(self) -> bool:
        """True: the marker of the ability (the client passes ``task=`` because of it)."""

    async def acquire(
        self,
        name: str,
        *,
        count: int,
        data: bytes,
        timeout: float | None,
        ephemeral: bool,
        task: int = 0,
    ) -> Grant | None:
        """:meth:`CoreSession.acquire`, asked by the task numbered ``task``."""

    async def restate(
        self,
        name: str,
        grant: Grant,
        *,
        count: int,
        data: bytes,
        timeout: float | None,
        task: int = 0,
    ) -> Grant | None:
        """:meth:`CoreSession.restate`, asked by the task numbered ``task``."""


#: Each capability that is an ability, and the protocol a session implements for it.
#: The others (fencing tokens, FIFO, watch, durable, replicated, lock-delay) are
#: promises about the core's members, with nothing more to implement.
ABILITIES: Final[Mapping[Capability, type]] = MappingProxyType(
    {
        Capability.ALL_OR_NONE: AllOrNone,
        Capability.LEASE_TTL: LeaseRenewal,
        Capability.SESSION_RECOVERY: SessionRecovery,
        Capability.RATE_RESERVATION: RateReservations,
        Capability.CLAIMS: Claiming,
        Capability.PREFIX_WATCH: PrefixWatch,
        Capability.DEADLOCK_DETECTION: TaskNumbers,
    }
)


#: The members each ability adds to the core (TaskNumbers' ``acquire`` and ``restate``
#: are the core's, taking one more argument: its marker is ``task_numbers``). A session
#: that has none of an ability's members does not implement it.
ABILITY_MEMBERS: Final[Mapping[Capability, tuple[str, ...]]] = MappingProxyType(
    {
        Capability.ALL_OR_NONE: ("acquire_all",),
        Capability.LEASE_TTL: ("renew",),
        Capability.SESSION_RECOVERY: ("ticket", "holds"),
        Capability.RATE_RESERVATION: ("reserve_units",),
        Capability.CLAIMS: ("claim",),
        Capability.PREFIX_WATCH: ("watch_prefix",),
        Capability.DEADLOCK_DETECTION: ("task_numbers",),
    }
)


def _has(session: object, capability: Capability) -> bool:
    # The protocol's members, and its own ones set: a class that sets them to None
    # (the built-in sessions of a backend that lacks the capability) or a marker to
    # False does not implement it (isinstance alone trusts a non-method member's name).
    return isinstance(session, ABILITIES[capability]) and all(
        getattr(session, member, None) not in (None, False)
        for member in ABILITY_MEMBERS[capability]
    )


def abilities_of(session: object) -> frozenset[Capability]:
    """The capabilities whose ability protocol ``session`` implements."""
    return frozenset(capability for capability in ABILITIES if _has(session, capability))


def ability(session: object, capability: Capability) -> object:
    """``session`` as its ability of ``capability``; UnsupportedError naming the
    capability if it has none (the typed functions below are this, typed)."""
    if _has(session, capability):
        return session
    raise UnsupportedError(
        f"this backend does not provide the capability {capability.value} "
        f"(Capability.{capability.name}: its sessions implement no "
        f"{ABILITIES[capability].__name__})"
    )


def all_or_none(session: object) -> AllOrNone:
    """``session``'s :class:`AllOrNone`, or UnsupportedError naming all_or_none."""
    return cast(AllOrNone, ability(session, Capability.ALL_OR_NONE))


def lease_renewal(session: object) -> LeaseRenewal:
    """``session``'s :class:`LeaseRenewal`, or UnsupportedError naming lease_ttl."""
    return cast(LeaseRenewal, ability(session, Capability.LEASE_TTL))


def session_recovery(session: object) -> SessionRecovery:
    """``session``'s :class:`SessionRecovery`, or UnsupportedError naming session_recovery."""
    return cast(SessionRecovery, ability(session, Capability.SESSION_RECOVERY))


def rate_reservations(session: object) -> RateReservations:
    """``session``'s :class:`RateReservations`, or UnsupportedError naming rate_reservation."""
    return cast(RateReservations, ability(session, Capability.RATE_RESERVATION))


def claims(session: object) -> Claiming:
    """``session``'s :class:`Claiming`, or UnsupportedError naming claims."""
    return cast(Claiming, ability(session, Capability.CLAIMS))


def prefix_watch(session: object) -> PrefixWatch:
    """``session``'s :class:`PrefixWatch`, or UnsupportedError naming prefix_watch."""
    return cast(PrefixWatch, ability(session, Capability.PREFIX_WATCH))


def task_numbers(session: object) -> TaskNumbers | None:
    """``session``'s :class:`TaskNumbers`, or None: a session without it is sent no
    task (its acquires wait as they always did; nothing is refused)."""
    return cast(TaskNumbers, session) if _has(session, Capability.DEADLOCK_DETECTION) else None
