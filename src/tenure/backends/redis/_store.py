"""A session on Redis: the engine's commands as Redis functions, and their pushes.

The functions in ``lua/`` keep the engine's rules in Redis, so a Redis session does
its acquires and semaphore calls as an engine-style session does: with a
:class:`~tenure.backends._engine.CommandStore`, whose channel is the session's
:class:`RedisStore`: each command becomes one function call (:mod:`._commands`),
fenced and sent again while the connection fails (:meth:`RedisStore.invoke`), and
each push the functions leave in this client's inbox (:mod:`._inbox`) is decoded
into the engine's effect and delivered as an engine push is. Watches are the one
thing done differently (:mod:`._watch`): the functions push that a semaphore
changed, not its state, which the watch reads back.

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
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import AbstractAsyncContextManager
from typing import Any, Final, Protocol, TypeVar

from tenure._core import Command, Granted, Release
from tenure.backends._base import HeldGrant
from tenure.backends._engine import CommandStore
from tenure.backends._store import BoundSession
from tenure.backends.redis._codec import decode_effect, decode_holds
from tenure.backends.redis._commands import apply
from tenure.backends.redis._conn import FunctionReply, RedisFunctions
from tenure.backends.redis._inbox import NodeInbox
from tenure.backends.redis._release import KeyedReleases
from tenure.backends.redis._watch import RedisWatches
from tenure.errors import LostError, TenureError

R = TypeVar("R")

__all__ = ["RedisHome", "RedisStore"]

log = logging.getLogger("tenure.redis")

#: Heartbeats per recovery window.
BEATS_PER_WINDOW: Final = 3


class RedisHome(Protocol):
    """What a session on Redis asks of its home, the client (the sessions' shared part)."""

    @property
    def conn(self) -> RedisFunctions:
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


class RedisStore:
    """A session on Redis (module docstring): its :class:`~tenure.backends._store.Store`,
    and the :class:`~tenure.backends._engine.CommandChannel` of its :attr:`commands`."""

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
        self.backend = backend
        self.conn = backend.conn
        self.where = f"Redis ({backend.conn.endpoint})"
        self.inbox = inbox
        self.base = inbox.base
        self.node = node
        self.session_id = session_id
        self.sid_text = str(session_id)
        self._secret = bytes.fromhex(secret)
        self.fence = f"{secret}:{epoch}"
        self.window = window
        self.beat_period: float | None = window / BEATS_PER_WINDOW
        #: Whether the session holds a grant with a lease TTL.
        self.has_leases = False
        self._confirmed = confirmed_at
        #: Its releases, each with a request key kept until it is answered.
        self.releases = KeyedReleases(self)
        #: Its acquires and semaphore calls, over this channel. Request ids are the
        #: session's, across its owners: a resumed session (a new epoch) never reuses
        #: one (a retry is recognised by its id).
        self.commands = CommandStore(self, session_id, first_request_id=(epoch << 32) + 1)
        #: Its watches.
        self.watches = RedisWatches(self)
        self.session: BoundSession

    # -- the session's life (Store) ----------------------------------------------------

    def bind(self, session: BoundSession) -> None:
        """The session this store works for (its commands' too)."""
        self.session = session
        self.commands.bind(session)

    def confirmed_at(self) -> float:
        """The send time of the last heartbeat (or open) Redis answered."""
        return self._confirmed

    async def heartbeat(self) -> None:
        """Move the session's deadline on Redis's clock (its end is pushed, if it ended)."""
        sent = asyncio.get_running_loop().time()
        reply = await self.conn.call("heartbeat", self.base, self.sid_text, self.fence, "")
        self._confirmed = max(self._confirmed, sent)
        self.inbox.heard(reply, self)

    def secret(self) -> bytes:
        """The session's secret (every call of it carries it, with its epoch)."""
        return self._secret

    def stop(self, error: LostError) -> None:
        """Fail the watches, leave the inbox and the backend."""
        self.watches.stop(error)
        self.inbox.sessions.pop(self.session_id, None)
        self.backend.session_ended(self)

    async def close(self) -> None:
        """Close the session's record (Redis ends it when its window passes otherwise)."""
        try:
            await self.conn.retrying(None, "close_session", self.base, self.sid_text, self.fence)
        except TenureError as error:
            log.info("session %d: close not confirmed: %s", self.session_id, error)

    # -- the channel: commands as function calls ----------------------------------------

    async def call(self, command: Command[R]) -> R:
        """The function call that does ``command`` (:func:`._commands.apply`)."""
        return await apply(self, command)

    def send_now(self, release: Release) -> asyncio.Future[bool] | None:
        """See :meth:`KeyedReleases.send_now`."""
        return self.releases.send_now(release.name, release.hold)

    async def read_holds(self) -> list[HeldGrant]:
        """The session's holds as Redis keeps them now, with their data, in (name, hold)
        order: one call (:class:`~tenure.backends._engine.HoldsReader`)."""
        holds_raw, _ = await self.invoke("describe_session", "")
        return sorted(decode_holds(holds_raw), key=lambda held: (held.name, held.grant.hold))

    def new_request_id(self) -> int:
        """The session's next request id (unique across its owners)."""
        return self.commands.new_request_id()

    def search_limit(self) -> int:
        """How far an acquire that must wait looks for a deadlock (the URL's option)."""
        return self.conn.options.deadlock_search_limit

    def prefix_watch_limit(self) -> int:
        """How many prefix watches the node may have armed (the URL's option)."""
        return self.conn.options.max_prefix_watches_per_node

    async def invoke(self, op: str, key: str, *args: str | bytes | int) -> Any:
        """Call function ``op`` for this session (sent again until its deadline); its result."""
        self.session.check_alive()
        try:
            reply: FunctionReply = await self.conn.retrying(
                self._confirmed + self.window,
                op,
                self.base,
                self.sid_text,
                self.fence,
                key,
                *args,
            )
        except LostError as error:
            self.session.lose(error)
            raise
        self.heard(reply)
        return reply.result

    def heard(self, reply: FunctionReply) -> None:
        """A call of this session was answered: the inbox hears of its node's next
        deadline and of this session's liveness, and takes the pushes it carried."""
        self.inbox.heard(reply, self)
        if reply.pushes:
            self.inbox.take_inline(reply.pushes)

    # -- pushes ----------------------------------------------------------------------

    def hear(self, push: dict[str, bytes]) -> None:
        """One push from the inbox for this session: an engine effect in Redis's encoding
        (:func:`~tenure.backends.redis._codec.decode_effect`), a watch's news, or a
        deadline of the node this session waits for (kill_session)."""
        kind = push["k"]
        if kind == b"W":
            self.watches.changed(push["name"].decode())
        elif kind == b"P":
            self.watches.changed_under(int(push["w"]), push["name"].decode())
        elif kind == b"T":
            self.inbox.due_at(float(push["at"]), self)
        else:
            effect = decode_effect(self.session_id, push)
            if effect is None:
                return
            if isinstance(effect, Granted) and (effect.lease_ttl is not None or "b" in push):
                self.has_leases = True  # (a TTL, or an end: its max_hold)
            self.commands.deliver(effect)

    def missed_pushes(self) -> None:
        """Pushes were missed (an inbox gap): every watch reads again, and the session
        reads its state back and settles it with the ledger's rules, as ``tenure://``
        does after a re-attach."""
        self.watches.missed()
        self.session.spawn(self.commands.reconcile(self.call))

    def waits_for_deadlines(self) -> bool:
        """Whether this session waits for a deadline of the node to pass (see the inbox)."""
        return self.session.ended is None and bool(
            self.session.ledger.pending or self.watches.armed or self.has_leases
        )

    def taken_back(self, found: Any) -> list[HeldGrant]:
        """The holds a resume found (``resume_session`` in lua/40_session_ops.lua)."""
        held = decode_holds(found)
        if any(h.grant.lease_ttl is not None for h in held):
            self.has_leases = True
        return held
