"""What a client believes one engine session holds and waits for, and how it agrees again.

:class:`HoldLedger` is the bookkeeping of every
:class:`~tenure.backends._session.StoreSession`, with no I/O: the acquires in
progress (by request id), the grants handed to callers and not released or lost (by
:data:`Place`: semaphore name and hold number), which hold numbers are free, and the
rules that settle it against a page of the engine's own account
(:class:`~tenure._core.SessionState`).

A push is sent once: one written to a connection that then died, or queued by a
server that then restarted, is lost. So after every re-attach the session reads
its state back page by page, and :meth:`HoldLedger.settle` each page as it arrives,
before any later push (which is newer, and applies on top):

* an acquire still waiting to hear is queued (the engine lists its request id),
  granted (the session holds the semaphore with a token the client has not seen),
  failed (its ending is among the ``missed``: a timeout, a deletion), granted and
  lost again (a ``missed`` LeaseLost of a token the client has not seen), or, if it
  may never have reached the engine, left for its caller to send again;
* a grant the client holds that the engine no longer lists is lost;
* a hold or a queued acquire the client knows nothing about (an answer lost with a
  connection) is released or cancelled.

Each hold of the session on a semaphore has its own number (the engine keeps
them apart): a new acquire takes the lowest number not in use (pending, held or
being released), so one acquire or hold per number at a time, a restatement of
that hold aside.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from tenure._core import CancelAcquire, Command, LeaseLost, Release, SessionState
from tenure.backends._base import Grant
from tenure.errors import (
    LeaseLostError,
    LostError,
    TenureError,
    UnavailableError,
    error_from_code,
)

__all__ = ["HoldLedger", "Pending", "Place", "Settled"]

#: Where a grant is: the semaphore's name and the session's hold number there.
Place: TypeAlias = tuple[str, int]


@dataclass(slots=True)
class Pending:
    """An acquire in progress: what it asks, its outcome, whether it is queued.

    ``restating``: it asks again for a hold the session has (a restate, or an
    upgrade that queues). ``task``: the client's number of the task that asks (0:
    not known), for a store that detects deadlocks. ``max_hold``: the grant's bound in
    seconds (None: none of its own; :attr:`Capability.MAX_HOLD`). ``state`` is the store's own,
    between its enqueue and its wait (:class:`~tenure.backends._store.Store`).
    """

    request_id: int
    name: str
    hold: int
    future: asyncio.Future[Grant]
    count: int = 1
    data: bytes = b""
    timeout: float | None = None
    ephemeral: bool = False
    restating: bool = False
    queued: bool = False
    state: Any = None
    task: int = 0
    max_hold: float | None = None

    @property
    def place(self) -> Place:
        """Its semaphore and hold number."""
        return self.name, self.hold


@dataclass(slots=True)
class Settled:
    """What settling a page asks of the session: grants to declare lost, commands to send.

    ``lost`` are ``(place, token, error)`` of grants the client holds that the
    engine no longer has (the session tells them lost: :meth:`HoldLedger.lose`);
    ``drop`` are the Releases and CancelAcquires of what the engine keeps that
    nobody asked for (send them before anything else).
    """

    lost: list[tuple[Place, int, LostError]] = field(default_factory=list)
    drop: list[Command[Any]] = field(default_factory=list)


class HoldLedger:
    """See the module docstring."""

    def __init__(self, session_id: int) -> None:
        self.session_id = session_id
        #: Acquires in progress, by their request id.
        self.pending: dict[int, Pending] = {}
        #: Grants handed to callers and neither released nor lost.
        self.held: dict[Place, Grant] = {}
        #: Grants being released (no longer held, their release not answered yet).
        self.releasing: dict[Place, Grant] = {}
        #: Grants being released that the store ended first (:meth:`lose`): the loss,
        #: which their release's answer gives (:mod:`tenure.backends._release`).
        self.ended_first: dict[Place, LostError] = {}
        # Grants lost before their caller took them (a LeaseLost right after the
        # Granted, before the waiting task ran): request id -> the loss to raise.
        self._doomed: dict[int, LostError] = {}
        # Grants of a name ended below a token (a store heard a forced delete of the
        # semaphore at that token before an acquire of it took its grant: its answer
        # came later): name -> (token, the loss). Kept while an acquire of it is open.
        self._ended_below: dict[str, tuple[int, LostError]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def empty(self) -> bool:
        """Nothing asked for, held or being released: a re-attach has nothing to settle.

        (What the engine might keep unasked comes only from an acquire whose answer
        was lost, and such an acquire is pending until it is settled or withdrawn.)
        """
        return not (self.pending or self.held or self.releasing)

    # -- one acquire ------------------------------------------------------------------

    def free_hold(self, name: str) -> int:
        """The lowest hold number on ``name`` with no acquire, grant or release in progress.

        (Not one being released: until its Release is answered, an Acquire of the
        same number would restate the hold that is going away.)
        """
        if not self.pending and (name, 0) not in self.held and (name, 0) not in self.releasing:
            return 0  # the common case, without building a set
        busy = {p.hold for p in self.pending.values() if p.name == name}
        hold = 0
        while hold in busy or (name, hold) in self.held or (name, hold) in self.releasing:
            hold += 1
        return hold

    def open(
        self,
        request_id: int,
        name: str,
        hold: int,
        count: int = 1,
        data: bytes = b"",
        timeout: float | None = None,
        ephemeral: bool = False,
        restating: bool = False,
        task: int = 0,
        max_hold: float | None = None,
    ) -> Pending:
        """An acquire of hold ``hold`` starts (its outcome is awaited on the future)."""
        if self._loop is None:
            # (Kept: asyncio.get_running_loop() costs a getpid() call in Python 3.11.)
            self._loop = asyncio.get_running_loop()
        future: asyncio.Future[Grant] = self._loop.create_future()
        pending = self.pending[request_id] = Pending(
            request_id,
            name,
            hold,
            future,
            count,
            data,
            timeout,
            ephemeral,
            restating,
            task=task,
            max_hold=max_hold,
        )
        return pending

    def take(self, request_id: int, place: Place, grant: Grant) -> Grant:
        """The caller takes its grant: now held, unless it was lost already (raises that)."""
        lost = self._doomed.pop(request_id, None)
        if lost is not None:
            raise lost
        ended = self._ended_below.get(place[0]) if self._ended_below else None
        if ended is not None and grant.token < ended[0]:
            raise type(ended[1])(*ended[1].args)
        self.held[place] = grant
        return grant

    def close(self, request_id: int) -> None:
        """The acquire is over, however it ended (its hold number is free again)."""
        pending = self.pending.pop(request_id, None)
        self._doomed.pop(request_id, None)
        if self._ended_below and pending is not None and not self._opened(pending.name):
            self._ended_below.pop(pending.name, None)
        if pending is not None and pending.future.done() and not pending.future.cancelled():
            pending.future.exception()  # retrieved: its caller may have left before it ended

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

    def lose(self, place: Place, token: int, error: LostError) -> bool:
        """The grant ``token`` at ``place`` ended; True if a caller held it (tell it).

        A grant being released (its release sent, not answered yet) ended before the
        store applied the release (adopted by another session, its max_hold passed,
        deleted by force): the release gave nothing back, and its answer is the loss
        (:attr:`ended_first`). A grant its caller has not taken yet is doomed
        instead: that acquire raises.
        """
        held = self.held.get(place)
        if held is not None and held.token == token:
            del self.held[place]
            return True
        releasing = self.releasing.get(place)
        if releasing is not None and releasing.token == token:
            self.ended_first[place] = error  # (its number stays taken until the answer)
            return False
        for request_id, pending in self.pending.items():
            if pending.place == place and _granted(pending.future) == token:
                self._doomed[request_id] = error
        return False

    def lose_below(self, name: str, token: int, error: LostError) -> None:
        """Every grant of ``name`` with a token below ``token`` ended (a forced delete
        the store heard at ``token``). The held ones are the store's to tell
        (:meth:`lose`); this covers an open acquire whose grant is older but whose
        answer comes later: its :meth:`take` raises ``error``'s kind."""
        if self._opened(name):
            kept = self._ended_below.get(name)
            if kept is None or kept[0] < token:
                self._ended_below[name] = (token, error)

    def _opened(self, name: str) -> bool:
        """Whether an acquire of ``name`` is open."""
        return any(pending.name == name for pending in self.pending.values())

    def end(self, error: TenureError) -> None:
        """The session is gone: every acquire still waiting fails with ``error``."""
        for pending in self.pending.values():
            if not pending.future.done():
                pending.future.set_exception(type(error)(*error.args))  # one copy each
                pending.future.exception()  # retrieved, so an unawaited one does not warn
        self.pending.clear()
        self.held.clear()
        self.ended_first.clear()

    # -- agreeing after a re-attach (module docstring) ------------------------------------

    def settle(self, page: SessionState, after: str) -> Settled:
        """Agree with one page of the session's state, read just now.

        ``after`` is the page's start: it covers the semaphores named after it, up to
        and including ``page.next_after`` (to the end on the last page). The missed
        endings of the page are taken as pushes first (the session delivers them).
        """

        def covered(name: str) -> bool:
            return name > after and (page.next_after is None or name <= page.next_after)

        holds = {(hold.name, hold.hold): hold for hold in page.holds}
        waits = {(wait.name, wait.hold): wait for wait in page.waits}
        lost = {(m.name, m.hold): m for m in page.missed if isinstance(m, LeaseLost)}
        settled = Settled()
        asked: set[Place] = set()
        for request_id, pending in self.pending.items():
            if not covered(pending.name):
                continue
            place = pending.place
            asked.add(place)
            if pending.future.done():
                continue  # its caller takes it (or withdraws it) from here
            hold, wait, gone = holds.get(place), waits.get(place), lost.get(place)
            known = (_token(self.held.get(place)), _token(self.releasing.get(place)))
            if wait is not None and wait.request_id == request_id:
                pending.queued = True  # (its QUEUED answer may have been lost)
            elif hold is not None and hold.token not in known:
                grant = Grant(hold.token, hold.count, hold.lease_ttl, hold.hold)
                pending.future.set_result(grant)
            elif not pending.queued:
                pass  # it may never have reached the engine: its caller sends it again
            elif gone is not None and gone.token not in known:
                # Granted, and lost again before the client heard of either.
                pending.future.set_exception(error_from_code(gone.code, gone.message))
            else:  # it ended, and nothing kept how: say so rather than wait for ever
                pending.future.set_exception(
                    UnavailableError(
                        f"the acquire of {pending.name!r} ended while the connection was "
                        "down, and how it ended was lost"
                    )
                )
        missing: set[Place] = set()
        for place, held in self.held.items():
            hold = holds.get(place)
            if covered(place[0]) and (hold is None or hold.token != held.token):
                error = LeaseLostError(
                    f"the grant of {place[0]!r} ended while the connection was down"
                )
                settled.lost.append((place, held.token, error))
                missing.add(place)
        for place in holds:
            mine = place in self.held and place not in missing
            if place not in asked and not mine and place not in self.releasing:
                settled.drop.append(Release(self.session_id, *place))
        for place, wait in waits.items():
            waiting = self.pending.get(wait.request_id)
            if waiting is None or waiting.place != place:
                name, number = place
                settled.drop.append(CancelAcquire(self.session_id, name, wait.request_id, number))
        return settled


def _token(grant: Grant | None) -> int | None:
    return None if grant is None else grant.token


def _granted(future: asyncio.Future[Grant]) -> int | None:
    """The token ``future`` was resolved with, or None (pending, failed or cancelled)."""
    if not future.done() or future.cancelled() or future.exception() is not None:
        return None
    return future.result().token
