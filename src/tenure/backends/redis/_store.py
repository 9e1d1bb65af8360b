"""A session on Redis: the engine's commands as Redis functions, and their pushes.

The functions in ``lua/`` keep the engine's rules in Redis, so a Redis session is
an engine-style session (:class:`~tenure.backends._engine.CommandStore`) whose
channel is :meth:`RedisStore.call`: each command the session sends becomes one
function call, and each push the functions leave in this client's inbox
(:mod:`._inbox`) is decoded into the engine's effect and delivered as an engine
push is.

**Liveness.** The session's record ``<base>s:<sid>`` lives until Redis's clock
passes its deadline, ``window`` seconds after the last heartbeat; the first call
after that (anyone's, or the ``tick`` of a client that waits) ends it: it
releases all the session held, withdraws its requests, starts lock-delay, and
pushes the news. A client that cannot reach Redis keeps sending heartbeats, and
carries on if one gets through within the window (SESSION_RECOVERY); the local
deadline (the session's rule) counts from the send time of the last heartbeat
Redis answered.

**Fence.** Every call carries the session's secret and epoch; a call of a stale
client (one whose session another process took over) is refused.

**Calls** are sent again while the connection fails (:meth:`Connection.retrying`).
One that must not be applied twice carries a request key, whose answer the
functions keep for a while (a retry is answered as the first try was), or an id
that makes a second try find the first one's work (an acquire's or a withdrawal's
request id, a claim's id).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from contextlib import AbstractAsyncContextManager
from typing import Any, Final, Protocol, TypeVar, cast

from tenure._core import (
    Acquire,
    AcquireResult,
    AcquireStatus,
    CancelAcquire,
    Command,
    DescribeSession,
    Granted,
    RateReservation,
    Release,
    SessionState,
)
from tenure._core.claims import ClaimRecord
from tenure._core.values import SemaphoreDescription
from tenure.backends._base import Grant, HeldGrant, PrefixWatchStream
from tenure.backends._engine import CommandStore
from tenure.backends._ledger import Pending
from tenure.backends._prefix import PrefixFeed
from tenure.backends._store import QUEUED, Enqueued, Queued, Withdrawal
from tenure.backends.redis._admin import RedisAdmin
from tenure.backends.redis._codec import (
    decode_effect,
    decode_holds,
    decode_session_state,
    encode_count,
    encode_timeout,
)
from tenure.backends.redis._codec import decode_ttl as _ttl
from tenure.backends.redis._conn import Connection, Reply
from tenure.backends.redis._inbox import NodeInbox
from tenure.backends.redis._release import KeyedReleases
from tenure.backends.redis._watch import RedisWatch
from tenure.errors import (
    LostError,
    TenureError,
)

R = TypeVar("R")

__all__ = ["RedisHome", "RedisStore"]

log = logging.getLogger("tenure.redis")

#: Heartbeats per recovery window.
BEATS_PER_WINDOW: Final = 3

#: What each status of the acquire function means.
_STATUS: Final = {b"G": AcquireStatus.GRANTED, b"B": AcquireStatus.BUSY, b"Q": AcquireStatus.QUEUED}


class RedisHome(Protocol):
    """What a session on Redis shares with the other sessions of its client."""

    @property
    def conn(self) -> Connection:
        """The connection to Redis."""

    @property
    def sessions(self) -> dict[tuple[str, int], RedisStore]:
        """The client's live sessions, by (node base, session id)."""

    def request_key(self) -> str:
        """A request key unique across clients (the answers kept for retries)."""

    def joining(self, base: str, name: str) -> AbstractAsyncContextManager[None]:
        """Held while a request of this client joins ``name``'s queue."""

    def session_ended(self, store: RedisStore) -> None:
        """A session ended (closed or lost): forget it."""


class RedisStore(CommandStore):
    """A :class:`~tenure.backends._store.Store` on Redis (module docstring)."""

    def __init__(
        self,
        backend: RedisHome,
        inbox: NodeInbox,
        node: str,
        session_id: int,
        *,
        secret: str,
        epoch: int,
        window: float,
        confirmed_at: float,
    ) -> None:
        super().__init__(
            self,
            session_id,
            secret=bytes.fromhex(secret),
            seq_no=epoch,
            where=f"Redis ({backend.conn.endpoint})",
        )
        self.backend = backend
        self.conn = backend.conn
        self.inbox = inbox
        self.base = inbox.base
        self.node = node
        self.sid_text = str(session_id)
        self.fence = f"{secret}:{epoch}"
        self.window = window
        self.beat_period = window / BEATS_PER_WINDOW
        #: Armed watches by semaphore name (each is poked by the name's pushes).
        self.watches: dict[str, set[RedisWatch]] = {}
        #: Armed prefix watches' feeds, by their id (lua/57_prefix_watches.lua).
        self.prefix_watches: dict[int, PrefixFeed] = {}
        self.has_leases = False
        # Request ids are the session's, across its owners: a resumed session (a new
        # epoch) never reuses one (a retry is recognised by its id).
        self._requests = itertools.count((epoch << 32) + 1)
        self._confirmed = confirmed_at
        #: Its releases, each with a request key kept until it is answered.
        self.releases = KeyedReleases(self)
        #: Its semaphore calls.
        self.admin = RedisAdmin(self)

    # -- liveness --------------------------------------------------------------------

    def confirmed_at(self) -> float:
        """The send time of the last heartbeat (or open) Redis answered."""
        return self._confirmed

    async def heartbeat(self) -> None:
        """Move the session's deadline on Redis's clock (its end is pushed, if it ended)."""
        sent = asyncio.get_running_loop().time()
        reply = await self.conn.call("heartbeat", self.base, self.sid_text, self.fence, "")
        self._confirmed = max(self._confirmed, sent)
        self.inbox.heard(reply, self)

    def waits_for_deadlines(self) -> bool:
        """Whether this session waits for a deadline of the node to pass (see the inbox)."""
        return self.owner.ended is None and bool(
            self.owner.ledger.pending or self.watches or self.prefix_watches or self.has_leases
        )

    # -- the channel: commands as function calls ------------------------------------

    def new_request_id(self) -> int:
        """The session's next request id (unique across its owners: see ``_requests``)."""
        return next(self._requests)

    async def invoke(self, op: str, key: str, *args: str | bytes | int) -> Any:
        """Call function ``op`` for this session (sent again until its deadline); its result."""
        self.owner.check_alive()
        try:
            reply: Reply = await self.conn.retrying(
                self._confirmed + self.window,
                op,
                self.base,
                self.sid_text,
                self.fence,
                key,
                *args,
            )
        except LostError as error:
            self.owner.lose(error)
            raise
        self.heard(reply)
        return reply.result

    def heard(self, reply: Reply) -> None:
        """A call of this session was answered: the inbox hears of its node's next
        deadline and of this session's liveness, and takes the pushes it carried."""
        self.inbox.heard(reply, self)
        if reply.pushes:
            self.inbox.take_inline(reply.pushes)

    async def call(self, command: Command[R]) -> R:
        """The function call that does ``command`` (those the session sends)."""
        if isinstance(command, Acquire):
            result = await self.invoke(
                "acquire",
                "",  # the request id makes a retry safe (lua/50_semaphore_ops.lua, acquire)
                command.name,
                command.hold,
                command.request_id,
                encode_count(command.count),
                command.data,
                encode_timeout(command.timeout),
                "1" if command.ephemeral else "0",
                command.task,
                self.conn.options.deadlock_search_limit,
            )
            status = _STATUS[result[0]]
            if status is not AcquireStatus.GRANTED:
                return cast(R, AcquireResult(status))
            ttl = _ttl(result[2])
            if ttl is not None:
                self.has_leases = True
            return cast(R, AcquireResult(status, int(result[1]), command.count, ttl))
        if isinstance(command, Release):
            return cast(R, await self.releases.send(command.name, command.hold))
        if isinstance(command, CancelAcquire):
            args = (command.name, command.hold, command.request_id, "1")
            return cast(R, await self.invoke("withdraw", "", *args) == b"Q")
        if isinstance(command, DescribeSession):
            return cast(R, await self._describe_session())
        raise TypeError(f"redis:// sends no {type(command).__name__}")

    def release_now(self, name: str, hold: int) -> asyncio.Future[bool] | None:
        """See :meth:`KeyedReleases.send_now` (:class:`~tenure.backends._store.EagerRelease`)."""
        return self.releases.send_now(name, hold)

    async def enqueue(self, pending: Pending) -> Enqueued:
        """The acquire, joining the semaphore's queue in this client's order."""
        async with self.backend.joining(self.base, pending.name):
            return await super().enqueue(pending)

    async def withdraw(self, pending: Pending) -> Withdrawal:
        """Withdraw the request if it is queued; a grant that raced it is left to the
        session (the function's ``kept`` flag set: it never releases here)."""
        args = (pending.name, pending.hold, pending.request_id, "1")
        found = await self.invoke("withdraw", "", *args)
        return Withdrawal.WITHDRAWN if found == b"Q" else Withdrawal.UNKNOWN

    async def renew(self, name: str, grant: Grant) -> float:
        """Restart the grant's lease on Redis's clock."""
        return float(await self.invoke("renew", "", name, grant.hold))

    # -- pushes ----------------------------------------------------------------------

    def hear(self, push: dict[str, bytes]) -> None:
        """One push from the inbox for this session: an engine effect in Redis's encoding
        (:func:`~tenure.backends.redis._codec.decode_effect`), a watch's news, or a
        deadline of the node this session waits for (kill_session)."""
        kind = push["k"]
        if kind == b"W":
            for watch in list(self.watches.get(push["name"].decode(), ())):
                watch.poke()
        elif kind == b"P":
            feed = self.prefix_watches.get(int(push["w"]))
            if feed is not None:
                feed.put(push["name"].decode())
        elif kind == b"T":
            self.inbox.due_at(float(push["at"]), self)
        else:
            effect = decode_effect(self.session_id, push)
            if effect is None:
                return
            if isinstance(effect, Granted) and effect.lease_ttl is not None:
                self.has_leases = True
            self.deliver(effect)

    # -- semaphores (the admin's), all-or-none sets -------------------------------------

    async def create_semaphore(self, name: str, limit: int, data: bytes) -> None:
        """See :meth:`RedisAdmin.create_semaphore`."""
        await self.admin.create_semaphore(name, limit, data)

    async def update_semaphore(self, name: str, data: bytes) -> None:
        """See :meth:`RedisAdmin.update_semaphore`."""
        await self.admin.update_semaphore(name, data)

    async def swap_semaphore_data(self, name: str, expected: bytes, data: bytes) -> bool:
        """See :meth:`RedisAdmin.swap_semaphore_data`."""
        return await self.admin.swap_semaphore_data(name, expected, data)

    async def reserve_units(
        self, name: str, count: float, max_wait: float | None
    ) -> RateReservation:
        """See :meth:`RedisAdmin.reserve_units`."""
        return await self.admin.reserve_units(name, count, max_wait)

    async def claim(
        self, name: str, claim_id: str, at_least: float, at_most: float, data: bytes
    ) -> ClaimRecord:
        """See :meth:`RedisAdmin.claim`."""
        return await self.admin.claim(name, claim_id, at_least, at_most, data)

    async def enqueue_all(self, pendings: list[Pending]) -> list[Grant] | Queued | None:
        """One function for every name (lua/55_sets.lua), joining each name's queue in
        this client's order: the names' turns taken in name order (two of this client's
        requests for overlapping names then never wait for each other's turns)."""
        first = pendings[0]
        members = [part for p in pendings for part in (p.name, p.hold, p.request_id)]
        async with contextlib.AsyncExitStack() as turns:
            for name in sorted(p.name for p in pendings):
                await turns.enter_async_context(self.backend.joining(self.base, name))
            result = await self.invoke(
                "acquire_all",
                self.backend.request_key(),  # (a retry is answered as the first try)
                encode_count(first.count),
                first.data,
                encode_timeout(first.timeout),
                "1" if first.ephemeral else "0",
                len(pendings),
                *members,
                first.task,
                self.conn.options.deadlock_search_limit,
            )
        status = _STATUS[result[0]]
        if status is AcquireStatus.BUSY:
            return None
        if status is AcquireStatus.QUEUED:
            return QUEUED
        ttl = _ttl(result[-1])
        if ttl is not None:
            self.has_leases = True
        return [
            Grant(int(token), first.count, ttl, p.hold)
            for token, p in zip(result[1:-1], pendings, strict=True)
        ]

    async def delete_semaphore(self, name: str, force: bool) -> None:
        """See :meth:`RedisAdmin.delete_semaphore`."""
        await self.admin.delete_semaphore(name, force)

    async def describe_semaphore(
        self, name: str, *, owners: bool, waiters: bool
    ) -> SemaphoreDescription:
        """See :meth:`RedisAdmin.describe_semaphore`."""
        return await self.admin.describe_semaphore(name, owners=owners, waiters=waiters)

    async def watch_semaphore(
        self, name: str, *, data: bool, owners: bool, waiters: bool
    ) -> RedisWatch:
        """See :meth:`RedisAdmin.watch_semaphore`."""
        return await self.admin.watch_semaphore(name, data=data, owners=owners, waiters=waiters)

    async def watch_prefix(
        self, prefix: str, *, data: bool, owners: bool, waiters: bool
    ) -> PrefixWatchStream:
        """See :meth:`RedisAdmin.watch_prefix`."""
        return await self.admin.watch_prefix(prefix, data=data, owners=owners, waiters=waiters)

    # -- reading the state back --------------------------------------------------------

    async def _describe_session(self) -> SessionState:
        """What Redis keeps for this session, as the engine's one page of it."""
        holds_raw, waits_raw = await self.invoke("describe_session", "")
        return decode_session_state(self.session_id, holds_raw, waits_raw)

    def missed_pushes(self) -> None:
        """Pushes were missed (an inbox gap): every watch reads again, and the session
        reads its state back and settles it with the ledger's rules, as ``tenure://``
        does after a re-attach."""
        for watches in list(self.watches.values()):
            for watch in list(watches):
                watch.poke()
        for feed in self.prefix_watches.values():
            feed.reset()  # (still registered in Redis: only its consumer lists again)
        self.owner.spawn(self.reconcile(self.call))

    async def holds(self) -> list[HeldGrant]:
        """The session's holds as Redis keeps them now, in (name, hold) order."""
        holds_raw, _ = await self.invoke("describe_session", "")
        return sorted(decode_holds(holds_raw), key=lambda held: (held.name, held.grant.hold))

    def taken_back(self, found: Any) -> list[HeldGrant]:
        """The holds a resume found (``resume_session`` in lua/40_session_ops.lua)."""
        held = decode_holds(found)
        if any(h.grant.lease_ttl is not None for h in held):
            self.has_leases = True
        return held

    # -- the end ---------------------------------------------------------------------

    def stop(self, error: LostError) -> None:
        """Fail the watches, leave the inbox and the backend."""
        super().stop(error)
        for watches in self.watches.values():
            for watch in watches:
                watch.fail(error)
        self.watches.clear()
        for feed in self.prefix_watches.values():
            feed.fail(error)
        self.prefix_watches.clear()
        self.inbox.sessions.pop(self.session_id, None)
        self.backend.session_ended(self)

    async def close(self) -> None:
        """Close the session's record (Redis ends it when its window passes otherwise)."""
        try:
            await self.conn.retrying(None, "close_session", self.base, self.sid_text, self.fence)
        except TenureError as error:
            log.info("session %d: close not confirmed: %s", self.session_id, error)
