"""A session's ttl: it ends unless the application renews it in time.

``client.session(node, ttl=30)`` opens a session that lives only while its holder
says so: ``await session.renew()`` at least every ``ttl`` seconds. Where a
connection (``tenure://``, ``memory://``) or the client's own heartbeats (etcd,
Redis, PostgreSQL) keep a session alive, they only prove that the *process* runs;
a ttl proves that the application in it still makes progress (Consul's TTL
sessions, tooz's heartbeats). A worker thread stuck in a call, a deadlock, a loop
that no longer turns over its jobs: it stops renewing, and its locks, memberships
and leadership go to others.

The :class:`Watchdog` is this client's, on its event loop's monotonic clock: at
the deadline (the last renewal, or the opening, plus ``ttl``) the session is lost
with SessionExpiredError, exactly as an expiry is told (every lease lost, every
``async with`` body cancelled), and it is closed in the store, which releases what
it held at once. The store is not asked to time anything: a process that dies, or
is frozen whole, loses the session by the store's usual rule instead, its
recovery window after its connection (or its heartbeats) stopped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Final

from tenure._core.values import MAX_RECOVERY_WINDOW, check_duration
from tenure.errors import SessionExpiredError

__all__ = ["MAX_TTL", "Watchdog", "check_ttl"]

#: The longest ttl a session may have, in seconds (a day, as a recovery window).
MAX_TTL: Final = MAX_RECOVERY_WINDOW


def check_ttl(value: object) -> float | None:
    """A session's ``ttl``: None (renewed by its connection alone) or seconds, at most
    :data:`MAX_TTL`; InvalidArgumentError naming ``ttl`` otherwise."""
    if value is None:
        return None
    return check_duration("ttl", value, maximum=MAX_TTL)


class Watchdog:
    """Ends a session ``ttl`` seconds after its last renewal (module docstring).

    ``expire(error)`` is what ends the session; it is called once, on the loop, at
    the first deadline that no renewal moved.
    """

    __slots__ = ("_deadline", "_expire", "_loop", "_timer", "describe", "ttl")

    def __init__(
        self, ttl: float, describe: Callable[[], str], expire: Callable[[SessionExpiredError], None]
    ) -> None:
        self.ttl = ttl
        #: Names the session in the loss's message (its id is known once it is open).
        self.describe = describe
        self._expire = expire
        self._loop = asyncio.get_running_loop()
        self._deadline = self._loop.time() + ttl
        self._timer: asyncio.TimerHandle | None = self._loop.call_at(self._deadline, self._check)

    def renew(self) -> None:
        """Move the deadline to ``ttl`` seconds from now (the timer follows lazily)."""
        if self._timer is not None:
            self._deadline = self._loop.time() + self.ttl

    def stop(self) -> None:
        """The session ended: no deadline any more. Idempotent."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _check(self) -> None:
        # One timer at a time, armed again at the deadline a renewal moved (cheaper
        # than cancelling and arming one per renewal).
        if self._loop.time() < self._deadline:
            self._timer = self._loop.call_at(self._deadline, self._check)
            return
        self._timer = None
        self._expire(
            SessionExpiredError(
                f"{self.describe()} was not renewed within its ttl ({self.ttl:g}s): "
                "this client ended it"
            )
        )
