"""A session on PostgreSQL: a row, a heartbeat, a fence, and what it holds.

**Alive** while its client heartbeats (four times per recovery window): each
``heartbeat`` moves the row's deadline a window (2% long) past the database's
``clock_timestamp()``. After its client goes silent, the session lives until that
deadline, and then the next ``reap`` of any client of the node ends it (releasing
its holds, waking the next waiters): its client, back within the window, simply
carries on (SESSION_RECOVERY): the pool reconnects and calls are tried again.

**Loss** is heard three ways: the heartbeat's answer (``ended``), a notification
on the node's channel (``x<sid>``, ``r<sid>``, ``n``) that makes it ask at once,
and this client's own clock: a window after the *send* time of the last heartbeat
the database answered, the session is declared expired (the database cannot have
kept it longer), so the work under it is cancelled then.

**Fence**: every call carries the session's id, secret and ``seq``; a resume
ticket bumps ``seq`` (:func:`resume_session`), and the old client's next call or
heartbeat is refused, so it hears ``session_lost``.

Acquiring and waiting are in :mod:`tenure.backends.postgres._wait`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tenure._core.values import SemaphoreDescription
from tenure.backends._base import Grant, HeldGrant, SessionListener, SessionTicket
from tenure.backends._store_listing import killed_message
from tenure.backends._store_session import StoreSession
from tenure.backends.postgres import _admin, _wait
from tenure.backends.postgres._watch import PgWatch
from tenure.errors import (
    LeaseLostError,
    LostError,
    SessionClosedError,
    SessionExpiredError,
    TenureError,
    UnavailableError,
)

if TYPE_CHECKING:
    from tenure.backends.postgres import PgBackend

__all__ = ["PgSession"]

log = logging.getLogger("tenure.postgres")

#: Heartbeats per recovery window.
BEATS_PER_WINDOW = 4

#: Seconds between two tries of a release the database did not answer.
UNANSWERED_PAUSE = 0.1


class PgSession(StoreSession[Grant]):
    """A :class:`~tenure.backends._base.BackendSession` on PostgreSQL (module docstring)."""

    def __init__(
        self,
        backend: PgBackend,
        node: str,
        session_id: int,
        secret: bytes,
        seq: int,
        window: float,
        listener: SessionListener,
        *,
        confirmed_at: float,
    ) -> None:
        self.log = log
        self.backend = backend
        self.caller = backend.caller
        self.node = node
        self.sid = session_id
        self.secret = secret
        self.seq = seq
        self.window = window
        self.listener = listener
        self.channel = backend.listener_channel(node)
        self.ended: LostError | None = None
        #: What a wait fails with once the session ended (NotFound if the node was dropped).
        self.wait_error: TenureError | None = None
        self.lost = asyncio.Event()
        #: Grants by (name, hold); holds with a request in flight.
        self.held: dict[tuple[str, int], Grant] = {}
        #: When each hold was granted, counted in grants: a read of the database's
        #: holds judges only the grants made before it was sent (:meth:`check_holds`).
        self.grants = 0
        self.granted_as: dict[tuple[str, int], int] = {}
        self.busy: set[tuple[str, int]] = set()
        self.watches = 0
        self._confirmed = confirmed_at
        self._tasks: set[asyncio.Future[Any]] = set()
        self._loop = asyncio.get_running_loop()
        self._timer: asyncio.TimerHandle | None = None
        self._arm_deadline()
        self._stops: list[Callable[[], None]] = [
            backend.listener.subscribe(self.channel, f"x{session_id}", self._ask),
            backend.listener.subscribe(self.channel, f"r{session_id}", self._ask),
            backend.listener.subscribe(self.channel, "n", self._ask),
            backend.listener.subscribe(
                self.channel, f"l{session_id}", lambda: self.spawn(self.check_holds(None))
            ),
            # kill_session started a lock-delay: reap now, which names its end.
            backend.listener.subscribe(self.channel, "t", lambda: backend.reaper.due(node, 0.0)),
        ]
        self._deleted: dict[str, Callable[[], None]] = {}
        self._beating = asyncio.ensure_future(self._heartbeats())

    @property
    def session_id(self) -> int:
        """The session's id (its row's)."""
        return self.sid

    @property
    def recovery_window(self) -> float:
        """The window in force, in seconds."""
        return self.window

    # -- tickets -------------------------------------------------------------------

    def ticket(self) -> SessionTicket:
        """What a later process needs to take this session back (its id and secret)."""
        self.check_alive()
        return SessionTicket("postgres", self.node, self.sid, self.secret)

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

    # -- liveness ------------------------------------------------------------------

    async def _heartbeats(self) -> None:
        interval = self.window / BEATS_PER_WINDOW
        while self.ended is None:
            await asyncio.sleep(interval)
            try:
                await self.beat()
            except TenureError as error:  # unreachable: the local deadline decides
                log.info("session %d: heartbeat failed: %s", self.sid, error)

    async def beat(self) -> None:
        """One heartbeat: move the deadline, or hear that the session ended."""
        if self.ended is not None:
            return
        sent_at = self._loop.time()
        answer = await self.caller.call(
            "heartbeat", [self.sid, self.secret, self.seq], within=self.window
        )
        ended = answer.get("ended")
        if ended is None:
            self._confirmed = max(self._confirmed, sent_at)
            self.backend.reaper.due(self.node, answer.get("next"))
        elif ended == "dropped":
            self.dropped()
        elif ended == "closed":
            self.lose(SessionClosedError(f"session {self.sid} was closed"))
        elif ended == "killed":
            self.lose(SessionExpiredError(killed_message(self.sid)))
        elif ended == "taken":
            self.lose(SessionExpiredError(f"session {self.sid} was taken over by a resumed client"))
        else:
            self.lose(
                SessionExpiredError(f"session {self.sid} expired: its recovery window passed")
            )

    def _ask(self) -> None:
        """A notification about this session or its node: ask the database now."""
        if self.ended is None:
            self.spawn(self.beat())

    def _deadline_span(self) -> float:
        return self.window

    def _deadline_passed(self) -> None:
        self.lose(
            SessionExpiredError(
                f"session {self.sid}: the database has not answered a heartbeat for its "
                f"recovery window ({self.window:g}s); it may have expired it"
            )
        )

    def _end(self, error: LostError, wait_error: TenureError) -> None:
        self.ended = error
        self.wait_error = wait_error
        self.lost.set()
        self._disarm_deadline()
        if self._beating is not asyncio.current_task():
            self._beating.cancel()
        for stop in [*self._stops, *self._deleted.values()]:
            stop()
        self._stops.clear()
        self._deleted.clear()
        self.backend.session_ended(self)

    # -- calls ---------------------------------------------------------------------

    def retry_window(self) -> float:
        """How long a call may keep trying: until the session's local deadline."""
        return max(0.1, self._confirmed + self.window - self._loop.time())

    async def call(self, function: str, *args: object, idempotent: bool = True) -> Any:
        """A function of this session (its fence first); a refusal that says the
        session is gone loses it."""
        self.check_alive()
        within = self.retry_window()
        try:
            return await self.caller.call(
                function,
                [self.sid, self.secret, self.seq, *args],
                idempotent=idempotent,
                within=within,
            )
        except LostError as error:
            if isinstance(error, SessionExpiredError):
                self.backend.reaper.due(self.node, 0.0)  # let the database end it now
            with contextlib.suppress(TenureError):
                await self.beat()  # says why (dropped, expired, taken over)
            if self.ended is not None:
                raise type(self.ended)(*self.ended.args) from None
            self.lose(error)
            raise

    # -- acquire, restate, release, renew -------------------------------------------

    async def acquire(
        self, name: str, *, count: int, data: bytes, timeout: float | None, ephemeral: bool
    ) -> Grant | None:
        """See :meth:`tenure.backends._base.BackendSession.acquire`."""
        self.check_alive()
        hold = self.free_hold(name)
        return await _wait.request(self, name, hold, count, data, timeout, ephemeral, False)

    async def restate(
        self, name: str, grant: Grant, *, count: int, data: bytes, timeout: float | None
    ) -> Grant | None:
        """See :meth:`tenure.backends._base.BackendSession.restate`."""
        self.check_alive()
        return await _wait.request(self, name, grant.hold, count, data, timeout, False, True)

    async def release(self, name: str, grant: Grant) -> bool:
        """See :meth:`tenure.backends._base.BackendSession.release`."""
        self.check_alive()
        self.forget(name, grant.hold)
        return await self.release_hold(name, grant.hold)

    async def release_hold(self, name: str, hold: int) -> bool:
        """Release ``hold`` of ``name``: sent again until the database answers, or the
        session ends (which raises its loss).

        Never given up while the session may live on (guarantee 6c): a release left
        undone (its tries ran out while a heartbeat got through) would leave the owner
        row, and the session's next acquire of the name, on the same hold number, would
        restate it and return its old token again. So the hold's number stays taken
        until the release is answered, and the tries run in a task of their own: a call
        on a stalled link can be neither cancelled nor bounded from here (psycopg's
        cancel request stalls too), so the caller waits for the answer or the session's
        end, whichever comes first, and a call still hanging then is left to finish.
        """
        place = (name, hold)
        self.busy.add(place)
        tries = asyncio.ensure_future(self._release_until_answered(name, hold))
        tries.add_done_callback(lambda _: self.busy.discard(place))
        tries.add_done_callback(_retrieved)
        self.keep(tries)
        ended = asyncio.ensure_future(self.lost.wait())
        try:
            await asyncio.wait({tries, ended}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            ended.cancel()
        if tries.done():
            return tries.result()
        assert self.ended is not None  # ``ended`` is set before ``lost`` is
        raise type(self.ended)(*self.ended.args)

    async def _release_until_answered(self, name: str, hold: int) -> bool:
        while True:
            try:
                return bool(await self.call("release", name, hold))
            except UnavailableError as error:
                log.info("session %d: release of %r not answered, again: %s", self.sid, name, error)
                await asyncio.sleep(UNANSWERED_PAUSE)

    async def renew(self, name: str, grant: Grant) -> float:
        """Restart the lease of a grant that has a TTL (the node's ``default_lease``)."""
        self.check_alive()
        ttl = float(await self.call("renew", name, grant.hold))
        if ttl < 0:  # ran out already, by the database's clock: its reap ends it now
            self.backend.reaper.due(self.node, 0.0)
            raise LeaseLostError(f"the lease of {name!r} ran out before it was renewed")
        return ttl

    def granted(
        self, name: str, hold: int, token: int, count: int, ttl: float | None = None
    ) -> Grant:
        """Keep a grant (and hear of its semaphore's forced delete)."""
        grant = Grant(token, count, ttl, hold)
        self.held[name, hold] = grant
        self.grants += 1
        self.granted_as[name, hold] = self.grants
        if name not in self._deleted:
            self._deleted[name] = self.backend.listener.subscribe(
                self.channel, "d" + name, lambda: self.spawn(self.check_holds(name))
            )
        return grant

    def forget(self, name: str, hold: int) -> None:
        """A hold is gone (released, lost): stop hearing of its semaphore if it was the last."""
        self.held.pop((name, hold), None)
        self.granted_as.pop((name, hold), None)
        if not any(key[0] == name for key in self.held):
            stop = self._deleted.pop(name, None)
            if stop is not None:
                stop()

    def grants_gone(self, name: str) -> None:
        """``name`` was deleted by force: every hold of it (not being restated) is lost."""
        message = f"semaphore {name!r} was deleted"
        for (held_name, hold), grant in list(self.held.items()):
            if held_name == name and (name, hold) not in self.busy:
                self.forget(name, hold)
                self.listener.lease_lost(name, grant.token, LeaseLostError(message))

    async def check_holds(self, name: str | None) -> None:
        """Holds of ``name`` (None: of every name, after a lease TTL ran out) that the
        database no longer has are lost.

        Only holds granted before the read was sent are judged: one granted while it
        was on its way is missing from what it read (fault suite: such a grant was
        declared lost, its hold number reused, and the next acquire restated the
        owner row the database still had, old token and all)."""
        sent_after = self.grants
        rows = await self.call("holds")
        there = {(row[0], int(row[1])): int(row[2]) for row in rows}
        for (held_name, hold), grant in list(self.held.items()):
            if (name is not None and held_name != name) or (held_name, hold) in self.busy:
                continue
            if self.granted_as.get((held_name, hold), 0) > sent_after:
                continue
            if there.get((held_name, hold)) != grant.token:
                self.forget(held_name, hold)
                message = (
                    f"semaphore {held_name!r} was deleted"
                    if name is not None
                    else f"the lease of {held_name!r} ran out (its TTL passed without a renewal)"
                )
                self.listener.lease_lost(held_name, grant.token, LeaseLostError(message))

    # -- semaphores (tenure.backends.postgres._admin) --------------------------------

    async def create_semaphore(self, name: str, limit: int, data: bytes) -> None:
        """See :meth:`tenure.backends._base.BackendSession.create_semaphore`."""
        await self.call("create_semaphore", name, limit, data, idempotent=False)

    async def update_semaphore(self, name: str, data: bytes) -> None:
        """See :meth:`tenure.backends._base.BackendSession.update_semaphore`."""
        await self.call("update_semaphore", name, data)

    async def delete_semaphore(self, name: str, force: bool) -> None:
        """See :meth:`tenure.backends._base.BackendSession.delete_semaphore`."""
        await _admin.delete_semaphore(self, name, force)

    async def describe_semaphore(
        self, name: str, *, owners: bool, waiters: bool
    ) -> SemaphoreDescription:
        """See :meth:`tenure.backends._base.BackendSession.describe_semaphore`."""
        return await _admin.read(self, name, owners=owners, waiters=waiters, missing_ok=False)

    async def watch_semaphore(
        self, name: str, *, data: bool, owners: bool, waiters: bool
    ) -> PgWatch:
        """See :meth:`tenure.backends._base.BackendSession.watch_semaphore`."""
        return await _admin.watch_semaphore(self, name, data=data, owners=owners, waiters=waiters)

    # -- ending ---------------------------------------------------------------------

    async def close(self) -> None:
        """See :meth:`tenure.backends._base.BackendSession.close`."""
        if self.ended is not None:
            return
        closed = SessionClosedError(f"session {self.sid} was closed")
        self._end(closed, closed)
        # Shielded: a body that closes its own session is cancelled meanwhile.
        await asyncio.shield(asyncio.ensure_future(self._close_row()))

    async def _close_row(self) -> None:
        with contextlib.suppress(TenureError):  # unreachable: the window ends it
            # Bounded by connect_timeout: a client closing while the database is down
            # does not wait a whole window per session (the window ends it anyway).
            await self.caller.call("close_session", [self.sid, self.secret, self.seq])

    def keep(self, task: asyncio.Future[Any]) -> None:
        """Keep a reference to background work that is already running."""
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def _retrieved(task: asyncio.Future[Any]) -> None:
    """Mark a background task's error as seen (its caller, if any, got it already)."""
    if not task.cancelled():
        task.exception()
