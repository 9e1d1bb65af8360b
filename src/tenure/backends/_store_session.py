"""What the sessions this client keeps in a store (etcd, PostgreSQL) share.

Both keep the session's state on this side: the grants it holds by
``(name, hold)``, the holds with a request in flight, and how it ended. They end
the same way (the engine's way): a session whose node was dropped by force ends
with SessionClosedError, its grants lost with LeaseLostError and its waits with
NotFoundError; any other loss ends grants and waits with the loss itself, and the
listener hears of it once. :class:`StoreSession` is that part; a backend adds its
own :meth:`StoreSession._end` (timers, streams, subscriptions to stop).

Both also keep **the local deadline**: a session is given up on this client's
monotonic clock a span (its window, its lease's TTL) after the *send* time of the
last renewal the store answered. The store cannot have kept it longer, so the
work under it is cancelled then, not when the store is heard from again.
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Coroutine
from typing import Any, Generic, Protocol, TypeVar

from tenure.backends._base import SessionListener
from tenure.errors import (
    LeaseLostError,
    LostError,
    NotFoundError,
    SessionClosedError,
    TenureError,
)

__all__ = ["StoreSession", "Token"]


class Token(Protocol):
    """What a session keeps of a grant it holds: at least the grant's token."""

    @property
    def token(self) -> int:
        """The grant's fencing token."""
        ...


HeldT = TypeVar("HeldT", bound=Token)


class StoreSession(ABC, Generic[HeldT]):
    """Loss, hold numbers and background work of a session kept by this client.

    Subclasses set, in their ``__init__``, every attribute declared here.
    """

    #: Where background failures are logged (the backend's logger).
    log: logging.Logger
    node: str
    listener: SessionListener
    ended: LostError | None
    #: What a wait fails with once the session ended (NotFound if the node was dropped).
    wait_error: TenureError | None
    #: Grants by (name, hold); holds with a request in flight.
    held: dict[tuple[str, int], HeldT]
    busy: set[tuple[str, int]]
    _tasks: set[asyncio.Future[Any]]
    #: The send time of the last renewal the store answered (loop time).
    _confirmed: float
    _loop: asyncio.AbstractEventLoop
    _timer: asyncio.TimerHandle | None

    @property
    @abstractmethod
    def session_id(self) -> int:
        """The session's id in the store."""

    @abstractmethod
    def _end(self, error: LostError, wait_error: TenureError) -> None:
        """End the session: keep ``error`` and ``wait_error``, stop everything it runs."""

    @abstractmethod
    def _deadline_span(self) -> float:
        """Seconds after ``_confirmed`` at which the store may have ended the session."""

    @abstractmethod
    def _deadline_passed(self) -> None:
        """The local deadline passed with no renewal answered: lose the session."""

    def _arm_deadline(self) -> None:
        """Set the timer at the local deadline (call once the fields above are set)."""
        self._timer = self._loop.call_at(
            self._confirmed + self._deadline_span(), self._check_deadline
        )

    def _check_deadline(self) -> None:
        self._timer = None
        if self.ended is not None:
            return
        if self._loop.time() < self._confirmed + self._deadline_span():
            self._arm_deadline()  # renewed meanwhile: the deadline moved
            return
        self._deadline_passed()

    def _disarm_deadline(self) -> None:
        """Stop the local deadline's timer (the session ended)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def dropped(self) -> None:
        """The node was dropped by force: grants lost, waits not found, session closed."""
        if self.ended is not None:
            return
        message = f"node {self.node!r} was dropped"
        for (name, _), held in list(self.held.items()):
            self.listener.lease_lost(name, held.token, LeaseLostError(message))
        self.held.clear()
        self._end(SessionClosedError(message), NotFoundError(message))
        self.listener.session_lost(SessionClosedError(message))

    def lose(self, error: LostError) -> None:
        """The session is lost: end it and tell the listener (once)."""
        if self.ended is not None:
            return
        self._end(error, error)
        self.listener.session_lost(error)

    def wait_failure(self) -> TenureError:
        """A fresh copy of the error a wait ends with now that the session ended."""
        error = self.wait_error or self.ended
        assert error is not None
        return type(error)(*error.args)

    def check_alive(self) -> None:
        """Raise the session's loss error if it ended."""
        if self.ended is not None:
            raise type(self.ended)(*self.ended.args)

    def free_hold(self, name: str) -> int:
        """The lowest hold number of ``name`` neither held nor being requested."""
        hold = 0
        while (name, hold) in self.busy or (name, hold) in self.held:
            hold += 1
        return hold

    def spawn(self, coro: Coroutine[Any, Any, object]) -> None:
        """Run ``coro`` in the background (errors are logged: there is no caller)."""

        async def run() -> None:
            try:
                await coro
            except TenureError as error:
                self.log.info("session %d: background work failed: %s", self.session_id, error)

        task = asyncio.ensure_future(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
