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
"""

from __future__ import annotations

import base64
import binascii
import enum
import re
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol, Self

from tenure._core.claims import ClaimRecord
from tenure._core.commands import RateReservation
from tenure._core.values import (
    NO_IDENTITY,
    ClientIdentity,
    NodeConfig,
    NodeDescription,
    SemaphoreDescription,
    SemaphoreSummary,
    SessionSummary,
)
from tenure.errors import InvalidArgumentError, LostError

#: Longest ticket string :meth:`SessionTicket.from_str` reads (a node name of 1 KiB
#: and a secret of 1 KiB fit well within it).
MAX_TICKET_CHARS: Final = 8192
#: Longest secret a ticket carries, in bytes.
MAX_TICKET_SECRET_BYTES: Final = 1024
#: What every ticket string starts with: the format's version.
TICKET_PREFIX: Final = "t1."
_SCHEME: Final = re.compile(r"[a-z][a-z0-9+.-]{0,31}")


class Capability(enum.Enum):
    """What a backend promises beyond the contract's core; callers may require them.

    A backend declares a capability only if it keeps the promise in every case the
    conformance kit can produce; one it lacks is refused by ``connect(require=...)``,
    never silently weakened.
    """

    #: Every grant of a node carries a token strictly greater than every earlier
    #: grant's in that node, across restarts of the backend.
    FENCING_TOKENS = "fencing_tokens"
    #: Waiters of a semaphore are served in arrival order; none overtakes the head.
    FIFO = "fifo"
    #: Watched changes are pushed as they happen, not found by polling.
    WATCH = "watch"
    #: An acknowledged change survives a restart of the backend.
    DURABLE = "durable"
    #: An acknowledged grant survives the loss of any one server of the backend.
    REPLICATED = "replicated"
    #: A session outlives a lost connection for its recovery window, and re-attaches.
    SESSION_RECOVERY = "session_recovery"
    #: A grant may carry a time-to-live of its own that its holder renews.
    LEASE_TTL = "lease_ttl"
    #: A node's ``lock_delay``: after a holder *failed* (its session or lease
    #: expired), nobody gets its tokens for that long. Without it, a node with a
    #: non-zero lock_delay is refused.
    LOCK_DELAY = "lock_delay"
    #: Several semaphores are acquired all or none, in one step, and a request for
    #: several waits in all their queues with one arrival (``session.lock_all``):
    #: requests for overlapping names in any order never deadlock.
    ALL_OR_NONE = "all_or_none"
    #: A session watches every semaphore under a name prefix, those made later too
    #: (:meth:`BackendSession.watch_prefix`): creations, changes and deletions are
    #: pushed as they happen, never found by polling.
    PREFIX_WATCH = "prefix_watch"
    #: An acquire that would close a cycle of tasks waiting on each other, none of
    #: which could ever go on (a deadlock), fails at once with DeadlockError naming
    #: the cycle; the others keep waiting (docs/recipes.md, "Deadlock detection").
    #: Without it such acquires wait as they always did (until their timeouts):
    #: ``connect(url, require=[Capability.DEADLOCK_DETECTION])`` insists on it.
    DEADLOCK_DETECTION = "deadlock_detection"
    #: Claims of a name for a slot (``session.claim``, :mod:`tenure._core.claims`):
    #: at most one at a time, held for at least ``at_least`` and at most ``at_most``
    #: seconds of the store's clock, ended by the store itself (not with a session),
    #: released by id by anyone.
    CLAIMS = "claims"


@dataclass(frozen=True, slots=True)
class Grant:
    """A successful acquire: the fencing token, the count held, the lease TTL if any.

    ``hold`` tells this hold from the session's other holds on the same semaphore
    (the backend's number for it; the session gives it back to restate, release or
    renew this hold).
    """

    token: int
    count: int
    lease_ttl: float | None = None
    hold: int = 0


@dataclass(frozen=True, slots=True)
class HeldGrant:
    """One hold of a session, as :meth:`BackendSession.holds` reads it back.

    ``grant`` is what the acquire that made the hold returned (token, count, lease
    TTL, hold number); ``data`` is the owner data the hold carries.
    """

    name: str
    grant: Grant
    data: bytes


@dataclass(frozen=True, slots=True)
class SessionTicket:
    """What a later process needs to take a live session back (``resume=``).

    ``scheme`` names the kind of backend that made it (``memory``, ``tenure``,
    ``etcd``...; TLS or not is the URL's business, not the ticket's), ``node`` the
    session's node, ``session_id`` the backend's id of the session. ``secret`` is
    the backend's own proof of ownership (a protection key, a lease's secret...),
    opaque to the client: whoever has the ticket can take the session, and
    everything it holds, away from its owner, so keep it as you would a password
    (it is left out of ``repr``).

    :meth:`to_str` writes it as URL-safe ASCII (for a file, an environment
    variable, a command line); :meth:`from_str` reads it back.
    """

    scheme: str
    node: str
    session_id: int
    secret: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.scheme, str) or not _SCHEME.fullmatch(self.scheme):
            raise InvalidArgumentError(
                f"a ticket's scheme must be a lower-case URL scheme, got {self.scheme!r}"
            )
        if not isinstance(self.node, str) or not self.node:
            raise InvalidArgumentError(
                f"a ticket's node must be a non-empty string, got {self.node!r}"
            )
        if type(self.session_id) is not int or self.session_id < 0:
            raise InvalidArgumentError(
                f"a ticket's session_id must be a non-negative int, got {self.session_id!r}"
            )
        if (
            not isinstance(self.secret, bytes)
            or not 0 < len(self.secret) <= MAX_TICKET_SECRET_BYTES
        ):
            raise InvalidArgumentError(
                f"a ticket's secret must be 1 to {MAX_TICKET_SECRET_BYTES} bytes "
                f"(MAX_TICKET_SECRET_BYTES)"
            )

    def to_str(self) -> str:
        """The ticket as URL-safe ASCII (``t1.`` and dot-separated base64url fields)."""
        fields = (
            _b64(self.scheme.encode("ascii")),
            str(self.session_id),
            _b64(self.node.encode("utf-8", "surrogatepass")),
            _b64(self.secret),
        )
        return TICKET_PREFIX + ".".join(fields)

    @classmethod
    def from_str(cls, text: str) -> SessionTicket:
        """Read a ticket written by :meth:`to_str`; InvalidArgumentError if it is not one."""
        if not isinstance(text, str):
            raise InvalidArgumentError(f"a session ticket is a string, got {type(text).__name__}")
        if len(text) > MAX_TICKET_CHARS:
            raise InvalidArgumentError(
                f"a session ticket is at most {MAX_TICKET_CHARS} characters (MAX_TICKET_CHARS), "
                f"got {len(text)}"
            )
        parts = text.strip().removeprefix(TICKET_PREFIX).split(".")
        if not text.strip().startswith(TICKET_PREFIX) or len(parts) != 4:
            raise InvalidArgumentError(
                "not a session ticket (expected what SessionTicket.to_str() writes: "
                f"{TICKET_PREFIX}<scheme>.<id>.<node>.<secret>)"
            )
        scheme, session_id, node, secret = parts
        if not session_id.isascii() or not session_id.isdigit() or len(session_id) > 20:
            raise InvalidArgumentError(f"a session ticket's id is not a number: {session_id!r}")
        try:
            return cls(
                _unb64(scheme).decode("ascii"),
                _unb64(node).decode("utf-8", "surrogatepass"),
                int(session_id),
                _unb64(secret),
            )
        except (ValueError, binascii.Error) as error:  # UnicodeDecodeError is a ValueError
            raise InvalidArgumentError(f"a session ticket's field is malformed: {error}") from None


def check_ticket(ticket: SessionTicket, scheme: str, node: str) -> None:
    """Refuse a ticket of another kind of backend, or of another node (InvalidArgumentError).

    What every backend's ``open_session(..., resume=ticket)`` checks first.
    """
    if not isinstance(ticket, SessionTicket):
        raise InvalidArgumentError(f"resume must be a SessionTicket, got {type(ticket).__name__}")
    if ticket.scheme != scheme:
        raise InvalidArgumentError(
            f"the ticket is of a {ticket.scheme}:// session; this is a {scheme}:// backend"
        )
    if ticket.node != node:
        raise InvalidArgumentError(
            f"the ticket is of a session of node {ticket.node!r}, not of {node!r}"
        )


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    if not text or not text.isascii() or not re.fullmatch(r"[A-Za-z0-9_-]*", text):
        raise ValueError(f"{text[:40]!r} is not base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class SessionListener(Protocol):
    """Receives a backend session's bad news; called on the event loop, never twice."""

    def session_lost(self, error: LostError) -> None:
        """The session ended without being closed by its client (expired, dropped...).

        Every grant of the session ended with it; the backend does not also call
        :meth:`lease_lost` for each.
        """

    def lease_lost(self, name: str, token: int, error: LostError) -> None:
        """The grant with ``token`` on semaphore ``name`` ended without a release.

        (Its lease TTL ran out, the semaphore was deleted by force...)
        """


class WatchStream(Protocol):
    """The states of one watched semaphore, as an async iterator.

    The first item is the state when the watch was armed (``exists=False`` if the
    semaphore does not exist); each next one is the *latest* state after a watched
    change: a consumer that is slow skips states, it never gets a queue of stale
    ones. An item may equal the one before (after a reconnect, say). The iteration
    ends by raising the session's loss error if the session is lost.
    """

    def __aiter__(self) -> Self:
        """The stream itself."""

    async def __anext__(self) -> SemaphoreDescription:
        """Wait for the next state."""

    async def aclose(self) -> None:
        """Stop watching (idempotent)."""


@dataclass(frozen=True, slots=True)
class PrefixChange:
    """News of a prefix watch: the semaphore ``name`` (under the prefix) changed.

    ``description`` is the state the change left, listed as watched (``exists``
    false: it was deleted), where the store pushes states (the engine's); None where
    the store can only say *that* it changed: read it back
    (:meth:`BackendSession.describe_semaphore`), which gives the latest state.
    """

    name: str
    description: SemaphoreDescription | None = None


@dataclass(frozen=True, slots=True)
class PrefixReset:
    """News of a prefix watch: changes may have been missed (a re-attach after a lost
    connection, a restarted server, a gap in the store's pushes, a compaction, a
    consumer too far behind). List the prefix again: the watch was armed again
    before this was yielded, so every change after it is told."""


#: One item of a :class:`PrefixWatchStream`.
PrefixNews = PrefixChange | PrefixReset


class PrefixWatchStream(Protocol):
    """What a prefix watch tells, as an async iterator of :data:`PrefixNews`.

    Nothing is yielded for the state when it was armed (list the prefix after
    :meth:`BackendSession.watch_prefix` returns); then a :class:`PrefixChange` for
    every change, made after it was armed, of any semaphore whose name starts with
    the prefix: its creation, its data, owners or waiters (as watched) and its
    deletion. A name outside the prefix is never told. News coalesces per name: a
    consumer that is busy finds one item per changed name, with the latest state
    pushed, never a queue of stale ones (nor a promise of every intermediate state).
    An item may tell of a change that left what is watched as it was (after a
    reconnect, say). A :class:`PrefixReset` replaces what may have been missed,
    pending items included. The iteration ends by raising the session's loss error
    if the session is lost.
    """

    def __aiter__(self) -> Self:
        """The stream itself."""

    async def __anext__(self) -> PrefixNews:
        """Wait for the next news."""

    def pending(self) -> frozenset[str]:
        """The names whose news is waiting to be taken. A consumer that has just listed
        the prefix reads these back rather than trust their pushed states: one pushed
        while it listed may be older than what its listing read."""

    async def aclose(self) -> None:
        """Stop watching (idempotent)."""


class BackendSession(Protocol):
    """One session: an owner of grants, alive while its client is or for its window.

    While the connection to the backend is lost, the backend keeps the session for
    its recovery window and re-attaches it by itself when it can (with
    :attr:`Capability.SESSION_RECOVERY`); calls made meanwhile wait for that, within
    the window. If the window passes, the listener hears :meth:`session_lost`, and
    every call raises the loss error.
    """

    @property
    def session_id(self) -> int:
        """The backend's id of this session, as owners and waiters show it."""

    @property
    def recovery_window(self) -> float:
        """The window in force, in seconds: the one asked for (or the node's default)
        as the backend keeps it (``etcd://`` rounds it up to whole seconds, 2 at least)."""

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
        """A new hold of ``count`` tokens of semaphore ``name``, with owner data ``data``.

        A session may hold a semaphore more than once: each acquire is a hold of its
        own, an owner or waiter like another session's (two holds of one session
        queue behind each other in arrival order). :attr:`Grant.hold` names it for
        :meth:`restate`, :meth:`release` and :meth:`renew`.

        ``timeout`` is how long to wait, by the backend's clock (None: forever; 0:
        only try, returning None if the tokens are not free now or others wait).
        A waiting request is served in arrival order (with :attr:`Capability.FIFO`).
        ``ephemeral`` creates a missing semaphore with the largest limit; it is
        deleted when its last owner and waiter are gone.

        ``task`` is the client's number of the task that asks (0: not known; never
        two alike among the live tasks of one session's client), kept with the
        request and the hold it becomes: a backend with
        :attr:`Capability.DEADLOCK_DETECTION` refuses a request that must wait and
        would close a deadlock (DeadlockError). The client passes it only to a
        session whose ``task_numbers`` attribute is true (optional: a backend of
        another package may lack the parameter).

        Raises TimeoutError when a positive timeout passes, NotFoundError for a
        missing semaphore that is not ephemeral, LimitExceededError if ``count``
        exceeds the limit or the queue is full, DeadlockError (above). If the
        awaiting task is cancelled, the request is withdrawn (a grant that raced the
        cancellation is released), so a cancelled acquire never leaves a hold behind.
        """

    async def acquire_all(
        self,
        names: Sequence[str],
        *,
        count: int,
        data: bytes,
        timeout: float | None,
        ephemeral: bool,
        task: int = 0,
    ) -> list[Grant] | None:
        """A new hold of ``count`` tokens of each semaphore of ``names``, all or none.

        Granted only when every one can be at once, and then all in one step (a grant
        each, in the order of ``names``); waiting, it is in every queue with one
        arrival (:attr:`Capability.ALL_OR_NONE`). ``timeout`` and ``ephemeral`` are
        :meth:`acquire`'s (None: busy, with ``timeout`` 0), and so is ``task`` (the set
        is checked for deadlocks as one request in every queue). Cancelled, it is withdrawn
        from every queue, and grants that raced the cancellation are released.

        Raises UnsupportedError on a backend without ALL_OR_NONE, and what
        :meth:`acquire` raises.
        """

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
        """Change the hold ``grant`` in place: its count, its data, or both.

        No more tokens than held, or new data, apply at once and keep the token.
        More tokens queue as an upgrade (``timeout`` and ``task`` as for
        :meth:`acquire`) that, once granted, replaces the hold with a new token;
        until then, and if the upgrade fails or is cancelled, the hold stays as it
        was. Returns the hold's new Grant (None: ``timeout`` 0 and the tokens are
        not free).
        """

    def release(self, name: str, grant: Grant) -> Awaitable[bool]:
        """Drop the hold ``grant`` (and a queued upgrade of it); await whether it was there.

        Started before it returns: the hold is the session's no more, and the
        release is sent until the store answers (or the session ends), whether or
        not anyone awaits the answer. A session whose ``releases_in_order`` is true
        (an optional attribute: false if missing) sends it before this returns, so
        the client's later requests reach the store after it (``tenure://``,
        ``memory://``, ``redis://``); leaving ``async with`` then does not wait for
        the answer.
        """

    async def renew(self, name: str, grant: Grant) -> float:
        """Extend the hold ``grant``, which has a lease TTL; the TTL now in force (LEASE_TTL)."""

    async def create_semaphore(self, name: str, limit: int, data: bytes) -> None:
        """Create a persistent semaphore; AlreadyExistsError if it exists."""

    async def update_semaphore(self, name: str, data: bytes) -> None:
        """Replace a semaphore's data; NotFoundError if missing."""

    async def swap_semaphore_data(self, name: str, expected: bytes, data: bytes) -> bool:
        """Replace a semaphore's data with ``data`` if it is ``expected`` now, atomically;
        whether it did. NotFoundError if missing. If the answer is lost (the store
        unreachable), the error says so: whether the swap happened is then unknown."""

    async def reserve_units(
        self, name: str, count: float, max_wait: float | None
    ) -> RateReservation:
        """Reserve ``count`` units of the rate limiter ``name`` (a semaphore whose data is
        a bucket, :mod:`tenure._core.rates`) on the store's clock, unless they would wait
        more than ``max_wait`` seconds; NotFoundError if missing, PreconditionFailedError
        if its data is no bucket. A lost answer may have reserved them."""

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

    async def delete_semaphore(self, name: str, force: bool) -> None:
        """Delete a semaphore; one with owners or waiters only with ``force``.

        Forced: its waiters fail with NotFoundError and its owners lose their grants
        (each owner's listener hears :meth:`SessionListener.lease_lost`).
        """

    async def describe_semaphore(
        self, name: str, *, owners: bool, waiters: bool
    ) -> SemaphoreDescription:
        """Describe a semaphore (owners in grant order, waiters in service order).

        NotFoundError if missing.
        """

    async def watch_semaphore(
        self, name: str, *, data: bool, owners: bool, waiters: bool
    ) -> WatchStream:
        """Arm a watch on the semaphore's data, owners and/or waiters (:class:`WatchStream`).

        Every state has owners and waiters listed if watched. The stream survives
        reconnects; LimitExceededError if the session watches too much already.
        """

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

    async def close(self) -> None:
        """End the session: every hold is released and every request withdrawn. Idempotent.

        The listener hears nothing: the client asked for it.
        """

    def ticket(self) -> SessionTicket:
        """What a later process needs to take this session back (:meth:`Backend.open_session`).

        Raises the session's loss error (or SessionClosedError) once it ended, and
        UnsupportedError on a backend without :attr:`Capability.SESSION_RECOVERY`.
        """

    async def holds(self) -> list[HeldGrant]:
        """The session's holds as the backend keeps them now, in (name, hold) order.

        After a resume these are what the session took back; a client rebuilds its
        lease objects from them. Reads the backend (its I/O is the backend's).
        """


class Backend(Protocol):
    """A place where coordination state lives, opened by URL (see :func:`open_backend`)."""

    @property
    def capabilities(self) -> frozenset[Capability]:
        """What this backend promises (:class:`Capability`)."""

    async def create_node(self, name: str, config: NodeConfig) -> None:
        """Create a node with ``config``; AlreadyExistsError if it exists."""

    async def describe_node(self, name: str) -> NodeDescription:
        """A node's settings and counts; NotFoundError if missing."""

    async def alter_node(self, name: str, changes: Mapping[str, object]) -> NodeDescription:
        """Change some of a node's settings (NodeConfig field names); the new description."""

    async def drop_node(self, name: str, force: bool) -> None:
        """Drop a node; with live sessions only if ``force`` (they are then lost)."""

    async def open_session(
        self,
        node: str,
        *,
        timeout: float | None,
        description: str,
        listener: SessionListener,
        resume: SessionTicket | None = None,
        identity: ClientIdentity = NO_IDENTITY,
    ) -> BackendSession:
        """Open a session on ``node``; ``timeout`` is its recovery window (None: the node's).

        ``identity`` (who runs the client) is kept with the session and shown, with
        ``description``, in owners, waiters and listings.

        With ``resume``, take back the live session the ticket names instead of
        opening one (``timeout`` and ``description`` are then ignored: the session
        keeps its own). A process that crashed and restarts within the session's
        recovery window gets everything it held:

        * its holds stay held, with their tokens, counts and data (:meth:`BackendSession.holds`);
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

    # -- listing (paged: a page is sorted, ``after`` is exclusive, ``limit`` is in
    # [1, MAX_PAGE]; InvalidArgumentError outside, so no reply outgrows a frame) --

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

    async def release_claim(self, node: str, name: str, claim_id: str) -> bool:
        """Release the claim ``claim_id`` of ``name`` in ``node`` (no session needed):
        it ends at the later of now and ``at_least`` after its grant. Whether it
        shortened a live claim of that id (False: none, ended, another's, released
        already). NotFoundError for a missing node; PermissionDeniedError without
        write access; UnsupportedError on a backend without :attr:`Capability.CLAIMS`.
        """

    async def aclose(self) -> None:
        """Close every session this backend opened, then release its resources."""
