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

The store is the session's :class:`~tenure.backends._store.Store`; its acquires,
releases and holds are its :class:`~tenure.backends.postgres._acquire.PgAcquirer`'s,
its semaphore calls and watches its :class:`~tenure.backends.postgres._admin.PgAdmin`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, Final, Protocol

from tenure._core.values import NodeConfig
from tenure.backends._store import BoundSession
from tenure.backends._store_listing import killed_message
from tenure.backends.postgres._acquire import PgAcquirer
from tenure.backends.postgres._admin import PgAdmin
from tenure.backends.postgres._calls import Caller, first_done
from tenure.backends.postgres._listen import PgListener, channel
from tenure.backends.postgres._reaper import Reaper
from tenure.backends.postgres._url import PgOptions
from tenure.errors import (
    LeaseLostError,
    LostError,
    SessionClosedError,
    SessionExpiredError,
    TenureError,
)

__all__ = ["PgHome", "PgStore"]

log = logging.getLogger("tenure.postgres")

#: Heartbeats per recovery window.
BEATS_PER_WINDOW: Final = 4


class PgHome(Protocol):
    """What a session on PostgreSQL asks of its home, the client (the sessions' shared
    part)."""

    @property
    def caller(self) -> Caller:
        """Runs the schema's functions."""

    @property
    def listener(self) -> PgListener:
        """The client's LISTEN connection."""

    @property
    def reaper(self) -> Reaper:
        """The client's reap timers."""

    @property
    def notifications(self) -> bool:
        """Whether notifications reach this client."""

    @property
    def options(self) -> PgOptions:
        """The client's options (its URL's): the recheck interval, the prefix watches'
        bound, the schema whose channels its nodes notify on."""

    @property
    def sessions(self) -> dict[int, PgStore]:
        """The client's live sessions, by id."""

    def joining(self, node: str, name: str) -> AbstractAsyncContextManager[None]:
        """Held while an acquire of this client joins ``name``'s queue."""

    async def node_config(self, name: str) -> NodeConfig:
        """A node's settings, read now."""

    def session_ended(self, store: PgStore) -> None:
        """A session ended (closed, lost): stop following its node for it."""


class PgStore:
    """A session on PostgreSQL (module docstring): its :class:`~tenure.backends._store.Store`."""

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
        self.channel = channel(backend.options.schema, node)
        self._confirmed = confirmed_at
        self._loop = asyncio.get_running_loop()
        self._stops: list[Callable[[], None]] = []
        self.session: BoundSession
        #: Its acquires, releases and holds; its semaphore calls and watches.
        self.acquirer = PgAcquirer(self)
        self.admin = PgAdmin(self)

    def bind(self, session: BoundSession) -> None:
        """The session this store works for: hear the notifications about it."""
        self.session = session
        listener, sid = self.backend.listener, self.sid
        self._stops = [
            self.subscribe(f"x{sid}", self._ask),
            self.subscribe(f"r{sid}", self._ask),
            self.subscribe("n", self._ask),
            self.subscribe(f"l{sid}", lambda: session.spawn(self.check_holds(None))),
            self.subscribe(
                f"m{sid}", lambda: session.spawn(self.check_holds(None, "held for its max_hold"))
            ),
            # kill_session started a lock-delay: reap now, which names its end.
            self.subscribe("t", self.reap_now),
            listener.subscribe_prefix(self.channel, "d", self._deleted),
        ]

    def subscribe(self, payload: str, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` on each ``payload`` on the node's channel; the stop function."""
        return self.backend.listener.subscribe(self.channel, payload, callback)

    def hear_names(self, callback: Callable[[str | None], None]) -> Callable[[], None]:
        """Call ``callback`` with each changed name (``s<name>``), None after a reconnect."""
        return self.backend.listener.subscribe_prefix(self.channel, "s", callback)

    def reap_now(self) -> None:
        """Let the database end what is due on the node now (a reap)."""
        self.backend.reaper.due(self.node, 0.0)

    @property
    def notifications(self) -> bool:
        """Whether notifications reach this client."""
        return self.backend.notifications

    @property
    def max_prefix_watches_per_node(self) -> int:
        """How many prefix watches the node may have armed (the URL's option)."""
        return self.backend.options.max_prefix_watches_per_node

    async def node_config(self) -> NodeConfig:
        """The node's settings, read now."""
        return await self.backend.node_config(self.node)

    def secret(self) -> bytes:
        """The session's secret (every call of it carries it)."""
        return self._secret

    @property
    def recheck(self) -> float | None:
        """Seconds between re-checks of a waiter (None: notifications reach this client)."""
        return None if self.backend.notifications else self.backend.options.recheck_interval

    def joining(self, name: str) -> contextlib.AbstractAsyncContextManager[None]:
        """Held while a request of this client joins ``name``'s queue (the backend's)."""
        return self.backend.joining(self.node, name)

    # -- liveness ------------------------------------------------------------------

    def confirmed_at(self) -> float:
        """The send time of the last heartbeat (or open) the database answered."""
        return self._confirmed

    async def heartbeat(self) -> None:
        """Move the row's deadline, or hear why the session ended (told to the session)."""
        sent_at = self._loop.time()
        answer = await self.caller.call(
            "heartbeat", [self.sid, self._secret, self.seq], within=self.window
        )
        ended = answer.get("ended")
        if ended is None:
            self._confirmed = max(self._confirmed, sent_at)
            self.backend.reaper.due(self.node, answer.get("next"))
        elif ended == "dropped":
            self.session.dropped()
        elif ended == "closed":
            self.session.lose(SessionClosedError(f"session {self.sid} was closed"))
        elif ended == "killed":
            self.session.lose(SessionExpiredError(killed_message(self.sid)))
        elif ended == "taken":
            self.session.lose(
                SessionExpiredError(f"session {self.sid} was taken over by a resumed client")
            )
        else:
            self.session.lose(
                SessionExpiredError(f"session {self.sid} expired: its recovery window passed")
            )

    def _ask(self) -> None:
        """A notification about this session or its node: ask the database now."""
        if self.session.ended is None:
            self.session.spawn(self.heartbeat())

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
        session = self.session
        session.check_alive()
        calling = asyncio.ensure_future(
            self.caller.call(
                function,
                [self.sid, self._secret, self.seq, *args],
                idempotent=idempotent,
                within=self.retry_window(),
            )
        )
        calling.add_done_callback(_retrieved)
        ending = session.ending()
        try:
            await first_done(calling, ending)
        except asyncio.CancelledError:
            calling.cancel()  # at once if not sent; else when answered
            await first_done(calling, ending)
            raise
        if not calling.done():
            session.check_alive()
        try:
            return calling.result()
        except LostError as error:
            if isinstance(error, SessionExpiredError):
                self.reap_now()  # let the database end it now
            with contextlib.suppress(TenureError):
                await self.heartbeat()  # says why (dropped, expired, taken over)
            ended = session.ended
            if ended is not None:
                raise type(ended)(*ended.args) from None
            session.lose(error)
            raise

    async def read_now(self, function: str, *args: object) -> Any:
        """A function that reads, without the session's fence, tried until the session's
        local deadline."""
        return await self.caller.call(function, list(args), within=self.retry_window())

    async def call_unfenced(self, function: str, *args: object) -> None:
        """A function with the session's id and secret (no ``seq``), bounded by
        connect_timeout: a registration's removal, best effort."""
        await self.caller.call(function, [self.sid, self._secret, *args])

    # -- holds lost -------------------------------------------------------------------

    def _deleted(self, name: str | None) -> None:
        """``d<name>``: a semaphore was deleted by force (None: any may have been)."""
        held = {place[0] for place in self.session.ledger.held}
        for gone in sorted(held) if name is None else [name] if name in held else []:
            self.session.spawn(self.check_holds(gone))

    async def check_holds(self, name: str | None, ended: str | None = None) -> None:
        """Holds of ``name`` (None: of every name, after a lease TTL ran out, or ended
        as ``ended`` says: its max_hold) that the database no longer has are lost.

        Only grants held before the read was sent are judged: one granted while it
        was on its way is missing from what it read (fault suite: such a grant was
        declared lost, its hold number reused, and the next acquire restated the
        owner row the database still had, old token and all). Holds being
        restated are left to their request."""
        ledger = self.session.ledger
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
                    else f"the grant of {held_name!r} ended: its lease ran out (its TTL "
                    "passed without a renewal), or it was handed off to another session"
                    if ended is None
                    else f"the lease of {held_name!r} ended: {ended}"
                )
                self.session.grant_lost(held_name, hold, grant.token, LeaseLostError(message))

    def grants_gone(self, name: str) -> None:
        """``name`` was deleted by force: every hold of it (not being restated) is lost."""
        ledger = self.session.ledger
        busy = {pending.place for pending in ledger.pending.values()}
        message = f"semaphore {name!r} was deleted"
        for (held_name, hold), grant in list(ledger.held.items()):
            if held_name == name and (name, hold) not in busy:
                self.session.grant_lost(name, hold, grant.token, LeaseLostError(message))

    def tell_deleted(self, name: str) -> None:
        """``name`` was deleted by force here: this client's holders of it hear it now."""
        for store in list(self.backend.sessions.values()):
            if store.node == self.node:
                store.grants_gone(name)

    # -- the end ---------------------------------------------------------------------

    def stop(self, error: LostError) -> None:
        """Stop hearing notifications, end the watches, leave the backend."""
        for stop in self._stops:
            stop()
        self._stops.clear()
        self.admin.stop(error)
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
