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

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol, Self

from tenure._core.values import NodeConfig, NodeDescription, SemaphoreDescription
from tenure.errors import LostError


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
        self, name: str, *, count: int, data: bytes, timeout: float | None, ephemeral: bool
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

        Raises TimeoutError when a positive timeout passes, NotFoundError for a
        missing semaphore that is not ephemeral, LimitExceededError if ``count``
        exceeds the limit or the queue is full. If the awaiting task is cancelled,
        the request is withdrawn (a grant that raced the cancellation is released),
        so a cancelled acquire never leaves a hold behind.
        """

    async def restate(
        self, name: str, grant: Grant, *, count: int, data: bytes, timeout: float | None
    ) -> Grant | None:
        """Change the hold ``grant`` in place: its count, its data, or both.

        No more tokens than held, or new data, apply at once and keep the token.
        More tokens queue as an upgrade (``timeout`` as for :meth:`acquire`) that,
        once granted, replaces the hold with a new token; until then, and if the
        upgrade fails or is cancelled, the hold stays as it was. Returns the hold's
        new Grant (None: ``timeout`` 0 and the tokens are not free).
        """

    async def release(self, name: str, grant: Grant) -> bool:
        """Drop the hold ``grant`` (and a queued upgrade of it); whether it was there."""

    async def renew(self, name: str, grant: Grant) -> float:
        """Extend the hold ``grant``, which has a lease TTL; the TTL now in force (LEASE_TTL)."""

    async def create_semaphore(self, name: str, limit: int, data: bytes) -> None:
        """Create a persistent semaphore; AlreadyExistsError if it exists."""

    async def update_semaphore(self, name: str, data: bytes) -> None:
        """Replace a semaphore's data; NotFoundError if missing."""

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

    async def close(self) -> None:
        """End the session: every hold is released and every request withdrawn. Idempotent.

        The listener hears nothing: the client asked for it.
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
    ) -> BackendSession:
        """Open a session on ``node``; ``timeout`` is its recovery window (None: the node's)."""

    async def aclose(self) -> None:
        """Close every session this backend opened, then release its resources."""
