"""Sessions on a tenure server, kept by the client across lost connections.

A session of ``tenure://`` is a :class:`~tenure.backends._session.StoreSession`
over a :class:`RemoteStore`: its :class:`~tenure.backends._store.Store`, and the
channel of a :class:`~tenure.backends._engine.CommandStore` and of the engine's
watches, whose channel is the network (one :class:`~tenure.backends._link.Link` per
server, its :class:`Shard`). What the network adds lives here:

* **Re-attach.** After each new connection the shard re-attaches the session with
  its protection key and the next sequence number, before any other request goes
  out. Pushes the server queued meanwhile arrive first. Then the session reads its
  state back and agrees with the server on what it holds and waits for
  (:meth:`~tenure.backends._engine.CommandStore.reconcile`): pushes written to the
  dead connection, or queued by a server that restarted, are lost, but what they
  told is there.
  Watches are re-armed: the old ones are cancelled (a restarted server does not
  keep watches and may re-use their ids) and each watcher is woken, so it
  describes the semaphore again and sees the latest state first.
* **Requests cut off by a lost connection.** Idempotent commands are sent again
  (a ClaimName too: it carries its claim's id, so a second is answered with the
  claim the first made).
  An Acquire is sent again only if the re-attach found no trace of it (neither
  queued, nor granted, nor ended): re-sending one that was granted restates the
  same grant and token. Create, delete and update commands are not repeated;
  they raise UnavailableError saying the outcome is unknown. (An update of a
  semaphore's data is no idempotent command: applied, then overwritten by another
  client's, a second copy would take effect again after it, undoing that update.)
* **A release goes before what the session asks next.** One that could not be
  written at once (``send_now``: no connection), or whose connection was lost
  before its answer, is *owed*: written again ahead of the session's next request.
  Its own task, resending it, may wake after that request is sent, and the server
  would then see the task hold what it asks for again and refuse it as a deadlock
  that is none. (A second Release of a released hold changes nothing.)
* **A session's end is final.** A request that waits for a connection looks at
  the session again once there is one: a session ended meanwhile sends nothing
  more (its close, if it was closed while disconnected, has just gone out during
  the set-up), and the request raises its loss.
* **Reads that allow staleness** (a describe given ``max_staleness``) go to the
  service's standbys (:mod:`tenure.backends._standby_reads`: never older than what the
  client wrote or was told); while a release of the session is unanswered, to the
  leader, behind it.
* **Confirmation.** A session is confirmed by every frame the server answers
  while it is attached (:attr:`tenure.backends._link.Link.confirmed_at`), so the
  local deadline (the session's rule) counts from there; while the connection is
  down, from the last confirmation of the connection it was attached to.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import Any, Final, TypeVar

from tenure._core import (
    Acquire,
    AcquireResult,
    AcquireStatus,
    AttachSession,
    CancelAcquire,
    CancelWatch,
    ClaimName,
    CloseSession,
    Command,
    DescribeNode,
    DescribeSemaphore,
    Effect,
    NodeDescription,
    OfferHold,
    Release,
    Renew,
    SessionInfo,
)
from tenure._protocol import FrameTooLargeError, Welcome
from tenure.backends._engine import RECONCILE_PAGE, CommandStore
from tenure.backends._link import DisconnectedError, Door, Doors, Link, LinkOptions
from tenure.backends._remote_data import data_refusal
from tenure.backends._standby_reads import StandbyReads
from tenure.backends._store import BoundSession
from tenure.backends._watch import EngineWatches
from tenure.errors import (
    LostError,
    RequestTimeoutError,
    SessionExpiredError,
    TenureError,
    UnavailableError,
)

R = TypeVar("R")

__all__ = ["RemoteStore", "Shard"]

#: Commands that may be sent again when the connection was lost before their answer.
_RESENDABLE: Final = (
    ClaimName,  # (a retry carries the same claim id: answered with the same claim)
    OfferHold,  # (a retry carries the same digest: the same offer)
    Release,
    Renew,
    CancelAcquire,
    DescribeSemaphore,
    CancelWatch,
    CloseSession,
)
#: Keep-alives per recovery window: a late Pong or two never costs the session.
PINGS_PER_WINDOW: Final = 4


class RemoteStore:
    """See the module docstring. Made by :meth:`TenureBackend.open_session`."""

    beat_period: float | None = None  # the link's pings keep the session alive

    def __init__(
        self,
        shard: Shard,
        node: str,
        info: SessionInfo,
        key: bytes,
        reads: Callable[[], StandbyReads | None] = lambda: None,
    ) -> None:
        """``reads``: the standbys of the session's service, for its reads that allow
        staleness (None: the leader answers them)."""
        self.session_id = info.session_id
        self.node = node
        self.protection_key = key
        self.seq_no = info.seq_no  # each re-attach uses the next
        self.where = str(shard.link.endpoint)
        self._shard = shard
        self._link = shard.link
        self._reads = reads
        self._window = info.timeout
        self._epoch = self._link.epoch  # the connection this session is attached to
        self._frozen = self._link.confirmed_at  # confirmed_at when that connection was lost
        self._link.need_pings_every(info.timeout / PINGS_PER_WINDOW)
        #: Its watches, and its acquires and semaphore calls (DescribeSession pages of
        #: at most about 8 KiB per semaphore: names of up to 1 KiB in a hold, a wait and
        #: a missed ending, well within our frames).
        self.watches = EngineWatches(self, self.session_id)
        page_size = max(1, min(RECONCILE_PAGE, self._link.options.max_frame_size // 8192))
        self.commands = CommandStore(
            self, self.session_id, page_size=page_size, watches=self.watches
        )
        self.session: BoundSession
        #: Releases to write ahead of the session's next request (module docstring),
        #: by (name, hold), in the order they were owed.
        self._owed: dict[tuple[str, int], None] = {}

    def bind(self, session: BoundSession) -> None:
        """The session this store works for (its commands' and watches' too)."""
        self.session = session
        self.commands.bind(session)
        self.watches.bind(session)

    def secret(self) -> bytes:
        """The session's protection key."""
        return self.protection_key

    async def heartbeat(self) -> None:
        """Nothing to send: the link's pings keep the session alive."""

    @property
    def attached(self) -> bool:
        """Whether the session is attached to the link's live connection."""
        return self._epoch == self._link.epoch and self._link.connected

    def confirmed_at(self) -> float:
        """The send time of the last frame the server answered while the session was attached."""
        return self._link.confirmed_at if self._epoch == self._link.epoch else self._frozen

    # -- the channel ----------------------------------------------------------------

    async def call(self, command: Command[R]) -> R:
        """Send ``command`` for this session, through lost connections (module docstring)."""
        while True:
            ended = self.session.ended
            if ended is not None and not isinstance(command, CloseSession):
                raise type(ended)(*ended.args)
            link = self._link  # (the deadline inline: this runs on every request)
            base = link.confirmed_at if self._epoch == link.epoch else self._frozen
            try:
                if not link.ready:
                    # Wait, then look again: the session may end meanwhile, and its
                    # close is sent during the next connection's set-up, ahead of any
                    # request: a command of its sent after that is refused (the
                    # server has forgotten the session), and must not be sent.
                    await link.wait_ready(base + self._window)
                    continue
                if self._owed:
                    self._write_owed(command)
                return await link.call(command, wait_until=base + self._window)
            except FrameTooLargeError as error:  # data past the frame: say which limit
                raise await data_refusal(command, self.node, error, self._describe) from None
            except DisconnectedError:
                if isinstance(command, Acquire):
                    if await self._still_queued(command):
                        return AcquireResult(AcquireStatus.QUEUED)  # type: ignore[return-value]
                elif not isinstance(command, _RESENDABLE):
                    raise UnavailableError(
                        f"the connection to {self._link.endpoint} was lost before "
                        f"{type(command).__name__} was answered: it may or may not have "
                        "been applied"
                    ) from None
            except UnavailableError:
                if self.session.deadline_passed() and self.session.ended is not None:
                    raise type(self.session.ended)(*self.session.ended.args) from None
                raise

    async def call_stale(self, command: Command[R], max_staleness: float) -> R:
        """``command`` (a read of this session's) answered by a standby at most
        ``max_staleness`` seconds stale (:meth:`StandbyReads.read`: never older than
        what the client wrote or was told); else as :meth:`call` sends it."""
        reads = self._reads()
        if reads is None:
            return await self.call(command)
        ended = self.session.ended
        if ended is not None:
            raise type(ended)(*ended.args)
        if self._owed or self.session.ledger.releasing:
            # A release not answered yet (leaving ``async with`` does not wait for it)
            # is ahead of this read on the leader's connection alone: a standby could
            # answer from before it, and show a hold its caller let go.
            return await reads.from_leader(lambda: self.call(command))
        return await reads.read(command, max_staleness, lambda: self.call(command))

    async def _describe(self, node: str) -> NodeDescription:
        """The node's settings, asked of the server (for :func:`data_refusal`)."""
        return await self._link.call(DescribeNode(node))

    def send_now(self, release: Release) -> asyncio.Future[bool] | None:
        """The Release written now on the session's connection, if it is attached and
        ready: behind it on the wire comes whatever the client asks next. If it is
        not, the release is owed (module docstring)."""
        if self.session.ended is not None:
            return None
        sent = self._link.call_if_ready(release) if self._epoch == self._link.epoch else None
        if sent is None:
            self._owed[(release.name, release.hold)] = None
        return sent

    def _write_owed(self, command: Command[Any]) -> None:
        """Write the releases owed ahead of ``command`` (the connection is ready): each
        still being released, but ``command``'s own if it is one of them. Their
        answers are not awaited: each release's own sending settles it."""
        if self._epoch != self._link.epoch:
            return  # not attached to this connection: nothing of it may go out here
        owed, self._owed = self._owed, {}
        releasing = self.session.ledger.releasing
        itself = (command.name, command.hold) if isinstance(command, Release) else None
        for place in owed:
            if place in releasing and place != itself:
                sent = self._link.call_if_ready(Release(self.session_id, *place))
                if sent is not None:
                    sent.add_done_callback(_retrieve)

    async def _still_queued(self, command: Acquire) -> bool:
        """Whether an Acquire cut off by a lost connection is waiting (or done) anyway.

        Once the next connection is set up, the re-attach has settled the session
        against the server's state: an acquire that was applied is known by then
        (queued, granted, or failed), so one that is not was never applied, or only
        answered BUSY, and is sent again.
        """
        pending = self.session.ledger.pending.get(command.request_id)
        if pending is None or pending.future.done():
            return True  # its outcome is known: the session reads it from the future
        try:
            await self._link.wait_ready(self.confirmed_at() + self._window)
        except UnavailableError:
            if not self.session.deadline_passed():
                raise
        # Ended: the loss failed its future, which the session reads.
        return self.session.ended is not None or pending.future.done() or pending.queued

    # -- connection events (from the shard) -----------------------------------------

    def connection_lost(self) -> None:
        """Freeze the last confirmation of the connection this session was attached to;
        the releases written on it and not answered are owed (module docstring)."""
        if self._epoch == self._link.epoch:
            self._frozen = self._link.confirmed_at
            self._owed.update(dict.fromkeys(self.session.ledger.releasing))

    async def reattach(self) -> None:
        """Attach to the new connection (during its set-up), then re-arm the watches."""
        if self.session.deadline_passed():
            return
        self.seq_no += 1
        try:
            await self._link.call_now(
                AttachSession(self.session_id, self.protection_key, self.seq_no)
            )
        except (DisconnectedError, RequestTimeoutError):
            raise  # (the connection's failure, not the session's: it is made again)
        except TenureError as error:
            reason = error if isinstance(error, LostError) else SessionExpiredError(str(error))
            self.session.lose(reason)
            return
        self._epoch = self._link.epoch
        await self.commands.reconcile(self._link.call_now)
        for watch_id in self.watches.forget():
            with contextlib.suppress(TenureError):
                await self._link.call_now(CancelWatch(self.session_id, watch_id))

    # -- ending ---------------------------------------------------------------------

    def stop(self, error: LostError) -> None:
        """Fail the watches and leave the shard."""
        self.watches.stop(error)
        if self._shard.sessions.get(self.session_id) is self:
            del self._shard.sessions[self.session_id]

    async def close(self) -> None:
        """Close the session on the server: now (its answer awaited) if it is attached;
        else as soon as it can be reached, at the latest while its client closes
        (:meth:`Shard.aclose`)."""
        if self.attached:
            # A task of the shard's: the client's close waits for it (shielded from
            # a caller cancelled meanwhile, as the session's close is).
            await asyncio.shield(self._shard.closing(self))
        else:
            self._shard.close_later(self)


class Shard:
    """One service (a server, or a cluster's doors): its link, the sessions opened
    on it, and sessions to close there."""

    def __init__(self, doors: Doors | Door, options: LinkOptions) -> None:
        self.link = Link(doors, options, self)
        self.sessions: dict[int, RemoteStore] = {}
        self._to_close: dict[int, RemoteStore] = {}
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

    def close_later(self, store: RemoteStore) -> None:
        """End the session of ``store`` on the server as soon as possible (best effort)."""
        self.sessions.pop(store.session_id, None)
        if self.link.ready:
            self.closing(store)
        else:
            self._to_close[store.session_id] = store

    def closing(self, store: RemoteStore) -> asyncio.Task[None]:
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

    async def _close(self, store: RemoteStore, sent: asyncio.Future[None] | None) -> None:
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

    async def _attach_and_close(self, store: RemoteStore) -> None:
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

    async def _close_after_attach(self, store: RemoteStore) -> None:
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


def _retrieve(future: asyncio.Future[bool]) -> None:
    """Mark an owed release's answer as seen: its release's own sending hears it."""
    if not future.cancelled():
        future.exception()
