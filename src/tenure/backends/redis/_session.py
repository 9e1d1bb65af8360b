"""A session on Redis: a record the functions keep, a heartbeat, and what it holds.

**Liveness.** The session's record ``<base>s:<sid>`` lives until Redis's clock
passes its deadline, ``window`` seconds after the last heartbeat (a third of the
window apart); the first call after that (anyone's, or the ``tick`` of a client
that waits) ends it: it releases all the session held, withdraws its requests,
starts lock-delay, and pushes the news. A client that cannot reach Redis keeps
sending heartbeats, and carries on if one gets through within the window
(SESSION_RECOVERY); and, as etcd:// and tenure:// clients do, it declares the
session expired on its own clock a window after the send time of the last
heartbeat Redis answered: Redis cannot have kept it longer.

**Fence.** Every call carries the session's secret and epoch; a call of a stale
client (one whose session another process took over) is refused.

**Calls** go out with a request key, and the functions keep their answers for a
while: a call sent again after its connection failed is answered as the first
try was, never applied twice (:meth:`Connection.retrying`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Final

from tenure._core.values import SemaphoreDescription
from tenure.backends._base import Grant, HeldGrant, SessionListener, SessionTicket
from tenure.backends._ledger import Ledger
from tenure.backends.redis import _recover
from tenure.backends.redis._codec import decode_count as _count
from tenure.backends.redis._codec import decode_description, encode_count
from tenure.backends.redis._codec import decode_ttl as _ttl
from tenure.backends.redis._conn import Reply
from tenure.backends.redis._watch import RedisWatch
from tenure.errors import (
    LeaseLostError,
    LostError,
    NotFoundError,
    SessionClosedError,
    SessionExpiredError,
    TenureError,
    UnavailableError,
    error_from_code,
)

if TYPE_CHECKING:
    from tenure.backends.redis import RedisBackend
    from tenure.backends.redis._link import NodeLink

__all__ = ["RedisSession"]

log = logging.getLogger("tenure.redis")

#: Pause between two tries of a change sent until it is answered (seconds), once the
#: retries within the session's deadline gave up (:meth:`RedisSession._until_answered`).
UNANSWERED_PAUSE: Final = 0.2


class RedisSession:
    """A :class:`~tenure.backends._base.BackendSession` on Redis (module docstring)."""

    def __init__(
        self,
        backend: RedisBackend,
        link: NodeLink,
        node: str,
        session_id: int,
        listener: SessionListener,
        *,
        secret: str,
        epoch: int,
        window: float,
        confirmed_at: float,
    ) -> None:
        self.backend = backend
        self.conn = backend.conn
        self.link = link
        self.base = link.base
        self.node = node
        self._sid = session_id
        self.sid_text = str(session_id)
        self.secret = secret
        self.epoch = epoch
        self.fence = f"{secret}:{epoch}"
        self.window = window
        self.listener = listener
        self.ledger = Ledger(session_id)
        self.ended: LostError | None = None
        #: Armed watches by semaphore name (each is poked by the name's pushes).
        self.watches: dict[str, set[RedisWatch]] = {}
        self.has_leases = False
        #: What a resume took back: (name, grant, data) of each hold.
        self.resumed_holds: list[tuple[str, Grant, bytes]] = []
        # Request ids are the session's, across its owners: a resumed session (a new
        # epoch) never reuses one (a retry is recognised by its id).
        self._requests = itertools.count((epoch << 32) + 1)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._loop = asyncio.get_running_loop()
        self._confirmed = confirmed_at
        self._heartbeat = asyncio.create_task(self._beat())

    @property
    def session_id(self) -> int:
        """The session's id (per node, never reused: a counter Redis keeps)."""
        return self._sid

    @property
    def recovery_window(self) -> float:
        """The window in force: the one asked for, or the node's default."""
        return self.window

    # -- liveness --------------------------------------------------------------------

    @property
    def deadline(self) -> float:
        """When, on this loop's clock, Redis may have expired the session."""
        return self._confirmed + self.window

    async def _beat(self) -> None:
        period = self.window / 3
        while self.ended is None:
            wait = period if self._loop.time() - self._confirmed < period else 0.0
            await asyncio.sleep(min(wait, max(0.0, self.deadline - self._loop.time())))
            if self.ended is not None:
                return
            if self._loop.time() >= self.deadline:
                self.lose(
                    SessionExpiredError(
                        f"session {self._sid}: Redis ({self.conn.endpoint}) has not answered a "
                        f"heartbeat for its window ({self.window:g}s); it may have expired it"
                    )
                )
                return
            sent = self._loop.time()
            try:
                reply = await asyncio.wait_for(
                    self.conn.call("heartbeat", self.base, self.sid_text, self.fence, ""),
                    timeout=max(0.001, self.deadline - sent),
                )
            except (UnavailableError, TimeoutError) as error:
                log.info("session %d: heartbeat failed: %s", self._sid, error)
                await asyncio.sleep(min(0.2, period))
                continue
            except LostError as error:
                self.lose(error)
                return
            except TenureError as error:
                log.warning("session %d: heartbeat refused: %s", self._sid, error)
                await asyncio.sleep(min(0.2, period))
                continue
            self._confirmed = max(self._confirmed, sent)
            self.link.heard(reply, self)

    def waits_for_deadlines(self) -> bool:
        """Whether this session waits for a deadline of the node to pass (see the link)."""
        return self.ended is None and bool(self.ledger.pending or self.watches or self.has_leases)

    # -- pushes ----------------------------------------------------------------------

    def hear(self, push: dict[str, bytes]) -> None:
        """One push from the inbox for this session."""
        kind = push["k"]
        if kind == b"G":
            grant = Grant(
                int(push["tok"]), _count(push["cnt"]), _ttl(push["ttl"]), int(push["hold"])
            )
            if grant.lease_ttl is not None:
                self.has_leases = True
            self.ledger.granted(int(push["req"]), grant)
        elif kind == b"F":
            error = error_from_code(int(push["code"]), push["msg"].decode())
            self.hear_failed(int(push["req"]), error)
        elif kind == b"L":
            lost = error_from_code(int(push["code"]), push["msg"].decode())
            assert isinstance(lost, LostError)
            self.hear_lost(push["name"].decode(), int(push["hold"]), int(push["tok"]), lost)
        elif kind == b"E":
            ended = error_from_code(int(push["code"]), push["msg"].decode())
            assert isinstance(ended, LostError)
            self.lose(ended)
        elif kind == b"W":
            for watch in list(self.watches.get(push["name"].decode(), ())):
                watch.poke()
        elif kind == b"T":  # a deadline of the node this session waits for (kill_session)
            self.link.due_at(float(push["at"]), self)

    def hear_failed(self, request_id: int, error: BaseException) -> None:
        """The queued request ``request_id`` ended without a grant."""
        self.ledger.failed(request_id, error)

    def hear_lost(self, name: str, hold: int, token: int, error: LostError) -> None:
        """The grant ``token`` of hold ``hold`` on ``name`` ended (told once)."""
        if self.ledger.lose((name, hold), token, error):
            self.listener.lease_lost(name, token, error)

    def lose(self, error: LostError) -> None:
        """The session is lost: end it and tell the listener (once)."""
        if self.ended is not None:
            return
        self._end(error)
        self.listener.session_lost(error)

    def _end(self, error: LostError) -> None:
        self.ended = error
        self.ledger.end(error)
        for watches in self.watches.values():
            for watch in watches:
                watch.fail(error)
        self.watches.clear()
        if self._heartbeat is not asyncio.current_task():
            self._heartbeat.cancel()
        self.link.sessions.pop(self._sid, None)
        self.backend.session_ended(self)

    def check_alive(self) -> None:
        """Raise the session's loss error if it ended."""
        if self.ended is not None:
            raise type(self.ended)(*self.ended.args)

    # -- calls -------------------------------------------------------------------------

    def request_key(self) -> str:
        """A key no other request of any client uses (for the answers kept for retries)."""
        return self.backend.request_key()

    async def call(self, op: str, key: str, *args: str | bytes | int) -> Any:
        """Call ``op`` for this session (retried until its deadline); its result."""
        self.check_alive()
        try:
            reply: Reply = await self.conn.retrying(
                self.deadline, op, self.base, self.sid_text, self.fence, key, *args
            )
        except LostError as error:
            self.lose(error)
            raise
        self.link.heard(reply, self)
        if reply.pushes:
            self.link.take_inline(reply.pushes)
        return reply.result

    async def _until_answered(self, op: str, key: str, *args: str | bytes | int) -> Any:
        """:meth:`call`, sent again (same request key: applied once) until Redis answers or
        the session ends, which raises its loss.

        For a change that must not be lost with a connection (guarantee 6c): a release
        given up while the session lives on (its heartbeat got through just after)
        would leave the hold in Redis, and the session's next acquire of the name, on
        the same hold number, would restate it and return its old token again. The
        session's end bounds the wait: its heartbeat ends it a window after the last
        answer, and :meth:`call` then raises the loss.
        """
        while True:
            try:
                return await self.call(op, key, *args)
            except UnavailableError as error:
                log.info("session %d: %s not answered, again: %s", self._sid, op, error)
                await asyncio.sleep(UNANSWERED_PAUSE)

    def spawn(self, coro: Coroutine[Any, Any, object]) -> None:
        """Run ``coro`` in the background (errors are logged: there is no caller)."""

        async def run() -> None:
            try:
                await coro
            except TenureError as error:
                log.info("session %d: background work failed: %s", self._sid, error)

        task = asyncio.ensure_future(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- acquire, restate, release, renew -------------------------------------------

    async def acquire(
        self, name: str, *, count: int, data: bytes, timeout: float | None, ephemeral: bool
    ) -> Grant | None:
        """See :meth:`tenure.backends._base.BackendSession.acquire`."""
        self.check_alive()
        hold = self.ledger.free_hold(name)
        return await self._acquire(name, hold, count, data, timeout, ephemeral)

    async def restate(
        self, name: str, grant: Grant, *, count: int, data: bytes, timeout: float | None
    ) -> Grant | None:
        """See :meth:`tenure.backends._base.BackendSession.restate`."""
        self.check_alive()
        # Not ephemeral: a semaphore deleted meanwhile must not be made anew.
        return await self._acquire(name, grant.hold, count, data, timeout, False)

    async def _acquire(
        self, name: str, hold: int, count: int, data: bytes, timeout: float | None, ephemeral: bool
    ) -> Grant | None:
        request_id = next(self._requests)
        pending = self.ledger.open(request_id, name, hold)
        place = (name, hold)
        try:
            try:
                async with self.backend.joining(self.base, name):
                    result = await self.call(
                        "acquire",
                        "",  # the request id makes a retry safe (lua/50_semaphore_ops.lua, acquire)
                        name,
                        hold,
                        request_id,
                        encode_count(count),
                        data,
                        "" if timeout is None else repr(float(timeout)) if timeout else "0",
                        "1" if ephemeral else "0",
                    )
            except (asyncio.CancelledError, UnavailableError):
                # Applied or not, granted or queued: undo whatever it did.
                await asyncio.shield(self._withdraw(place, request_id))
                raise
            status = result[0]
            if status == b"G":
                grant = Grant(int(result[1]), count, _ttl(result[2]), hold)
                if grant.lease_ttl is not None:
                    self.has_leases = True
                return self.ledger.take(request_id, place, grant)
            if status == b"B":
                return None
            pending.queued = True
            try:
                grant = await pending.future
            except asyncio.CancelledError:
                await asyncio.shield(self._withdraw(place, request_id))
                raise
            return self.ledger.take(request_id, place, grant)
        finally:
            self.ledger.close(request_id)

    async def _withdraw(self, place: tuple[str, int], request_id: int) -> None:
        """The asker gave up: withdraw the request, or release a grant that raced it
        (unless the hold was held before: a cancelled upgrade keeps it)."""
        if self.ended is not None:
            return
        name, hold = place
        kept = "1" if place in self.ledger.held else "0"
        with contextlib.suppress(TenureError):
            await self.call("withdraw", "", name, hold, request_id, kept)

    async def release(self, name: str, grant: Grant) -> bool:
        """See :meth:`tenure.backends._base.BackendSession.release`."""
        self.check_alive()
        ledger = self.ledger
        place = (name, grant.hold)
        token = ledger.held.pop(place, None)
        if token is not None:
            ledger.releasing[place] = token
        try:
            return bool(await self._until_answered("release", self.request_key(), name, grant.hold))
        finally:
            if token is not None and ledger.releasing.get(place) == token:
                del ledger.releasing[place]

    async def renew(self, name: str, grant: Grant) -> float:
        """See :meth:`tenure.backends._base.BackendSession.renew`."""
        return float(await self.call("renew", "", name, grant.hold))

    # -- semaphores -------------------------------------------------------------------

    async def create_semaphore(self, name: str, limit: int, data: bytes) -> None:
        """See :meth:`tenure.backends._base.BackendSession.create_semaphore`."""
        await self.call("create_semaphore", self.request_key(), name, encode_count(limit), data)

    async def update_semaphore(self, name: str, data: bytes) -> None:
        """See :meth:`tenure.backends._base.BackendSession.update_semaphore`."""
        await self.call("update_semaphore", "", name, data)

    async def delete_semaphore(self, name: str, force: bool) -> None:
        """See :meth:`tenure.backends._base.BackendSession.delete_semaphore`."""
        message, failed, lost = await self.call(
            "delete_semaphore", self.request_key(), name, "1" if force else "0"
        )
        # This client's own sessions hear it now (their pushes come later, and count once).
        text = message.decode()
        for sid, _hold, request_id in failed:
            waiting = self.backend.sessions.get((self.base, int(sid)))
            if waiting is not None:
                waiting.hear_failed(int(request_id), NotFoundError(text))
        for sid, hold, token in lost:
            holder = self.backend.sessions.get((self.base, int(sid)))
            if holder is not None:
                holder.hear_lost(name, int(hold), int(token), LeaseLostError(text))

    async def describe_semaphore(
        self, name: str, *, owners: bool, waiters: bool
    ) -> SemaphoreDescription:
        """See :meth:`tenure.backends._base.BackendSession.describe_semaphore`."""
        raw = await self.call(
            "describe_semaphore", "", name, "1" if owners else "0", "1" if waiters else "0"
        )
        description = decode_description(name, raw)
        if not description.exists:
            raise NotFoundError(f"semaphore {name!r} does not exist")
        return description

    async def watch_semaphore(
        self, name: str, *, data: bool, owners: bool, waiters: bool
    ) -> RedisWatch:
        """See :meth:`tenure.backends._base.BackendSession.watch_semaphore`."""
        watch = RedisWatch(self, name, data=data, owners=owners, waiters=waiters)
        await watch.start()
        return watch

    # -- reading the state back, tickets (tenure.backends.redis._recover) ------------

    async def reconcile(self) -> None:
        """Read what Redis keeps for this session and agree with it (the Ledger's rules)."""
        await _recover.reconcile(self)

    def ticket(self) -> SessionTicket:
        """See :meth:`tenure.backends._base.BackendSession.ticket` (the secret: the
        session's own, which every call of it carries)."""
        self.check_alive()
        return SessionTicket("redis", self.node, self._sid, bytes.fromhex(self.secret))

    async def holds(self) -> list[HeldGrant]:
        """See :meth:`tenure.backends._base.BackendSession.holds` (read from Redis now)."""
        return await _recover.holds(self)

    def take_back(self, holds: Any) -> None:
        """The holds a resume found (``resume_session`` in lua/40_session_ops.lua)."""
        _recover.take_back(self, holds)

    # -- the end ---------------------------------------------------------------------

    async def close(self) -> None:
        """See :meth:`tenure.backends._base.BackendSession.close`."""
        if self.ended is not None:
            return
        self._end(SessionClosedError(f"session {self._sid} was closed"))
        try:
            await asyncio.shield(
                self.conn.retrying(None, "close_session", self.base, self.sid_text, self.fence)
            )
        except TenureError as error:  # Redis ends it when its window passes
            log.info("session %d: close not confirmed: %s", self._sid, error)
