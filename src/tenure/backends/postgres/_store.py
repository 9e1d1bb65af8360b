"""A session on PostgreSQL: a row, a heartbeat, a fence, and what it holds.

**Alive** while its client heartbeats (four times per recovery window): each
``heartbeat`` moves the row's deadline a window (2% long) past the database's
``clock_timestamp()``. After its client goes silent, the session lives until that
deadline, and then the next ``reap`` of any client of the node ends it (releasing
its holds, waking the next waiters): its client, back within the window, simply
carries on (SESSION_RECOVERY): the pool reconnects and calls are tried again.

**Loss** is heard three ways: the heartbeat's answer (``ended``), a notification
on the node's channel (``x<sid>``, ``r<sid>``, ``n``) that makes it ask at once,
and the local deadline (the session's rule), counted from the send time of the
last heartbeat the database answered.

**Fence**: every call carries the session's id, secret and ``seq``; a resume
ticket bumps ``seq`` (``resume_session``), and the old client's next call or
heartbeat is refused, so it hears ``session_lost``.

**Holds lost** without a release are heard by notification: ``d<name>`` (a forced
delete of the semaphore) and ``l<sid>`` (a lease TTL of the session ran out); the
store then reads the session's holds back (:meth:`PgStore.check_holds`).

Acquiring and waiting are :class:`~tenure.backends.postgres._acquire.Acquirer`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, Final, Protocol

from tenure._core.claims import ClaimRecord, parse_claim
from tenure._core.commands import RateReservation
from tenure._core.values import NodeConfig, SemaphoreDescription
from tenure.backends._base import Grant, HeldGrant, PrefixWatchStream
from tenure.backends._ledger import Pending
from tenure.backends._prefix import PrefixFeed
from tenure.backends._store import Enqueued, Owner, Queued, Withdrawal
from tenure.backends._store_listing import killed_message
from tenure.backends.postgres._acquire import Acquirer
from tenure.backends.postgres._calls import Caller, first_done
from tenure.backends.postgres._describe import describe_of
from tenure.backends.postgres._listen import Listener
from tenure.backends.postgres._reaper import Reaper
from tenure.backends.postgres._watch import PgWatch, watch_prefix
from tenure.errors import (
    LeaseLostError,
    LimitExceededError,
    LostError,
    SessionClosedError,
    SessionExpiredError,
    TenureError,
    UnsupportedError,
)

__all__ = ["PgHome", "PgStore"]

log = logging.getLogger("tenure.postgres")

#: Heartbeats per recovery window.
BEATS_PER_WINDOW: Final = 4


class PgHome(Protocol):
    """What a session on PostgreSQL shares with the other sessions of its client."""

    @property
    def caller(self) -> Caller:
        """Runs the schema's functions."""

    @property
    def listener(self) -> Listener:
        """The client's LISTEN connection."""

    @property
    def reaper(self) -> Reaper:
        """The client's reap timers."""

    @property
    def notifications(self) -> bool:
        """Whether notifications reach this client."""

    @property
    def recheck_interval(self) -> float:
        """Seconds between re-checks of a waiter without notifications."""

    @property
    def sessions(self) -> dict[int, PgStore]:
        """The client's live sessions, by id."""

    def listener_channel(self, node: str) -> str:
        """The notification channel of ``node``."""

    def joining(self, node: str, name: str) -> AbstractAsyncContextManager[None]:
        """Held while an acquire of this client joins ``name``'s queue."""

    async def node_config(self, name: str) -> NodeConfig:
        """A node's settings, read now."""

    def session_ended(self, store: PgStore) -> None:
        """A session ended (closed, lost): stop following its node for it."""


class PgStore:
    """A :class:`~tenure.backends._store.Store` on PostgreSQL (module docstring)."""

    where = "the database"

    def __init__(
        self,
        backend: PgHome,
        node: str,
        session_id: int,
        secret: bytes,
        seq: int,
        window: float,
        *,
        confirmed_at: float,
    ) -> None:
        self.backend = backend
        self.caller = backend.caller
        self.node = node
        self.sid = session_id
        self._secret = secret
        self.seq = seq
        self.window = window
        self.beat_period: float | None = window / BEATS_PER_WINDOW
        self.channel = backend.listener_channel(node)
        self.watches: set[PgWatch] = set()
        self.prefix_watches: set[PrefixFeed] = set()
        self._confirmed = confirmed_at
        self._loop = asyncio.get_running_loop()
        self._stops: list[Callable[[], None]] = []
        self.owner: Owner
        self.acquirer = Acquirer(self)

    def bind(self, owner: Owner) -> None:
        """The session this store works for: hear the notifications about it."""
        self.owner = owner
        listener, sid = self.backend.listener, self.sid
        self._stops = [
            self.subscribe(f"x{sid}", self._ask),
            self.subscribe(f"r{sid}", self._ask),
            self.subscribe("n", self._ask),
            self.subscribe(f"l{sid}", lambda: owner.spawn(self.check_holds(None))),
            # kill_session started a lock-delay: reap now, which names its end.
            self.subscribe("t", lambda: self.backend.reaper.due(self.node, 0.0)),
            listener.subscribe_prefix(self.channel, "d", self._deleted),
        ]

    def subscribe(self, payload: str, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` on each ``payload`` on the node's channel; the stop function."""
        return self.backend.listener.subscribe(self.channel, payload, callback)

    def secret(self) -> bytes:
        """The session's secret (every call of it carries it)."""
        return self._secret

    @property
    def recheck(self) -> float | None:
        """Seconds between re-checks of a waiter (None: notifications reach this client)."""
        return None if self.backend.notifications else self.backend.recheck_interval

    def joining(self, name: str) -> contextlib.AbstractAsyncContextManager[None]:
        """Held while a request of this client joins ``name``'s queue (the backend's)."""
        return self.backend.joining(self.node, name)

    # -- liveness ------------------------------------------------------------------

    def confirmed_at(self) -> float:
        """The send time of the last heartbeat (or open) the database answered."""
        return self._confirmed

    async def heartbeat(self) -> None:
        """Move the row's deadline, or hear why the session ended (told to the owner)."""
        sent_at = self._loop.time()
        answer = await self.caller.call(
            "heartbeat", [self.sid, self._secret, self.seq], within=self.window
        )
        ended = answer.get("ended")
        if ended is None:
            self._confirmed = max(self._confirmed, sent_at)
            self.backend.reaper.due(self.node, answer.get("next"))
        elif ended == "dropped":
            self.owner.dropped()
        elif ended == "closed":
            self.owner.lose(SessionClosedError(f"session {self.sid} was closed"))
        elif ended == "killed":
            self.owner.lose(SessionExpiredError(killed_message(self.sid)))
        elif ended == "taken":
            self.owner.lose(
                SessionExpiredError(f"session {self.sid} was taken over by a resumed client")
            )
        else:
            self.owner.lose(
                SessionExpiredError(f"session {self.sid} expired: its recovery window passed")
            )

    def _ask(self) -> None:
        """A notification about this session or its node: ask the database now."""
        if self.owner.ended is None:
            self.owner.spawn(self.heartbeat())

    # -- calls ---------------------------------------------------------------------

    def retry_window(self) -> float:
        """How long a call may keep trying: until the session's local deadline."""
        return max(0.1, self._confirmed + self.window - self._loop.time())

    async def call(self, function: str, *args: object, idempotent: bool = True) -> Any:
        """A function of this session (its fence first); a refusal that says the
        session is gone loses it.

        It ends by the session's end at the latest: a call on a stalled link can be
        neither cancelled nor bounded from here (psycopg's cancel request stalls
        too), so it is left to finish in the background then. A caller cancelled
        while its call is in flight waits for the answer (or the session's end): its
        cleanup (withdrawing an acquire) must come after it (:meth:`Caller.call`).
        """
        owner = self.owner
        owner.check_alive()
        calling = asyncio.ensure_future(
            self.caller.call(
                function,
                [self.sid, self._secret, self.seq, *args],
                idempotent=idempotent,
                within=self.retry_window(),
            )
        )
        calling.add_done_callback(_retrieved)
        ending = owner.ending()
        try:
            await first_done(calling, ending)
        except asyncio.CancelledError:
            calling.cancel()  # at once if not sent; else when answered
            await first_done(calling, ending)
            raise
        if not calling.done():
            owner.check_alive()
        try:
            return calling.result()
        except LostError as error:
            if isinstance(error, SessionExpiredError):
                self.backend.reaper.due(self.node, 0.0)  # let the database end it now
            with contextlib.suppress(TenureError):
                await self.heartbeat()  # says why (dropped, expired, taken over)
            ended = self.owner.ended
            if ended is not None:
                raise type(ended)(*ended.args) from None
            self.owner.lose(error)
            raise

    # -- acquire, release, renew (the acquirer's) -----------------------------------

    def new_request_id(self) -> int:
        """A random request id (63 bits): unused by this session across its owners."""
        return self.acquirer.new_request_id()

    async def enqueue(self, pending: Pending) -> Enqueued:
        """See :meth:`Acquirer.enqueue`."""
        return await self.acquirer.enqueue(pending)

    async def await_grant(self, pending: Pending) -> Grant:
        """See :meth:`Acquirer.await_grant`."""
        return await self.acquirer.await_grant(pending)

    async def withdraw(self, pending: Pending) -> Grant | Withdrawal:
        """See :meth:`Acquirer.withdraw`."""
        return await self.acquirer.withdraw(pending)

    async def release(self, name: str, hold: int) -> bool:
        """Delete the hold's owner row (and a queued upgrade of it)."""
        return bool(await self.call("release", name, hold))

    async def renew(self, name: str, grant: Grant) -> float:
        """Restart the lease of a grant that has a TTL (the node's ``default_lease``)."""
        ttl = float(await self.call("renew", name, grant.hold))
        if ttl < 0:  # ran out already, by the database's clock: its reap ends it now
            self.backend.reaper.due(self.node, 0.0)
            raise LeaseLostError(f"the lease of {name!r} ran out before it was renewed")
        return ttl

    # -- holds ----------------------------------------------------------------------

    async def holds(self) -> list[HeldGrant]:
        """The session's holds as the database keeps them, in (name, hold) order."""
        rows = await self.call("holds")
        found = [
            HeldGrant(
                name,
                Grant(int(token), int(count), None if ttl is None else float(ttl), int(hold)),
                bytes.fromhex(data),
            )
            for name, hold, token, count, data, ttl in rows
        ]
        return sorted(found, key=lambda held: (held.name, held.grant.hold))

    def _deleted(self, name: str | None) -> None:
        """``d<name>``: a semaphore was deleted by force (None: any may have been)."""
        held = {place[0] for place in self.owner.ledger.held}
        for gone in sorted(held) if name is None else [name] if name in held else []:
            self.owner.spawn(self.check_holds(gone))

    async def check_holds(self, name: str | None) -> None:
        """Holds of ``name`` (None: of every name, after a lease TTL ran out) that the
        database no longer has are lost.

        Only grants held before the read was sent are judged: one granted while it
        was on its way is missing from what it read (fault suite: such a grant was
        declared lost, its hold number reused, and the next acquire restated the
        owner row the database still had, old token and all). Holds being
        restated are left to their request."""
        ledger = self.owner.ledger
        judged = dict(ledger.held)
        rows = await self.call("holds")
        there = {(row[0], int(row[1])): int(row[2]) for row in rows}
        busy = {pending.place for pending in ledger.pending.values()}
        for place, grant in judged.items():
            held_name, hold = place
            if name is not None and held_name != name:
                continue
            if place in busy or ledger.held.get(place) is not grant:
                continue
            if there.get(place) != grant.token:
                message = (
                    f"semaphore {held_name!r} was deleted"
                    if name is not None
                    else f"the lease of {held_name!r} ran out (its TTL passed without a renewal)"
                )
                self.owner.grant_lost(held_name, hold, grant.token, LeaseLostError(message))

    def grants_gone(self, name: str) -> None:
        """``name`` was deleted by force: every hold of it (not being restated) is lost."""
        ledger = self.owner.ledger
        busy = {pending.place for pending in ledger.pending.values()}
        message = f"semaphore {name!r} was deleted"
        for (held_name, hold), grant in list(ledger.held.items()):
            if held_name == name and (name, hold) not in busy:
                self.owner.grant_lost(name, hold, grant.token, LeaseLostError(message))

    # -- semaphores -------------------------------------------------------------------

    async def create_semaphore(self, name: str, limit: int, data: bytes) -> None:
        """One function (not sent again after a lost answer: it may have been applied)."""
        await self.call("create_semaphore", name, limit, data, idempotent=False)

    async def update_semaphore(self, name: str, data: bytes) -> None:
        """One function."""
        await self.call("update_semaphore", name, data)

    async def swap_semaphore_data(self, name: str, expected: bytes, data: bytes) -> bool:
        """One function (not sent again after a lost answer: a swap that happened would
        be answered false the second time)."""
        return bool(await self.call("swap_semaphore_data", name, expected, data, idempotent=False))

    async def reserve_units(
        self, name: str, count: float, max_wait: float | None
    ) -> RateReservation:
        """One function, on PostgreSQL's clock (not sent again after a lost answer: a
        reservation made twice would take twice the units)."""
        text = await self.call("reserve_units", name, float(count), max_wait, idempotent=False)
        granted, waited, at = str(text).split()
        return RateReservation(granted == "1", float(waited), float(at))

    async def claim(
        self, name: str, claim_id: str, at_least: float, at_most: float, data: bytes
    ) -> ClaimRecord:
        """One function on PostgreSQL's clock, the semaphore's row locked
        (:mod:`._sql_claims`); sent again after a lost answer with the same claim id,
        which the function answers with the claim the first try made."""
        record = await self.call(
            "claim", name, claim_id, float(at_least), float(at_most), data, idempotent=True
        )
        return parse_claim(name, bytes(record))

    async def enqueue_all(self, pendings: list[Pending]) -> list[Grant] | Queued | None:
        """See :meth:`Acquirer.enqueue_all`."""
        return await self.acquirer.enqueue_all(pendings)

    async def delete_semaphore(self, name: str, force: bool) -> None:
        """Delete ``name``; forced, its holds are gone and its waits end (NotFound)."""
        await self.call("delete_semaphore", name, force, idempotent=False)
        # Every hold of it is gone now: this client's holders hear so before this
        # returns (other clients' hear it from the notification).
        for store in list(self.backend.sessions.values()):
            if store.node == self.node:
                store.grants_gone(name)

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
        self.owner.check_alive()
        answer = await self.caller.call(
            "describe_semaphore",
            [self.node, name, owners, waiters, missing_ok, True],
            within=self.retry_window(),
        )
        self.owner.check_alive()
        return describe_of(name, answer)

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

    async def _check_watch_room(self) -> None:
        """Refused without notifications, or past max_watches_per_session."""
        if not self.backend.notifications:
            raise UnsupportedError(
                "postgres:// cannot watch here: a NOTIFY did not reach this client's LISTEN "
                "connection (a transaction-pooling pgbouncer between them?); connect to "
                "PostgreSQL directly or through session pooling"
            )
        limit = (await self.backend.node_config(self.node)).max_watches_per_session
        if len(self.watches) + len(self.prefix_watches) >= limit:
            raise LimitExceededError(
                f"max_watches_per_session ({limit}) reached on node {self.node!r}"
            )

    def hear_names(self, callback: Callable[[str | None], None]) -> Callable[[], None]:
        """Call ``callback`` with each changed name (``s<name>``), None after a reconnect."""
        return self.backend.listener.subscribe_prefix(self.channel, "s", callback)

    async def register_prefix_watch(self, prefix: str, watch_id: int) -> None:
        """Register a prefix watch (changes under it notify from then on)."""
        await self.call("watch_prefix", prefix, watch_id)

    async def unregister_prefix_watch(self, watch_id: int) -> None:
        """Remove a prefix watch's registration (bounded by connect_timeout)."""
        await self.caller.call("unwatch_prefix", [self.sid, self._secret, watch_id])

    async def register_watch(self, name: str, watch_id: int) -> None:
        """Register a watch of ``name`` (changes of it notify from then on)."""
        await self.call("watch", name, watch_id)

    async def unregister_watch(self, name: str, watch_id: int) -> None:
        """Remove a watch's registration (bounded by connect_timeout)."""
        await self.caller.call("unwatch", [self.sid, self._secret, name, watch_id])

    # -- the end ---------------------------------------------------------------------

    def stop(self, error: LostError) -> None:
        """Stop hearing notifications, end the watches, leave the backend."""
        for stop in self._stops:
            stop()
        self._stops.clear()
        for watch in list(self.watches):
            watch.fail(error)
        for feed in list(self.prefix_watches):
            feed.fail(error)
        self.backend.session_ended(self)

    async def close(self) -> None:
        """Close the session's row (unreachable: its window ends it)."""
        with contextlib.suppress(TenureError):
            # Bounded by connect_timeout: a client closing while the database is down
            # does not wait a whole window per session (the window ends it anyway).
            await self.caller.call("close_session", [self.sid, self._secret, self.seq])


def _retrieved(task: asyncio.Future[Any]) -> None:
    """Mark a call's error as seen (its caller, if it still waits, got it already)."""
    if not task.cancelled():
        task.exception()
