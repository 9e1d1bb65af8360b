"""One service a ``tenure://`` client speaks to (a server, a cluster's doors, or one
cell of a service of several): its link, the sessions opened there, and the sessions
to close there (:mod:`tenure.backends._remote_session` has what a session adds).

A lost connection's sessions start their countdown (:meth:`Shard.disconnected`); a
new one's re-attach before any request flows (:meth:`Shard.connected`), or are lost if
the server runs a new state; a session given up is closed as soon as a connection is
up, at the latest while the client closes (:meth:`Shard.aclose`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any, Protocol, TypeVar

from tenure._core import AttachSession, CloseSession, Command, Effect
from tenure._protocol import Welcome
from tenure.backends._engine import CommandStore
from tenure.backends._link import DisconnectedError, Door, Doors, Link, LinkOptions
from tenure.backends._store import BoundSession
from tenure.errors import (
    RequestTimeoutError,
    SessionExpiredError,
    TenureError,
    UnavailableError,
)

R = TypeVar("R")

__all__ = ["Shard", "ShardSession"]


class ShardSession(Protocol):
    """What a shard needs of a session opened on it
    (:class:`~tenure.backends._remote_session.RemoteStore`)."""

    session_id: int
    protection_key: bytes
    seq_no: int
    commands: CommandStore
    #: Whether its service has several cells (the backend's to set).
    in_cells: bool

    @property
    def session(self) -> BoundSession:
        """The session the store works for."""
        ...

    @property
    def attached(self) -> bool:
        """Whether the session is attached to the link's live connection."""
        ...

    async def reattach(self) -> None:
        """Attach to the new connection (during its set-up)."""

    def connection_lost(self) -> None:
        """The connection it was attached to is lost."""


class Shard:
    """One service (a server, or a cluster's doors): its link, the sessions opened
    on it, and sessions to close there."""

    def __init__(self, doors: Doors | Door, options: LinkOptions) -> None:
        self.link = Link(doors, options, self)
        self.sessions: dict[int, ShardSession] = {}
        self._to_close: dict[int, ShardSession] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.instance_id: bytes | None = None  # of the state the sessions live in

    def deadline(self) -> float:
        """How long a node-level call may wait for a connection (loop time)."""
        return asyncio.get_running_loop().time() + self.link.options.connect_timeout

    async def call(self, command: Command[R], *, resend: bool) -> R:
        """A node-level call; sent again after a lost connection only if ``resend``."""
        while True:
            try:
                return await self.link.call(command, wait_until=self.deadline())
            except DisconnectedError:
                if not resend:
                    raise UnavailableError(
                        f"the connection to {self.link.endpoint} was lost before "
                        f"{type(command).__name__} was answered: it may or may not have "
                        "been applied"
                    ) from None

    # -- LinkHome -------------------------------------------------------------------

    def push(self, effect: Effect) -> None:
        """Route an effect to its session (effects of forgotten sessions are dropped)."""
        store = self.sessions.get(effect.session_id)
        if store is not None:
            store.commands.deliver(effect)

    async def connected(self, welcome: Welcome) -> None:
        """Re-attach every live session, and close the ones given up, before requests flow."""
        reset = self.instance_id not in (None, welcome.instance_id)
        self.instance_id = welcome.instance_id
        live = list(self.sessions.values())
        if reset:
            for store in live:
                store.session.lose(
                    SessionExpiredError(
                        f"{self.link.endpoint} runs a new state (instance changed): "
                        f"session {store.session_id} is gone"
                    )
                )
            self._to_close.clear()
            return
        await asyncio.gather(*(store.reattach() for store in live))
        doomed, self._to_close = list(self._to_close.values()), {}
        # Tasks :meth:`aclose` waits for: a client's close that begins meanwhile finds
        # nothing left to close, and must not close the link under these.
        await asyncio.gather(*(self._track(self._close_after_attach(store)) for store in doomed))

    def disconnected(self) -> None:
        """The sessions attached to the lost connection start their countdown from here."""
        for store in self.sessions.values():
            store.connection_lost()

    # -- sessions given up ----------------------------------------------------------

    def close_later(self, store: ShardSession) -> None:
        """End the session of ``store`` on the server as soon as possible (best effort)."""
        self.sessions.pop(store.session_id, None)
        if self.link.ready:
            self.closing(store)
        else:
            self._to_close[store.session_id] = store

    def closing(self, store: ShardSession) -> asyncio.Task[None]:
        """Close the session of ``store`` on the server now (:meth:`_close`): the task
        doing it, which :meth:`aclose` waits for."""
        self.sessions.pop(store.session_id, None)
        # Written at once if it can be, ahead of whatever the client asks next.
        sent = self.link.call_if_ready(CloseSession(store.session_id)) if store.attached else None
        return self._track(self._close(store, sent))

    def _track(self, closing: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run ``closing`` (a close of a session) as a task :meth:`aclose` waits for."""
        task = asyncio.ensure_future(closing)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _close(self, store: ShardSession, sent: asyncio.Future[None] | None) -> None:
        """Close the session (its CloseSession ``sent`` already, or not yet): on the
        live connection, attached there first if it is not (a session given up stays
        with the connection it had, and the server takes a session's commands only on
        its own connection); if there is no connection within ``connect_timeout``, or
        it is lost before the answer, at the next connection's set-up."""
        try:
            if sent is not None:
                await sent
                return
            await self.link.wait_ready(self.deadline())
            if store.attached:
                await self.link.call_now(CloseSession(store.session_id))
            else:
                await self._attach_and_close(store)
        except UnavailableError:  # (DisconnectedError too)
            if not self.link.closing:
                self._to_close[store.session_id] = store
        except TenureError:
            pass  # already expired or closed on the server (or the client closed)

    async def _attach_and_close(self, store: ShardSession) -> None:
        """Attach the session to the connection up now (the next sequence number),
        then close it there."""
        epoch = self.link.epoch
        store.seq_no += 1
        await self.link.call_now(
            AttachSession(store.session_id, store.protection_key, store.seq_no)
        )
        if self.link.epoch != epoch:  # (its CloseSession would be refused on another)
            raise DisconnectedError("the connection was lost")
        await self.link.call_now(CloseSession(store.session_id))

    async def _close_after_attach(self, store: ShardSession) -> None:
        try:
            await self._attach_and_close(store)
        except (DisconnectedError, RequestTimeoutError):
            self._to_close[store.session_id] = store
            raise
        except TenureError:
            pass  # already expired or closed: nothing left to end

    async def aclose(self, until: float | None = None) -> None:
        """Close the sessions still to close, then the link.

        Those are the sessions given up (rule 6a) and those whose close a lost
        connection cut off. Until ``until`` (loop time: the client's ``close_wait``
        from the start of its close; None: not at all) it waits for a connection and
        closes each there, so what they hold goes to the next waiter now, not a
        window later (or a fresh window after a restart of the server), as etcd's
        session close revokes its lease. What is still open then is left to expire.
        """
        if until is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout_at(until):
                    await self._close_all()
        await self.link.aclose()
        for task in list(self._tasks):
            with contextlib.suppress(TenureError, OSError):
                await task

    async def _close_all(self) -> None:
        """Until no session is left to close: the closes under way, then the rest."""
        while self._tasks or self._to_close:
            if not self._tasks:
                doomed, self._to_close = list(self._to_close.values()), {}
                for store in doomed:
                    self.closing(store)
            await asyncio.wait(set(self._tasks))
