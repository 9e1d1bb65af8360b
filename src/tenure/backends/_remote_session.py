"""A session on a tenure server, kept by the client across lost connections.

It is an :class:`~tenure.backends._engine.EngineSession` whose channel is the
network: the request ids, pending acquires and watches work as on ``memory://``.
What the network adds lives here:

* **Re-attach.** After each new connection the shard re-attaches the session with
  its protection key and the next sequence number, before any other request goes
  out. Pushes the server queued meanwhile arrive first. Then the session reads its
  state back and agrees with the server on what it holds and waits for
  (:meth:`EngineSession.reconcile`): pushes written to the dead connection, or
  queued by a server that restarted, are lost, but what they told is there.
  Watches are re-armed: the old ones are cancelled (a restarted server does not
  keep watches and may re-use their ids) and each watcher is woken, so it
  describes the semaphore again and sees the latest state first.
* **Requests cut off by a lost connection.** Idempotent commands are sent again.
  An Acquire is sent again only if the re-attach found no trace of it (neither
  queued, nor granted, nor ended): re-sending one that was granted restates the
  same grant and token. Create and delete commands are not repeated; they
  raise UnavailableError saying the outcome is unknown.
* **The local deadline.** The client declares the session expired as soon as the
  server *might* have expired it: one recovery window after the send time of the
  last frame the server answered while the session was attached
  (:attr:`tenure.backends._link.Link.confirmed_at`), on the client's monotonic
  clock. The work under its leases is cancelled then, not when the server is heard
  from again. A session given up this way is closed on the server when possible.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Final, TypeVar

from tenure._core import (
    Acquire,
    AcquireResult,
    AcquireStatus,
    AttachSession,
    CancelAcquire,
    CancelWatch,
    CloseSession,
    Command,
    DescribeSemaphore,
    Release,
    Renew,
    SessionInfo,
    UpdateSemaphore,
)
from tenure.backends._base import SessionListener
from tenure.backends._engine import RECONCILE_PAGE, EngineSession
from tenure.backends._link import DisconnectedError
from tenure.errors import (
    LostError,
    SessionClosedError,
    SessionExpiredError,
    TenureError,
    UnavailableError,
)

if TYPE_CHECKING:
    from tenure.backends.remote import Shard

R = TypeVar("R")

#: Commands that may be sent again when the connection was lost before their answer.
_RESENDABLE: Final = (
    Release,
    Renew,
    CancelAcquire,
    UpdateSemaphore,
    DescribeSemaphore,
    CancelWatch,
    CloseSession,
)
#: Keep-alives per recovery window: a late Pong or two never costs the session.
PINGS_PER_WINDOW: Final = 4


class RemoteSession(EngineSession):
    """See the module docstring. Made by :meth:`TenureBackend.open_session`."""

    def __init__(
        self, shard: Shard, info: SessionInfo, key: bytes, listener: SessionListener, node: str
    ) -> None:
        super().__init__(
            self,
            info.session_id,
            listener,
            protection_key=key,
            seq_no=info.seq_no,
            recovery_window=info.timeout,
            node=node,
            scheme="tenure",
        )
        self._shard = shard
        self._link = shard.link
        self._epoch = self._link.epoch  # the connection this session is attached to
        self._frozen = self._link.confirmed_at  # confirmed_at when that connection was lost
        self._loop = asyncio.get_running_loop()
        self._timer: asyncio.TimerHandle | None = None
        self._link.need_pings_every(self.recovery_window / PINGS_PER_WINDOW)
        self._arm()

    @property
    def attached(self) -> bool:
        """Whether the session is attached to the link's live connection."""
        return self._epoch == self._link.epoch and self._link.connected

    def deadline(self) -> float:
        """The loop time after which the server may have expired this session."""
        base = self._link.confirmed_at if self._epoch == self._link.epoch else self._frozen
        return base + self.recovery_window

    # -- the channel ----------------------------------------------------------------

    async def call(self, command: Command[R]) -> R:
        """Send ``command`` for this session, through lost connections (module docstring)."""
        while True:
            if self.ended is not None and not isinstance(command, CloseSession):
                raise type(self.ended)(*self.ended.args)
            link = self._link  # (the deadline inline: this runs on every request)
            base = link.confirmed_at if self._epoch == link.epoch else self._frozen
            try:
                return await link.call(command, wait_until=base + self._recovery_window)
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
                self._check_deadline()
                if self.ended is not None:
                    raise type(self.ended)(*self.ended.args) from None
                raise

    async def _still_queued(self, command: Acquire) -> bool:
        """Whether an Acquire cut off by a lost connection is waiting (or done) anyway.

        Once the next connection is set up, the re-attach has settled the session
        against the server's state: an acquire that was applied is known by then
        (queued, granted, or failed), so one that is not was never applied, or only
        answered BUSY, and is sent again.
        """
        pending = self.ledger.pending.get(command.request_id)
        if pending is None or pending.future.done():
            return True  # its outcome is known: acquire() reads it from the future
        try:
            await self._link.wait_ready(self.deadline())
        except UnavailableError:
            if not self._check_deadline():
                raise
        # Ended: the loss failed its future, which acquire() reads.
        return self.ended is not None or pending.future.done() or pending.queued

    def _page_size(self) -> int:
        # A page costs at most about 8 KiB per semaphore (names of up to 1 KiB in a
        # hold, a wait and a missed ending): keep it well within our frames.
        return max(1, min(RECONCILE_PAGE, self._link.options.max_frame_size // 8192))

    # -- connection events (from the shard) -----------------------------------------

    def connection_lost(self) -> None:
        """Freeze the last confirmation of the connection this session was attached to."""
        if self._epoch == self._link.epoch:
            self._frozen = self._link.confirmed_at

    async def reattach(self) -> None:
        """Attach to the new connection (during its set-up), then re-arm the watches."""
        if self.ended is not None:
            return
        if self._check_deadline():
            return
        self.seq_no += 1
        try:
            await self._link.call_now(
                AttachSession(self.session_id, self.protection_key, self.seq_no)
            )
        except DisconnectedError:
            raise
        except TenureError as error:
            reason = error if isinstance(error, LostError) else SessionExpiredError(str(error))
            self.lose(reason)
            return
        self._epoch = self._link.epoch
        await self.reconcile(self._link.call_now)
        for watch_id in self.forget_watches():
            with contextlib.suppress(TenureError):
                await self._link.call_now(CancelWatch(self.session_id, watch_id))

    # -- ending ---------------------------------------------------------------------

    def end(self, error: LostError) -> None:
        """Fail what waits, stop the countdown and leave the shard."""
        super().end(error)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._shard.sessions.get(self.session_id) is self:
            del self._shard.sessions[self.session_id]

    async def close(self) -> None:
        """Close the session on the server; if it cannot be reached now, as soon as it can."""
        if self.ended is not None:
            return
        self.end(SessionClosedError(f"session {self.session_id} was closed"))
        if self.attached:
            try:
                await self._link.call(
                    CloseSession(self.session_id), wait_until=self._shard.deadline()
                )
                return
            except UnavailableError:
                pass
            except TenureError:
                return  # already gone on the server
        self._shard.close_later(self)

    def _arm(self) -> None:
        self._timer = self._loop.call_at(self.deadline(), self._check_deadline)

    def _check_deadline(self) -> bool:
        """Declare the session expired if its deadline passed; whether it did."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.ended is not None:
            return True
        if self._loop.time() < self.deadline():
            self._arm()
            return False
        self.lose(
            SessionExpiredError(
                f"session {self.session_id}: no word from {self._link.endpoint} for its "
                f"recovery window ({self.recovery_window:g}s); the server may have expired it"
            )
        )
        self._shard.close_later(self)
        return True
