"""What a client believes one engine session holds and waits for, and how it agrees again.

:class:`Ledger` is the bookkeeping of :class:`~tenure.backends._engine.EngineSession`,
with no I/O: the acquires in progress (by request id), the grants handed to callers
and not released or lost (by semaphore name), and the rules that settle it against
a page of the engine's own account (:class:`~tenure._core.SessionState`).

A push is sent once: one written to a connection that then died, or queued by a
server that then restarted, is lost. So after every re-attach the session reads
its state back page by page, and :meth:`Ledger.settle` each page as it arrives,
before any later push (which is newer, and applies on top):

* an acquire still waiting to hear is queued (the engine lists its request id),
  granted (the session holds the semaphore with a token the client has not seen),
  failed (its ending is among the ``missed``: a timeout, a deletion), granted and
  lost again (a ``missed`` LeaseLost of a token the client has not seen), or, if it
  may never have reached the engine, left for its caller to send again;
* a grant the client holds that the engine no longer lists is lost;
* a hold or a queued acquire the client knows nothing about (an answer lost with a
  connection) is released or cancelled.

It relies on what the client's session guarantees: one acquire or hold per
semaphore per session at a time (a restatement, with ``timeout=0``, aside).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from tenure._core import CancelAcquire, Command, LeaseLost, Release, SessionState
from tenure.backends._base import Grant
from tenure.errors import LeaseLostError, LostError, UnavailableError, error_from_code

__all__ = ["Ledger", "Pending", "Settled"]


@dataclass(slots=True)
class Pending:
    """An acquire in progress: the semaphore, the outcome, whether the engine queued it."""

    name: str
    future: asyncio.Future[Grant]
    queued: bool = False


@dataclass(slots=True)
class Settled:
    """What settling a page asks of the session: grants to declare lost, commands to send.

    ``lost`` are ``(name, token, error)`` of leases the client held; ``drop`` are the
    Releases and CancelAcquires of what the engine keeps that nobody asked for (send
    them before anything else).
    """

    lost: list[tuple[str, int, LostError]] = field(default_factory=list)
    drop: list[Command[Any]] = field(default_factory=list)


class Ledger:
    """See the module docstring."""

    def __init__(self, session_id: int) -> None:
        self.session_id = session_id
        #: Acquires in progress, by their request id.
        self.pending: dict[int, Pending] = {}
        #: Grants handed to callers and neither released nor lost: name -> token.
        self.held: dict[str, int] = {}
        #: Grants being released (no longer held, Release not answered yet).
        self.releasing: dict[str, int] = {}
        # Grants lost before their caller took them (a LeaseLost right after the
        # Granted, before the waiting task ran): request id -> the loss to raise.
        self._doomed: dict[int, LostError] = {}

    @property
    def empty(self) -> bool:
        """Nothing asked for, held or being released: a re-attach has nothing to settle.

        (What the engine might keep unasked comes only from an acquire whose answer
        was lost, and such an acquire is pending until it is settled or withdrawn.)
        """
        return not (self.pending or self.held or self.releasing)

    # -- one acquire ------------------------------------------------------------------

    def open(self, request_id: int, name: str) -> Pending:
        """An acquire starts (its outcome is awaited on the returned future)."""
        future: asyncio.Future[Grant] = asyncio.get_running_loop().create_future()
        pending = self.pending[request_id] = Pending(name, future)
        return pending

    def take(self, request_id: int, name: str, grant: Grant) -> Grant:
        """The caller takes its grant: now held, unless it was lost already (raises that)."""
        lost = self._doomed.pop(request_id, None)
        if lost is not None:
            raise lost
        self.held[name] = grant.token
        return grant

    def close(self, request_id: int) -> None:
        """The acquire is over, however it ended."""
        self.pending.pop(request_id, None)
        self._doomed.pop(request_id, None)

    # -- what the engine tells -----------------------------------------------------------

    def granted(self, request_id: int, grant: Grant) -> None:
        """A queued acquire was granted (a push, or found on re-attach)."""
        pending = self.pending.get(request_id)
        if pending is not None and not pending.future.done():
            pending.future.set_result(grant)

    def failed(self, request_id: int, error: BaseException) -> None:
        """A queued acquire ended without a grant."""
        pending = self.pending.get(request_id)
        if pending is not None and not pending.future.done():
            pending.future.set_exception(error)

    def lose(self, name: str, token: int, error: LostError) -> bool:
        """The grant ``token`` on ``name`` ended; True if a caller held it (tell it).

        A grant its caller has not taken yet is doomed instead: that acquire raises.
        """
        if self.held.get(name) == token:
            del self.held[name]
            return True
        for request_id, pending in self.pending.items():
            if pending.name == name and _granted(pending.future) == token:
                self._doomed[request_id] = error
        return False

    def end(self, error: LostError) -> None:
        """The session is gone: every acquire still waiting fails with ``error``."""
        for pending in self.pending.values():
            if not pending.future.done():
                pending.future.set_exception(error)
                pending.future.exception()  # retrieved, so an unawaited one does not warn
        self.pending.clear()
        self.held.clear()

    # -- agreeing after a re-attach (module docstring) ------------------------------------

    def settle(self, page: SessionState, after: str) -> Settled:
        """Agree with one page of the session's state, read just now.

        ``after`` is the page's start: it covers the semaphores named after it, up to
        and including ``page.next_after`` (to the end on the last page). The missed
        endings of the page are taken as pushes first (the session delivers them).
        """

        def covered(name: str) -> bool:
            return name > after and (page.next_after is None or name <= page.next_after)

        holds = {hold.name: hold for hold in page.holds}
        waits = {wait.name: wait for wait in page.waits}
        lost = {m.name: m for m in page.missed if isinstance(m, LeaseLost)}
        settled = Settled()
        asked: set[str] = set()
        for request_id, pending in self.pending.items():
            if not covered(pending.name):
                continue
            asked.add(pending.name)
            if pending.future.done():
                continue  # its caller takes it (or withdraws it) from here
            name = pending.name
            hold, wait, gone = holds.get(name), waits.get(name), lost.get(name)
            known = (self.held.get(name), self.releasing.get(name))
            if wait is not None and wait.request_id == request_id:
                pending.queued = True  # (its QUEUED answer may have been lost)
            elif hold is not None and hold.token not in known:
                pending.future.set_result(Grant(hold.token, hold.count, hold.lease_ttl))
            elif not pending.queued:
                pass  # it may never have reached the engine: its caller sends it again
            elif gone is not None and gone.token not in known:
                # Granted, and lost again before the client heard of either.
                pending.future.set_exception(error_from_code(gone.code, gone.message))
            else:  # it ended, and nothing kept how: say so rather than wait for ever
                pending.future.set_exception(
                    UnavailableError(
                        f"the acquire of {name!r} ended while the connection was down, "
                        "and how it ended was lost"
                    )
                )
        for name, token in list(self.held.items()):
            hold = holds.get(name)
            if covered(name) and (hold is None or hold.token != token):
                error = LeaseLostError(f"the grant of {name!r} ended while the connection was down")
                if self.lose(name, token, error):
                    settled.lost.append((name, token, error))
        for name in holds:
            if name not in asked and name not in self.held and name not in self.releasing:
                settled.drop.append(Release(self.session_id, name))
        for name, wait in waits.items():
            waiting = self.pending.get(wait.request_id)
            if waiting is None or waiting.name != name:
                settled.drop.append(CancelAcquire(self.session_id, name, wait.request_id))
        return settled


def _granted(future: asyncio.Future[Grant]) -> int | None:
    """The token ``future`` was resolved with, or None (pending, failed or cancelled)."""
    if not future.done() or future.cancelled() or future.exception() is not None:
        return None
    return future.result().token
