"""A session's acquires: one hold, or an all-or-none set of holds, awaited to their end.

The rules are :mod:`tenure.backends._session`'s (its docstring: "Hold numbers", "A
cancelled acquire"); this module carries them out for one
:class:`~tenure.backends._session.StoreSession`. An acquire opens a
:class:`~tenure.backends._ledger.Pending` under a hold number the session chose,
asks the store's :class:`~tenure.backends._store.Acquiring` (``enqueue``, or
``enqueue_all`` for a set: one pending per name, sent as one), waits for the grant
if it was queued, and hands the grant to the caller through the ledger. If the
caller is cancelled, or the store could not be reached (UnavailableError: applied
or not, granted or queued), the request is withdrawn in a task of its own (a second
cancellation cannot stop it), and a grant that raced it is released, except a
restate's, which replaced the hold and is kept as the hold; the caller waits for
that at most ``withdraw_wait``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, Protocol, TypeVar

from tenure.backends._base import Grant
from tenure.backends._ledger import HoldLedger, Pending
from tenure.backends._release import Releases
from tenure.backends._store import QUEUED, Acquiring, Withdrawal
from tenure.errors import LostError, UnavailableError

__all__ = ["Acquires", "AcquiresHome"]

R = TypeVar("R")


class AcquiresHome(Protocol):
    """What :class:`Acquires` may ask of its home, the session (a
    :class:`~tenure.backends._session.StoreSession`, which imports this module)."""

    ledger: HoldLedger
    ended: LostError | None
    withdraw_wait: float

    def until_answered(self, call: Callable[..., Awaitable[R]], *args: Any) -> Awaitable[R]:
        """``call(*args)`` sent until the store answers or the session ends."""
        ...

    def background(self, coro: Coroutine[Any, Any, object]) -> asyncio.Future[None]:
        """Run ``coro`` in the background, errors logged; the task it runs in."""
        ...


class Acquires:
    """The acquires of one session (module docstring), made in the store by ``acquiring``."""

    __slots__ = ("_acquiring", "_releases", "_session")

    def __init__(self, session: AcquiresHome, acquiring: Acquiring, releases: Releases) -> None:
        self._session = session
        self._acquiring = acquiring
        self._releases = releases

    async def one(
        self,
        name: str,
        hold: int,
        count: int,
        data: bytes,
        timeout: float | None,
        ephemeral: bool,
        restating: bool,
        task: int,
        max_hold: float | None = None,
    ) -> Grant | None:
        """One acquire of hold ``hold``, awaited to its end (granted, busy, or raised);
        its grant ends ``max_hold`` seconds after it is made (None: no bound of its own)."""
        session, store = self._session, self._acquiring
        ledger = session.ledger
        request_id = store.new_request_id()
        pending = ledger.open(
            request_id, name, hold, count, data, timeout, ephemeral, restating, task, max_hold
        )
        withdrawing = False
        try:
            try:
                enqueued = await store.enqueue(pending)
                if enqueued is QUEUED:
                    pending.queued = True
                    waited = await store.await_grant(pending)
                    if waited is None:
                        return None
                    grant = waited
                elif enqueued is None:
                    return None
                else:
                    grant = enqueued
            except (asyncio.CancelledError, UnavailableError):
                # Applied or not, granted or queued: undo whatever it did.
                if session.ended is None:
                    withdrawing = True
                    await self._give_up(pending)
                raise
            return ledger.take(request_id, (name, hold), grant)  # (its place)
        finally:
            if not withdrawing:
                ledger.close(request_id)

    async def all(
        self,
        names: Sequence[str],
        count: int,
        data: bytes,
        timeout: float | None,
        ephemeral: bool,
        task: int,
    ) -> list[Grant] | None:
        """An all-or-none set: one pending acquire per name, sent as one, each awaited
        and withdrawn as :meth:`one`'s; every grant, or None (busy)."""
        session, store = self._session, self._acquiring
        ledger = session.ledger
        pendings: list[Pending] = []
        for name in names:
            request_id = store.new_request_id()
            hold = ledger.free_hold(name)
            pendings.append(
                ledger.open(request_id, name, hold, count, data, timeout, ephemeral, task=task)
            )
        withdrawing = False
        try:
            try:
                enqueued = await store.enqueue_all(pendings)
                if enqueued is QUEUED:
                    for pending in pendings:
                        pending.queued = True
                    # One step grants (or fails) every member: one wait is all waits.
                    waited = [await store.await_grant(pending) for pending in pendings]
                    if any(grant is None for grant in waited):
                        return None
                    grants = [grant for grant in waited if grant is not None]
                elif enqueued is None:
                    return None
                else:
                    grants = enqueued
            except (asyncio.CancelledError, UnavailableError):
                if session.ended is None:
                    withdrawing = True
                    await asyncio.gather(*(self._give_up(pending) for pending in pendings))
                raise
            return self._take_all(pendings, grants)
        finally:
            if not withdrawing:
                for pending in pendings:
                    ledger.close(pending.request_id)

    def _take_all(self, pendings: list[Pending], grants: list[Grant]) -> list[Grant]:
        """Hand every grant to the caller, or none: one lost already (a loss pushed
        right after the grants) releases those taken and raises."""
        ledger = self._session.ledger
        taken: list[tuple[str, Grant]] = []
        try:
            for pending, grant in zip(pendings, grants, strict=True):
                taken.append((pending.name, ledger.take(pending.request_id, pending.place, grant)))
        except LostError:
            for name, grant in taken:
                self._releases.start(name, grant)
            raise
        return [grant for _, grant in taken]

    async def _give_up(self, pending: Pending) -> None:
        """The caller gave up on ``pending``: withdraw it (module docstring), waiting at
        most ``withdraw_wait``; the hold's number stays taken until it is through."""
        session = self._session
        task = session.background(self._withdraw(pending))
        task.add_done_callback(lambda _: session.ledger.close(pending.request_id))
        await asyncio.wait({task}, timeout=session.withdraw_wait)

    async def _withdraw(self, pending: Pending) -> None:
        session, store = self._session, self._acquiring
        outcome = await session.until_answered(store.withdraw, pending)
        if outcome is Withdrawal.WITHDRAWN:
            return
        grant = outcome if isinstance(outcome, Grant) else _grant_of(pending.future)
        if pending.restating and pending.place in session.ledger.held:
            # A restate that was granted replaced the hold, which the session keeps.
            if grant is not None:
                session.ledger.held[pending.place] = grant
            return
        await session.until_answered(store.release, pending.name, pending.hold)


def _grant_of(future: asyncio.Future[Grant]) -> Grant | None:
    """The grant ``future`` was resolved with, or None (pending, failed or cancelled)."""
    if not future.done() or future.cancelled() or future.exception() is not None:
        return None
    return future.result()
