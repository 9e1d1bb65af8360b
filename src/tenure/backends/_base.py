"""The backend contract: what a place that keeps coordination state must do.

A backend keeps nodes, sessions and semaphores somewhere: in this process
(``memory://``), in a tenure server (``tenure://``), or in an engine users already
run. The client (:mod:`tenure.client`) builds every recipe (mutex, election,
semaphore, watch) over these few operations, so a recipe is written once for all
backends. ``docs/backends.md`` states the contract in prose;
``python -m pytest --pyargs tenure.testing.conformance --tenure-url=URL`` checks it.

The contract is semantic. How a backend meets it (request ids, a command engine,
keys with leases in etcd, rows in PostgreSQL) is its own business; ``memory://``
and ``tenure://`` happen to share one engine-driven implementation
(:mod:`tenure.backends._engine`).

News the backend did not answer a call with (the loss of a session, the loss of one
grant) goes to the client through a :class:`SessionListener`.

This module is the contract's one public home (:mod:`tenure.backends` re-exports
it): :class:`Backend` here, its :class:`Capability` in
:mod:`tenure.backends._capability`; one session: its core (:class:`CoreSession`) in
:mod:`tenure.backends._core_session`, its abilities (:data:`ABILITIES`) in
:mod:`tenure.backends._abilities`, the semaphore writes in
:mod:`tenure.backends._writes`, what it grants and whom it tells (:class:`Grant`,
:class:`HeldGrant`, :class:`SessionListener`) in :mod:`tenure.backends._grants`, the
full set, the core and every ability composed (:class:`BackendSession`), in
:mod:`tenure.backends._backend_session`; the watches' streams in
:mod:`tenure.backends._watch_streams`; session tickets in
:mod:`tenure.backends._tickets`; hand-offs in :mod:`tenure.backends._handoffs`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable

from tenure._core.top_report import TopReport
from tenure._core.values import (
    NO_IDENTITY,
    ClientIdentity,
    NodeConfig,
    NodeDescription,
    SemaphoreDescription,
    SemaphoreSummary,
    SessionSummary,
)
from tenure._core.why_report import WhyReport
from tenure.backends._abilities import (
    ABILITIES,
    ABILITY_MEMBERS,
    AllOrNone,
    Claiming,
    CoreSession,
    Handoffs,
    LeaseRenewal,
    MaxHolds,
    PrefixWatch,
    RateReservations,
    SessionRecovery,
    TaskNumbers,
    abilities_of,
    ability,
    all_or_none,
    claims,
    handoffs,
    lease_renewal,
    max_holds,
    prefix_watch,
    rate_reservations,
    session_recovery,
    task_numbers,
)
from tenure.backends._backend_session import BackendSession
from tenure.backends._capability import Capability
from tenure.backends._grants import Grant, HeldGrant, SessionListener
from tenure.backends._handoffs import Handoff, check_handoff
from tenure.backends._tickets import (
    MAX_TICKET_CHARS,
    MAX_TICKET_SECRET_BYTES,
    TICKET_PREFIX,
    SessionTicket,
    check_ticket,
)
from tenure.backends._watch_streams import (
    PrefixChange,
    PrefixNews,
    PrefixReset,
    PrefixWatchStream,
    WatchStream,
)
from tenure.backends._writes import CreateWrite, DeleteWrite, SemaphoreWrite, SwapWrite, UpdateWrite

__all__ = [
    "ABILITIES",
    "ABILITY_MEMBERS",
    "MAX_TICKET_CHARS",
    "MAX_TICKET_SECRET_BYTES",
    "TICKET_PREFIX",
    "AllOrNone",
    "Backend",
    "BackendListing",
    "BackendNodes",
    "BackendSession",
    "Capability",
    "Claiming",
    "CoreSession",
    "CreateWrite",
    "DeleteWrite",
    "Grant",
    "Handoff",
    "Handoffs",
    "HeldGrant",
    "LeaseRenewal",
    "MaxHolds",
    "PrefixChange",
    "PrefixNews",
    "PrefixReset",
    "PrefixWatch",
    "PrefixWatchStream",
    "RateReservations",
    "SemaphoreWrite",
    "SessionListener",
    "SessionRecovery",
    "SessionTicket",
    "StaleDescribing",
    "StaleWatching",
    "StaleReading",
    "SwapWrite",
    "TaskNumbers",
    "UpdateWrite",
    "NameStatistics",
    "WaitChains",
    "WatchStream",
    "abilities_of",
    "ability",
    "all_or_none",
    "check_handoff",
    "check_ticket",
    "claims",
    "handoffs",
    "lease_renewal",
    "max_holds",
    "prefix_watch",
    "rate_reservations",
    "session_recovery",
    "task_numbers",
]


class BackendNodes(Protocol):
    """A backend's nodes, each a namespace with its own settings (docs/backends.md,
    "Nodes"): one of the parts :class:`Backend` is made of."""

    async def create_node(self, name: str, config: NodeConfig) -> None:
        """Create a node with ``config``; AlreadyExistsError if it exists."""

    async def describe_node(self, name: str) -> NodeDescription:
        """A node's settings and counts; NotFoundError if missing."""

    async def alter_node(self, name: str, changes: Mapping[str, object]) -> NodeDescription:
        """Change some of a node's settings (NodeConfig field names); the new description."""

    async def drop_node(self, name: str, force: bool) -> None:
        """Drop a node; with live sessions only if ``force`` (they are then lost)."""


class BackendListing(Protocol):
    """What a backend shows and does for operators (docs/backends.md, "Listing and
    killing sessions"): its nodes, semaphores and sessions listed, and a live session
    ended; one of the parts :class:`Backend` is made of.

    Listings are paged: a page is sorted, ``after`` is exclusive, ``limit`` is in
    [1, MAX_PAGE] (InvalidArgumentError outside), so no reply outgrows a frame.
    """

    async def list_nodes(self, *, after: str, limit: int) -> list[str]:
        """Up to ``limit`` node names greater than ``after`` (``""``: from the first), sorted."""

    async def list_semaphores(
        self, node: str, *, prefix: str, after: str, limit: int
    ) -> list[SemaphoreSummary]:
        """Up to ``limit`` semaphores of ``node`` whose names start with ``prefix`` and
        are greater than ``after``, sorted by name; NotFoundError for a missing node."""

    async def list_sessions(self, node: str, *, after: int, limit: int) -> list[SessionSummary]:
        """Up to ``limit`` live sessions of ``node`` with ids greater than ``after``,
        sorted by id; NotFoundError for a missing node."""

    async def kill_session(self, node: str, session_id: int) -> None:
        """End a live session as if its recovery window had passed.

        Its holds are released (the node's lock-delay applies, as on expiry), its
        waits withdrawn, and its client hears :meth:`SessionListener.session_lost`
        with SessionExpiredError whose message says an operator ended it.
        NotFoundError if the node or the live session does not exist;
        PermissionDeniedError without write access.
        """


@runtime_checkable
class WaitChains(Protocol):
    """:attr:`Capability.WAIT_CHAINS`: a backend that says who blocks a name, knowing
    what each holder waits for. Not part of :class:`Backend`: a backend without it
    is answered from a describe (``client.why``)."""

    async def why(self, node: str, name: str, *, after: int, limit: int) -> WhyReport:
        """Who blocks semaphore ``name`` of ``node``
        (:class:`~tenure._core.blocking.WhyReport`): up to ``limit`` holders, up to
        ``limit`` waiters after the ``after``-th, what each holder waits for, and the
        chain (``limit`` links at most) to its roots. NotFoundError for a missing node
        or semaphore; InvalidArgumentError for a ``limit`` outside [1, MAX_PAGE] or a
        negative ``after``."""


@runtime_checkable
class NameStatistics(Protocol):
    """:attr:`Capability.NAME_STATS`: a backend that keeps statistics per name and says
    which names are the most contended. Not part of :class:`Backend`."""

    async def top(self, node: str, *, window: float, sort: str, limit: int) -> TopReport:
        """The ``limit`` most contended names of ``node`` (``""``: every node), by
        ``sort`` over the last ``window`` seconds
        (:class:`~tenure._core.top_report.TopReport`). NotFoundError for a missing
        node; InvalidArgumentError for a window other than 60 or 300, an unknown
        sort, or a ``limit`` outside [1, MAX_PAGE]."""


@runtime_checkable
class StaleReading(Protocol):
    """A backend whose reads may be answered a little stale by replicas (a cluster's
    standbys: ``tenure://``'s ``max_staleness``). Not part of :class:`Backend`: any
    other backend answers every read fresh, which is within any staleness."""

    def reading(self, max_staleness: float) -> Backend:
        """This backend, its reads (a node's description, the listings, ``why``, ``top``)
        allowed to be ``max_staleness`` seconds stale; everything else as it is."""
        ...


@runtime_checkable
class StaleDescribing(Protocol):
    """A backend session whose semaphore descriptions may be answered a little stale by
    replicas (a cluster's standbys: ``tenure://``). Not part of :class:`CoreSession`:
    the client describes through any other session fresh, which is within any
    staleness; the built-in sessions all have it, and answer fresh where their
    backend keeps no replica."""

    async def describe_semaphore_stale(
        self, name: str, *, owners: bool, waiters: bool, max_staleness: float
    ) -> SemaphoreDescription:
        """:meth:`CoreSession.describe_semaphore`, allowed to be ``max_staleness``
        seconds stale, yet never older than what the session wrote or was told."""
        ...


@runtime_checkable
class StaleWatching(Protocol):
    """A backend session whose watches may be armed on replicas, fired as each replica
    applies the changes (a cluster's standbys: ``tenure://``). Not part of
    :class:`CoreSession`: the client watches through any other session as ever
    (fresh: within any staleness); the built-in sessions all have it, and watch as
    ever where their backend keeps no replica."""

    async def watch_semaphore_stale(
        self, name: str, *, data: bool, owners: bool, waiters: bool, max_staleness: float
    ) -> WatchStream:
        """:meth:`CoreSession.watch_semaphore`, armed where each state it brings is at
        most ``max_staleness`` seconds stale (each firing comes as late), yet never
        older than what the session wrote or was told when it was armed."""
        ...

    async def watch_prefix_stale(
        self, prefix: str, *, data: bool, owners: bool, waiters: bool, max_staleness: float
    ) -> PrefixWatchStream:
        """:meth:`PrefixWatch.watch_prefix`, armed as :meth:`watch_semaphore_stale` is."""
        ...


class Backend(BackendNodes, BackendListing, Protocol):
    """A place where coordination state lives, opened by URL (see :func:`open_backend`):
    its nodes (:class:`BackendNodes`), its sessions, its claims, and what operators
    list (:class:`BackendListing`)."""

    @property
    def capabilities(self) -> frozenset[Capability]:
        """What this backend promises (:class:`Capability`)."""

    async def open_session(
        self,
        node: str,
        *,
        timeout: float | None,
        description: str,
        listener: SessionListener,
        resume: SessionTicket | None = None,
        identity: ClientIdentity = NO_IDENTITY,
    ) -> CoreSession:
        """Open a session on ``node``; ``timeout`` is its recovery window (None: the node's).

        ``identity`` (who runs the client) is kept with the session and shown, with
        ``description``, in owners, waiters and listings.

        With ``resume``, take back the live session the ticket names instead of
        opening one (``timeout`` and ``description`` are then ignored: the session
        keeps its own). A process that crashed and restarts within the session's
        recovery window gets everything it held:

        * its holds stay held, with their tokens, counts and data (:meth:`SessionRecovery.holds`);
        * its queued (waiting) requests are withdrawn: nobody waits for them any more,
          and the waiters behind them move up;
        * its watches are dropped;
        * the previous owner, if it did not actually die, is fenced off: no call of
          it acts on the session any more (they raise), and its listener hears
          :meth:`SessionListener.session_lost` (SessionExpiredError).

        Raises InvalidArgumentError for a ticket of another kind of backend or of
        another node, SessionExpiredError for a session that has ended (expired,
        closed), or whose secret does not match (the backend cannot tell a wrong
        secret from a session it never had), and UnsupportedError on a backend
        without :attr:`Capability.SESSION_RECOVERY`.
        """

    async def release_claim(self, node: str, name: str, claim_id: str) -> bool:
        """Release the claim ``claim_id`` of ``name`` in ``node`` (no session needed):
        it ends at the later of now and ``at_least`` after its grant. Whether it
        shortened a live claim of that id (False: none, ended, another's, released
        already). NotFoundError for a missing node; PermissionDeniedError without
        write access; UnsupportedError on a backend without :attr:`Capability.CLAIMS`.
        """

    async def aclose(self) -> None:
        """Close every session this backend opened, then release its resources."""
