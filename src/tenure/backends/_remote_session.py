"""Sessions on a tenure server, kept by the client across lost connections.

A session of ``tenure://`` is a :class:`~tenure.backends._session.StoreSession`
over a :class:`RemoteStore`: its :class:`~tenure.backends._store.Store`, and the
channel of a :class:`~tenure.backends._engine.CommandStore` and of the engine's
watches, whose channel is the network (one :class:`~tenure.backends._link.Link` per
server, its :class:`~tenure.backends._shard.Shard`). What the network adds lives here:

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
* **A node that moves** to another cell of its service (docs/cluster.md, "Cells"):
  its cell says so in a SessionEnded of WRONG_CELL as it freezes the node. The
  session stops counting that connection's confirmations (its deadline runs from
  the last one before), and re-attaches on the cell that serves the node next, as
  the client's routing finds it (:attr:`RemoteStore.home`: the node is refused
  ``UNAVAILABLE`` while it moves, and asked again), then reads its state back and
  re-arms its watches there, as after a lost connection. Its requests meanwhile
  wait for that, within its deadline.
* **Confirmation.** A session is confirmed by every frame the server answers
  while it is attached (:attr:`tenure.backends._link.Link.confirmed_at`), so the
  local deadline (the session's rule) counts from there; while the connection is
  down, from the last confirmation of the connection it was attached to.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from functools import partial
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
    NodeDescription,
    OfferHold,
    Release,
    Renew,
    SessionInfo,
)
from tenure._protocol import FrameTooLargeError
from tenure.backends._engine import RECONCILE_PAGE, CommandStore
from tenure.backends._link import DisconnectedError
from tenure.backends._remote_data import data_refusal
from tenure.backends._shard import Shard
from tenure.backends._standby_reads import StandbyArms, StandbyReads
from tenure.backends._store import BoundSession
from tenure.backends._watch import EngineWatches
from tenure.errors import (
    LostError,
    NotFoundError,
    PermissionDeniedError,
    RequestTimeoutError,
    SessionExpiredError,
    TenureError,
    UnavailableError,
)

R = TypeVar("R")

__all__ = ["RemoteStore"]

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
#: What a cell a session's node left answers its requests with (not applied): it let
#: the session go as the node froze (not attached there any more), or forgot it.
_LEFT_BEHIND: Final = (PermissionDeniedError, NotFoundError, SessionExpiredError)
#: Keep-alives per recovery window: a late Pong or two never costs the session.
PINGS_PER_WINDOW: Final = 4
#: The first and the longest pause between two asks of where a moving node lands, in
#: seconds (each ask doubles it).
MOVE_PAUSE: Final = 0.02
MAX_MOVE_PAUSE: Final = 0.5


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
        self.watches.standby = StandbyArms(reads, self._fresh_only, self.session_id, self.watches)
        page_size = max(1, min(RECONCILE_PAGE, self._link.options.max_frame_size // 8192))
        self.commands = CommandStore(
            self, self.session_id, page_size=page_size, watches=self.watches
        )
        self.session: BoundSession
        #: Where the session's node lives now, asked when it moves (module docstring;
        #: None: a service whose nodes do not move, and the session is lost then).
        self.home: Callable[[str], Awaitable[Shard]] | None = None
        self._moving: asyncio.Task[None] | None = None  # its re-attach elsewhere
        #: How many times its node began to move: a request refused by a cell the node
        #: was leaving (``UNAVAILABLE``, or not attached there any more) is sent again.
        self._moves = 0
        #: Whether its service has several cells (its node may move): the backend sets it,
        #: as it learns the cells (an attribute: read on every release's path).
        self.in_cells = False
        #: Releases to write ahead of the session's next request (module docstring),
        #: by (name, hold), in the order they were owed.
        self._owed: dict[tuple[str, int], None] = {}

    @property
    def shard(self) -> Shard:
        """The shard the session lives on (its node's cell's: it moves with the node)."""
        return self._shard

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
            moving = self._moving
            if moving is not None and not moving.done():
                await asyncio.shield(moving)  # (it ends by the session's deadline)
                continue
            link = self._link  # (the deadline inline: this runs on every request)
            base = link.confirmed_at if self._epoch == link.epoch else self._frozen
            moves = self._moves
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
                if self._moves != moves:
                    continue  # (its node moves: refused there, not applied; sent again)
                raise
            except _LEFT_BEHIND:
                if self._moves != moves:
                    continue  # (its cell let the session go as the node left: not applied)
                if self.session.ended is not None:  # (lost meanwhile: that is the answer)
                    raise type(self.session.ended)(*self.session.ended.args) from None
                raise

    def _fresh_only(self) -> bool:
        """Whether a release of the session's is unanswered (module docstring): what
        allows staleness is asked of the leader meanwhile, behind it."""
        return bool(self._owed or self.session.ledger.releasing)

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
        if self._fresh_only():
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
        elif self.in_cells:  # (a node of a service of several cells may move)
            return self._through_moves(sent)
        return sent

    def _through_moves(self, sent: asyncio.Future[bool]) -> asyncio.Future[bool]:
        """``sent``'s answer, a refusal by the cell its node was leaving meanwhile told
        as ``UNAVAILABLE`` (not applied: the release is sent again, where it lands)."""
        moves = self._moves
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

        def answered(sent: asyncio.Future[bool]) -> None:
            if answer.done():
                _retrieve(sent)
            elif sent.cancelled():
                answer.cancel()
            elif (error := sent.exception()) is None:
                answer.set_result(sent.result())
            elif isinstance(error, _LEFT_BEHIND) and self._moves != moves:
                answer.set_exception(UnavailableError(f"its node moved: {error}"))
            else:
                answer.set_exception(error)

        sent.add_done_callback(answered)
        return answer

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

    def node_moving(self, why: str) -> None:
        """The session's node moves to another cell (``why``: its cell's SessionEnded):
        stop counting on this connection, and re-attach where the node lands (module
        docstring)."""
        if self._moving is not None and not self._moving.done():
            return
        self._moves += 1
        self.connection_lost()  # (its deadline from the last confirmation before this)
        self._epoch = -1  # (attached to no connection)
        self._moving = asyncio.get_running_loop().create_task(self._follow_node(why))

    async def _follow_node(self, why: str) -> None:
        """Re-attach where the session's node lands, asking again while it moves, until
        the session's deadline passes (then it is lost, saying ``why``)."""
        pause = MOVE_PAUSE
        while self.session.ended is None:
            if self.session.deadline_passed() or self.home is None:
                self.session.lose(SessionExpiredError(f"{why} (not re-attached in time)"))
                return
            try:
                shard = await self.home(self.node)
                if shard is not self._shard:
                    self._move_to(shard)
                await self._link.wait_ready(self.confirmed_at() + self._window)
                await self._attach(partial(self._on_connection, self._link.epoch))
                return
            except (UnavailableError, DisconnectedError, RequestTimeoutError):
                pass  # (still moving, or that connection lost: ask again)
            except TenureError as error:
                self.session.lose(
                    error if isinstance(error, LostError) else SessionExpiredError(str(error))
                )
                return
            await asyncio.sleep(pause)
            pause = min(pause * 2, MAX_MOVE_PAUSE)

    async def _on_connection(self, epoch: int, command: Command[R]) -> R:
        """``command`` on the link's connection ``epoch`` alone: what a re-attach and
        the reading back after it must all go on.

        Raises:
            DisconnectedError: that connection was lost (before or after the answer).
        """
        link = self._link
        if link.epoch != epoch:
            raise DisconnectedError("the connection was lost")
        try:
            answer = await link.call(command)
        except TenureError:
            if link.epoch != epoch:  # (refused by the next: not attached there)
                raise DisconnectedError("the connection was lost") from None
            raise
        if link.epoch != epoch:
            raise DisconnectedError("the connection was lost")
        return answer

    def _move_to(self, shard: Shard) -> None:
        """Leave this shard for ``shard`` (of the cell the node lives on now)."""
        if self._shard.sessions.get(self.session_id) is self:
            del self._shard.sessions[self.session_id]
        self._shard, self._link = shard, shard.link
        self.where = str(shard.link.endpoint)
        shard.sessions[self.session_id] = self
        shard.link.need_pings_every(self._window / PINGS_PER_WINDOW)

    async def reattach(self) -> None:
        """Attach to the new connection (during its set-up), then re-arm the watches."""
        if self.session.deadline_passed() or (self._moving is not None and not self._moving.done()):
            return  # (moving: its own re-attach, on the cell the node lands on)
        try:
            await self._attach(self._link.call_now)
        except (DisconnectedError, RequestTimeoutError):
            raise  # (the connection's failure, not the session's: it is made again)
        except (SessionExpiredError, UnavailableError) as error:
            if not self.in_cells:
                self.session.lose(
                    error if isinstance(error, LostError) else SessionExpiredError(str(error))
                )
                return
            # Its node may have moved while this client was away (the push that said so
            # lost with the connection), or be moving now: asked where it lives, and
            # lost only if that cell does not have it either.
            self.node_moving(f"session {self.session_id} was not on {self._link.endpoint}: {error}")
        except TenureError as error:
            reason = error if isinstance(error, LostError) else SessionExpiredError(str(error))
            self.session.lose(reason)

    async def _attach(self, call: Callable[[Command[Any]], Awaitable[Any]]) -> None:
        """Attach to the link's connection through ``call`` (the next sequence number),
        read the session's state back, and re-arm its watches.

        Raises:
            TenureError: the attach failed (DisconnectedError: the connection's).
        """
        epoch = self._link.epoch
        self.seq_no += 1
        await call(AttachSession(self.session_id, self.protection_key, self.seq_no))
        if self._link.epoch != epoch:  # (attached to a connection lost since)
            raise DisconnectedError("the connection was lost")
        self._epoch = epoch
        await self.commands.reconcile(call)
        for watch_id in self.watches.forget():
            with contextlib.suppress(TenureError):
                await call(CancelWatch(self.session_id, watch_id))

    # -- ending ---------------------------------------------------------------------

    def stop(self, error: LostError) -> None:
        """Fail the watches and leave the shard."""
        self.watches.stop(error)
        if self._shard.sessions.get(self.session_id) is self:
            del self._shard.sessions[self.session_id]

    async def close(self) -> None:
        """Close the session on the server: now (its answer awaited) if it is attached;
        else as soon as it can be reached, at the latest while its client closes
        (:meth:`~tenure.backends._shard.Shard.aclose`)."""
        if self.attached:
            # A task of the shard's: the client's close waits for it (shielded from
            # a caller cancelled meanwhile, as the session's close is).
            await asyncio.shield(self._shard.closing(self))
        else:
            self._shard.close_later(self)


def _retrieve(future: asyncio.Future[bool]) -> None:
    """Mark an owed release's answer as seen: its release's own sending hears it."""
    if not future.cancelled():
        future.exception()
