"""Semaphore administration and watches on PostgreSQL, for one session: a function each.

Create, update, compare-and-set, reserve rate-limiter units, claim, delete and
describe a semaphore: one function of the schema each, on PostgreSQL's clock where
time counts (:mod:`._sql_semaphores`, :mod:`._sql_limiters`, :mod:`._sql_claims`).
A change that could be applied twice by a retry after a lost answer is not sent
again (``idempotent=False``: its outcome is then unknown, UnavailableError); a
claim is, with the same claim id, which the function answers with the claim the
first try made. A forced delete is told at once to this client's own sessions that
held the semaphore (others hear it from the notification).

Watches (:mod:`._watch`) are armed here too: refused without notifications, or past
``max_watches_per_session``; :meth:`PgAdmin.stop` ends them with the session.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Protocol

from tenure._core.claims import ClaimRecord, parse_claim
from tenure._core.commands import RateReservation
from tenure._core.values import NodeConfig, SemaphoreDescription
from tenure.backends._base import Capability, PrefixWatchStream
from tenure.backends._prefix import PrefixFeed
from tenure.backends._store import SessionView
from tenure.backends.postgres._calls import PgSessionCalls
from tenure.backends.postgres._describe import describe_of
from tenure.backends.postgres._watch import PgWatch, watch_prefix
from tenure.errors import LimitExceededError, LostError, UnsupportedError

__all__ = ["PgAdmin", "PgAdminHome"]


#: Why watches are refused where notifications do not arrive (a watch's refusal, and
#: the reason a missing prefix watch is given: :meth:`PgAdmin.unsupported_reason`).
NO_NOTIFICATIONS: Final = (
    "a NOTIFY did not reach this client's LISTEN connection (a transaction-pooling "
    "pgbouncer between them?); connect to PostgreSQL directly or through session pooling"
)


class PgAdminHome(PgSessionCalls, Protocol):
    """What the administration asks of its home, the session's store (a
    :class:`~tenure.backends.postgres._store.PgStore`): its calls of the functions
    (:class:`~tenure.backends.postgres._calls.PgSessionCalls`), and the rest below."""

    @property
    def node(self) -> str:
        """The session's node."""

    @property
    def session(self) -> SessionView:
        """The session."""

    @property
    def notifications(self) -> bool:
        """Whether notifications reach this client (watches need them)."""

    @property
    def max_prefix_watches_per_node(self) -> int:
        """How many prefix watches the node may have armed (the URL's option)."""

    def tell_deleted(self, name: str) -> None:
        """``name`` was deleted by force here: this client's holders of it hear it now."""

    async def node_config(self) -> NodeConfig:
        """The node's settings, read now."""

    def subscribe(self, payload: str, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` on each ``payload`` on the node's channel; the stop function."""

    def hear_names(self, callback: Callable[[str | None], None]) -> Callable[[], None]:
        """Call ``callback`` with each changed name (``s<name>``), None after a reconnect."""


class PgAdmin:
    """One session's semaphore calls and watches (module docstring): its
    :class:`~tenure.backends._store.Administering` and
    :class:`~tenure.backends._store.Watching`."""

    def __init__(self, store: PgAdminHome) -> None:
        self._store = store
        #: The session's armed watches and prefix watches' feeds (failed at its end).
        self.watches: set[PgWatch] = set()
        self.prefix_watches: set[PrefixFeed] = set()

    # -- semaphores -------------------------------------------------------------------

    async def create_semaphore(self, name: str, limit: int, data: bytes) -> None:
        """One function (not sent again after a lost answer: it may have been applied)."""
        await self._store.call("create_semaphore", name, limit, data, idempotent=False)

    async def update_semaphore(self, name: str, data: bytes) -> None:
        """One function (not sent again after a lost answer: applied, then overwritten by
        another client's update, a second copy would undo that update)."""
        await self._store.call("update_semaphore", name, data, idempotent=False)

    async def swap_semaphore_data(self, name: str, expected: bytes, data: bytes) -> bool:
        """One function (not sent again after a lost answer: a swap that happened would
        be answered false the second time)."""
        swapped = await self._store.call(
            "swap_semaphore_data", name, expected, data, idempotent=False
        )
        return bool(swapped)

    async def reserve_units(
        self, name: str, count: float, max_wait: float | None
    ) -> RateReservation:
        """One function, on PostgreSQL's clock (not sent again after a lost answer: a
        reservation made twice would take twice the units)."""
        text = await self._store.call(
            "reserve_units", name, float(count), max_wait, idempotent=False
        )
        granted, waited, at = str(text).split()
        return RateReservation(granted == "1", float(waited), float(at))

    async def claim(
        self, name: str, claim_id: str, at_least: float, at_most: float, data: bytes
    ) -> ClaimRecord:
        """One function on PostgreSQL's clock, the semaphore's row locked
        (:mod:`._sql_claims`); sent again after a lost answer with the same claim id,
        which the function answers with the claim the first try made."""
        record = await self._store.call(
            "claim", name, claim_id, float(at_least), float(at_most), data, idempotent=True
        )
        return parse_claim(name, bytes(record))

    async def delete_semaphore(self, name: str, force: bool) -> None:
        """Delete ``name``; forced, its holds are gone and its waits end (NotFound)."""
        await self._store.call("delete_semaphore", name, force, idempotent=False)
        # Every hold of it is gone now: this client's holders hear so before this
        # returns (other clients' hear it from the notification).
        self._store.tell_deleted(name)

    async def describe_semaphore(
        self, name: str, *, owners: bool, waiters: bool
    ) -> SemaphoreDescription:
        """The semaphore now; NotFoundError if missing."""
        return await self._describe(name, owners=owners, waiters=waiters, missing_ok=False)

    async def read(self, name: str, *, owners: bool, waiters: bool) -> SemaphoreDescription:
        """The semaphore now (``exists=False`` if missing): what a watch reads."""
        return await self._describe(name, owners=owners, waiters=waiters, missing_ok=True)

    async def _describe(
        self, name: str, *, owners: bool, waiters: bool, missing_ok: bool
    ) -> SemaphoreDescription:
        store = self._store
        store.session.check_alive()
        answer = await store.read_now(
            "describe_semaphore", store.node, name, owners, waiters, missing_ok, True
        )
        store.session.check_alive()
        return describe_of(name, answer)

    # -- watches ----------------------------------------------------------------------

    async def watch_semaphore(
        self, name: str, *, data: bool, owners: bool, waiters: bool
    ) -> PgWatch:
        """Arm a watch (refused without notifications, or past max_watches_per_session)."""
        await self._check_watch_room()
        watch = PgWatch(self, name, data=data, owners=owners, waiters=waiters)
        await watch.start()
        return watch

    async def watch_prefix(
        self, prefix: str, *, data: bool, owners: bool, waiters: bool
    ) -> PrefixWatchStream:
        """Arm a prefix watch (:mod:`._watch`): every change of a semaphore under it
        notifies its name, which the consumer reads back."""
        await self._check_watch_room()
        return await watch_prefix(self, prefix)

    def unsupported_reason(self, capability: Capability) -> str | None:
        """Why this client's sessions lack ``capability``, when it is this store's
        situation rather than PostgreSQL's (watches without notifications)."""
        watching = capability in (Capability.WATCH, Capability.PREFIX_WATCH)
        return NO_NOTIFICATIONS if watching and not self._store.notifications else None

    async def _check_watch_room(self) -> None:
        """Refused without notifications, or past max_watches_per_session."""
        store = self._store
        if not store.notifications:
            raise UnsupportedError(f"postgres:// cannot watch here: {NO_NOTIFICATIONS}")
        limit = (await store.node_config()).max_watches_per_session
        if len(self.watches) + len(self.prefix_watches) >= limit:
            raise LimitExceededError(
                f"max_watches_per_session ({limit}) reached on node {store.node!r}"
            )

    def subscribe(self, payload: str, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` on each ``payload`` on the node's channel; the stop function."""
        return self._store.subscribe(payload, callback)

    def hear_names(self, callback: Callable[[str | None], None]) -> Callable[[], None]:
        """Call ``callback`` with each changed name (``s<name>``), None after a reconnect."""
        return self._store.hear_names(callback)

    async def register_watch(self, name: str, watch_id: int) -> None:
        """Register a watch of ``name`` (changes of it notify from then on)."""
        await self._store.call("watch", name, watch_id)

    async def unregister_watch(self, name: str, watch_id: int) -> None:
        """Remove a watch's registration (bounded by connect_timeout)."""
        await self._store.call_unfenced("unwatch", name, watch_id)

    async def register_prefix_watch(self, prefix: str, watch_id: int) -> None:
        """Register a prefix watch (changes under it notify from then on)."""
        store = self._store
        await store.call("watch_prefix", prefix, watch_id, store.max_prefix_watches_per_node)

    async def unregister_prefix_watch(self, watch_id: int) -> None:
        """Remove a prefix watch's registration (bounded by connect_timeout)."""
        await self._store.call_unfenced("unwatch_prefix", watch_id)

    def stop(self, error: LostError) -> None:
        """The session ended: its watches end with ``error``."""
        for watch in list(self.watches):
            watch.fail(error)
        for feed in list(self.prefix_watches):
            feed.fail(error)
