"""A session's liveness on this client: the local deadline, and the heartbeats.

The rules are :mod:`tenure.backends._session`'s (its docstring: "The local
deadline", "Heartbeats"); this module carries them out for one
:class:`~tenure.backends._session.StoreSession`. A timer is armed at the session's
local deadline, the store's :meth:`~tenure.backends._store.Store.confirmed_at` plus
the window, on this client's monotonic clock; when it fires and the deadline has
not moved (a renewal moves it: the timer is armed again), the session is lost with
SessionExpiredError and closed in the store as soon as the store answers. A store
that renews sessions one by one (:attr:`Store.beat_period`) is sent a heartbeat each
period, and again after a pause growing from :data:`RETRY_MIN` to :data:`RETRY_MAX`
while it does not answer; a heartbeat answered with the session's loss loses it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, Final, Protocol

from tenure.backends._store import Store
from tenure.errors import LostError, SessionExpiredError, TenureError, UnavailableError

__all__ = ["RETRY_MAX", "RETRY_MIN", "Liveness", "LivenessHome"]

log = logging.getLogger("tenure.client")

#: Shortest and longest pause between two tries of a change the store did not answer.
RETRY_MIN: Final = 0.05
RETRY_MAX: Final = 1.0


class LivenessHome(Protocol):
    """What :class:`Liveness` may ask of its home, the session (a
    :class:`~tenure.backends._session.StoreSession`, which imports this module)."""

    @property
    def session_id(self) -> int:
        """The store's id of the session, for the log and the loss's message."""
        ...

    ended: LostError | None

    def lose(self, error: LostError) -> None:
        """The session is lost: end it and tell the listener (once)."""
        ...

    def spawn(self, coro: Coroutine[Any, Any, object]) -> None:
        """Run ``coro`` in the background (errors are logged)."""
        ...


class Liveness:
    """The local deadline and the heartbeats of one session (module docstring)."""

    __slots__ = ("_beating", "_loop", "_session", "_store", "_timer", "_window")

    def __init__(self, session: LivenessHome, store: Store, window: float) -> None:
        self._session = session
        self._store = store
        self._window = window
        self._loop = asyncio.get_running_loop()
        self._timer: asyncio.TimerHandle | None = None
        self._beating: asyncio.Task[None] | None = None
        self._arm_deadline()
        if store.beat_period is not None:
            self._beating = asyncio.create_task(self._heartbeats(store.beat_period))

    def deadline_passed(self) -> bool:
        """Give the session up if its local deadline passed; whether it has ended."""
        session = self._session
        if session.ended is not None:
            return True
        if self._loop.time() < self._store.confirmed_at() + self._window:
            return False
        session.lose(
            SessionExpiredError(
                f"session {session.session_id}: {self._store.where} has not answered for "
                f"its recovery window ({self._window:g}s); it may have expired it"
            )
        )
        # The store may keep it still: end it there as soon as the store answers.
        session.spawn(self._store.close())
        return True

    def stop(self) -> None:
        """The session ended: no more deadline, no more heartbeats (a heartbeat that
        ended it is not cancelled under itself)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._beating is not None and self._beating is not asyncio.current_task():
            self._beating.cancel()

    def _arm_deadline(self) -> None:
        at = self._store.confirmed_at() + self._window
        if at != float("inf"):
            self._timer = self._loop.call_at(at, self._check_deadline)

    def _check_deadline(self) -> None:
        self._timer = None
        if not self.deadline_passed():
            self._arm_deadline()  # renewed meanwhile: the deadline moved

    async def _heartbeats(self, period: float) -> None:
        session, store = self._session, self._store
        pause, failures = period, 0
        while session.ended is None:
            await asyncio.sleep(pause)
            if session.ended is not None:
                return
            try:
                await store.heartbeat()
            except UnavailableError as error:
                log.info("session %d: heartbeat not answered: %s", session.session_id, error)
            except LostError as error:
                session.lose(error)
                return
            except TenureError as error:
                log.warning("session %d: heartbeat refused: %s", session.session_id, error)
            else:
                pause, failures = period, 0
                continue
            pause = min(period, RETRY_MAX, RETRY_MIN * 2**failures)
            failures += 1
