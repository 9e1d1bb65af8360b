"""The backend session's abilities: what a backend may do beyond its core.

The core (:class:`~tenure.backends._core_session.CoreSession`, ten members, each and
why in :mod:`tenure.backends._core_session`; re-exported here) is what every backend
must do. What is left out of it is what the code shows can be done without, or built
over it: an all-or-none set of locks, a lease's own TTL, a session taken back by
another process, a hold handed to another session, the store's clock for rate
limiters and claims, a watch of a whole prefix, the asking task's number for
deadlock detection, a grant bounded in time on the store's clock. Each is an
**ability**: a
small protocol of its own (one or two members, each member's meaning stated there),
tied to one :class:`~tenure.backends._base.Capability` by :data:`ABILITIES`. A
backend that declares the capability implements the protocol, and one that
implements the protocol declares the capability (``tests/backends/test_abilities.py``
checks it both ways for every built-in backend). The client reaches an ability only
through :func:`ability` and its typed twins here, which refuse a session without it
with UnsupportedError naming the capability; where a feature can be built over the
core instead, the client asks whether the session has the ability (an ``isinstance``
of its protocol) and otherwise takes the core's path (the rate limiter:
``tenure.client._rates_over_core``), the ability only making it faster or stronger.

:class:`~tenure.backends._base.BackendSession` remains the name of the full set:
the core and every ability composed, what the built-in backends implement.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Final, Protocol, cast, runtime_checkable

from tenure._core.claims import ClaimRecord
from tenure._core.commands import RateReservation
from tenure.backends._capability import Capability
from tenure.backends._core_session import CoreSession
from tenure.backends._grants import Grant, HeldGrant
from tenure.backends._handoffs import Handoff
from tenure.backends._tickets import SessionTicket
from tenure.backends._watch_streams import PrefixWatchStream
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
    "Handoffs",
    "LeaseRenewal",
    "MaxHolds",
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
    "handoffs",
    "lease_renewal",
    "max_holds",
    "prefix_watch",
    "rate_reservations",
    "session_recovery",
    "task_numbers",
]


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
        """A new hold of ``count`` tokens of each semaphore of ``names``, all or none.

        Granted only when every one can be at once, and then all in one step (a grant
        each, in the order of ``names``); waiting, it is in every queue with one
        arrival (:attr:`Capability.ALL_OR_NONE`). ``timeout`` and ``ephemeral`` are
        :meth:`CoreSession.acquire`'s (None: busy, with ``timeout`` 0). Cancelled, it
        is withdrawn from every queue, and grants that raced the cancellation are
        released.

        Raises UnsupportedError on a backend without ALL_OR_NONE, and what
        :meth:`CoreSession.acquire` raises.
        """


@runtime_checkable
class LeaseRenewal(Protocol):
    """:attr:`Capability.LEASE_TTL`: a hold with a TTL of its own, renewed by its holder."""

    async def renew(self, name: str, grant: Grant) -> float:
        """Extend the hold ``grant``, which has a lease TTL; the TTL now in force (LEASE_TTL)."""


@runtime_checkable
class SessionRecovery(Protocol):
    """:attr:`Capability.SESSION_RECOVERY`: a session taken back by a later process."""

    def ticket(self) -> SessionTicket:
        """What a later process needs to take this session back (:meth:`Backend.open_session
        <tenure.backends._base.Backend.open_session>`).

        Raises the session's loss error (or SessionClosedError) once it ended, and
        UnsupportedError on a backend without :attr:`Capability.SESSION_RECOVERY`.
        """

    async def holds(self) -> list[HeldGrant]:
        """The session's holds as the backend keeps them now, in (name, hold) order.

        After a resume these are what the session took back; a client rebuilds its
        lease objects from them. Reads the backend (its I/O is the backend's).
        """


@runtime_checkable
class Handoffs(Protocol):
    """:attr:`Capability.HANDOFF`: a hold handed to another session, under a new token."""

    async def offer_hold(self, name: str, grant: Grant) -> Handoff:
        """Offer this session's hold ``grant`` on ``name`` for adoption: what another
        session adopts it with (:meth:`adopt_hold`), carrying a secret made now (128
        random bits) that the store keeps only a proof of. The latest offer of a hold
        is the one that adopts; it names the hold by its token (a restate in place
        keeps it; an upgrade, a new token, withdraws it).

        Raises LeaseLostError if the grant is no longer held, the session's loss
        error once it ended, UnsupportedError on a backend without HANDOFF.
        """

    async def adopt_hold(self, handoff: Handoff) -> HeldGrant:
        """Take the hold ``handoff`` names as a new hold of this session, in one step:
        the offering session's grant ends (told to it as a lost lease) and this one
        holds the same count and data under a new fencing token, strictly greater than
        the offered one (the lease TTL, if any, restarts now).

        Raises InvalidArgumentError if the hand-off is of another kind of backend or
        another node; LeaseLostError if the hold cannot be adopted (it ended, was
        adopted already or offered again, or the secret is not its: one answer for
        all, so a guess learns nothing); UnsupportedError without HANDOFF.
        """


@runtime_checkable
class RateReservations(Protocol):
    """:attr:`Capability.RATE_RESERVATION`: a rate limiter's units reserved by the store,
    on the store's clock."""

    async def reserve_units(
        self, name: str, count: float, max_wait: float | None
    ) -> RateReservation:
        """Reserve ``count`` units of the rate limiter ``name`` (a semaphore whose data is
        a bucket, :mod:`tenure._core.rates`) on the store's clock, unless they would wait
        more than ``max_wait`` seconds; NotFoundError if missing, PreconditionFailedError
        if its data is no bucket. A lost answer may have reserved them."""


@runtime_checkable
class Claiming(Protocol):
    """:attr:`Capability.CLAIMS`: a name claimed for a slot of the store's clock."""

    async def claim(
        self, name: str, claim_id: str, at_least: float, at_most: float, data: bytes
    ) -> ClaimRecord:
        """Claim ``name`` for at least ``at_least`` and at most ``at_most`` seconds of the
        store's clock (:mod:`tenure._core.claims`, :attr:`Capability.CLAIMS`); the claim
        that holds the name now: this one (its id is ``claim_id``), or another's.

        The claim lives in the persistent semaphore ``name``, made if missing; a
        semaphore holding anything else but an ended claim's record refuses it
        (PreconditionFailedError). The claim does not end with the session; the store
        ends it (and deletes the semaphore) at ``at_most`` after its grant, or once
        released at the later of the release and ``at_least`` after its grant. A call
        whose answer was lost is sent again with the same ``claim_id`` and answered
        with the same claim. LimitExceededError past the node's ``max_claims``;
        UnsupportedError on a backend without CLAIMS.
        """


@runtime_checkable
class PrefixWatch(Protocol):
    """:attr:`Capability.PREFIX_WATCH`: every semaphore under a prefix watched at once."""

    async def watch_prefix(
        self, prefix: str, *, data: bool, owners: bool, waiters: bool
    ) -> PrefixWatchStream:
        """Arm a watch of every semaphore whose name starts with ``prefix`` (``""``:
        every one of the node), those made later too (:class:`PrefixWatchStream`).

        Armed when this returns: every change after that is told. Existence is
        always watched; ``data``, ``owners`` and ``waiters`` add those aspects (and
        list owners, waiters in the states pushed). It counts as one watch against
        the node's ``max_watches_per_session``: LimitExceededError past it.
        UnsupportedError on a backend without :attr:`Capability.PREFIX_WATCH`.
        """


@runtime_checkable
class TaskNumbers(Protocol):
    """:attr:`Capability.DEADLOCK_DETECTION`: requests carry the asking task's number.

    A session with this ability takes ``task`` in :meth:`acquire` and :meth:`restate`,
    and in ``acquire_all`` too if it has :class:`AllOrNone`. ``task`` is the client's
    number of the task that asks (0: not known; never two alike among the live tasks
    of one session's client), kept with the request and the hold it becomes: the
    store refuses a request that must wait and would close a deadlock (DeadlockError,
    raised besides what :meth:`CoreSession.acquire` raises). An upgrade queued by
    :meth:`restate` carries its ``task`` as an acquire does; ``acquire_all``'s set is
    checked for deadlocks as one request in every queue. The client passes ``task``
    only to a session whose ``task_numbers`` attribute is true (a backend of another
    package may lack the parameter).
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


@runtime_checkable
class MaxHolds(Protocol):
    """:attr:`Capability.MAX_HOLD`: a grant that ends at a time of the store's clock.

    A session with this ability takes ``max_hold`` in :meth:`acquire`: the grant ends
    ``max_hold`` seconds after it is made, on the store's clock, whatever its session
    does (renewals and keep-alives do not extend it); the store ends it as it ends an
    expired lease (``lease_lost`` to the session's listener, its waiters served). A
    node's own ``max_hold`` (its default) bounds every grant of the node; an
    acquire's may only shorten it. An upgrade (:meth:`CoreSession.restate` with more
    tokens) keeps the end of the hold it replaces. ``task`` is passed only to a
    session that has :class:`TaskNumbers` too.
    """

    @property
    def max_holds(self) -> bool:
        """True: the marker of the ability (the client passes ``max_hold=`` because of it)."""

    async def acquire(
        self,
        name: str,
        *,
        count: int,
        data: bytes,
        timeout: float | None,
        ephemeral: bool,
        task: int = 0,
        max_hold: float | None = None,
    ) -> Grant | None:
        """:meth:`CoreSession.acquire`, its grant ending ``max_hold`` seconds after it
        is made (None: the node's ``max_hold``, if any)."""


#: Each capability that is an ability, and the protocol a session implements for it.
#: The others (fencing tokens, FIFO, watch, durable, replicated, lock-delay) are
#: promises about the core's members, with nothing more to implement.
ABILITIES: Final[Mapping[Capability, type]] = MappingProxyType(
    {
        Capability.ALL_OR_NONE: AllOrNone,
        Capability.LEASE_TTL: LeaseRenewal,
        Capability.SESSION_RECOVERY: SessionRecovery,
        Capability.HANDOFF: Handoffs,
        Capability.RATE_RESERVATION: RateReservations,
        Capability.CLAIMS: Claiming,
        Capability.PREFIX_WATCH: PrefixWatch,
        Capability.DEADLOCK_DETECTION: TaskNumbers,
        Capability.MAX_HOLD: MaxHolds,
    }
)


#: The members each ability adds to the core (TaskNumbers' ``acquire`` and ``restate``
#: are the core's, taking one more argument: its marker is ``task_numbers``; MaxHolds'
#: ``acquire`` too, its marker ``max_holds``). A session
#: that has none of an ability's members does not implement it.
ABILITY_MEMBERS: Final[Mapping[Capability, tuple[str, ...]]] = MappingProxyType(
    {
        Capability.ALL_OR_NONE: ("acquire_all",),
        Capability.LEASE_TTL: ("renew",),
        Capability.SESSION_RECOVERY: ("ticket", "holds"),
        Capability.HANDOFF: ("offer_hold", "adopt_hold"),
        Capability.RATE_RESERVATION: ("reserve_units",),
        Capability.CLAIMS: ("claim",),
        Capability.PREFIX_WATCH: ("watch_prefix",),
        Capability.DEADLOCK_DETECTION: ("task_numbers",),
        Capability.MAX_HOLD: ("max_holds",),
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
    # A session may say why (an optional ``unsupported_reason(capability)``: a store
    # that lacks it here only, as postgres:// behind a transaction-pooling pgbouncer).
    why = getattr(session, "unsupported_reason", None)
    reason = why(capability) if callable(why) else None
    raise UnsupportedError(
        f"this backend does not provide the capability {capability.value} "
        f"(Capability.{capability.name}: its sessions implement no "
        f"{ABILITIES[capability].__name__})" + (f": {reason}" if reason else "")
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


def handoffs(session: object) -> Handoffs:
    """``session``'s :class:`Handoffs`, or UnsupportedError naming handoff."""
    return cast(Handoffs, ability(session, Capability.HANDOFF))


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


def max_holds(session: object) -> MaxHolds:
    """``session``'s :class:`MaxHolds`, or UnsupportedError naming max_hold."""
    return cast(MaxHolds, ability(session, Capability.MAX_HOLD))
