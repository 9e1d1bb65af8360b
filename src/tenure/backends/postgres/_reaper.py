"""Triggering expiry: a timer per node at the next deadline the database named.

The database's clock decides what is due; a client only *asks* (``reap(node)``)
when the database said something would be: every answer of ``open_session``,
``heartbeat`` and ``reap`` carries the seconds until the node's next deadline (a
session's window, a queued request's timeout), and this client arms one timer per
node it has sessions on at that moment. ``reap`` ends a bounded batch; while it
says more are due, it is called again, at most :data:`MAX_ROUNDS` times in a row.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Final

from tenure.errors import TenureError

if TYPE_CHECKING:
    from tenure.backends.postgres._calls import Caller

__all__ = ["Reaper"]

log = logging.getLogger("tenure.postgres")

#: Calls of ``reap`` in a row while it says more is due (then the next timer).
MAX_ROUNDS: Final = 64
#: Seconds after the named deadline the timer fires (the database must see it past).
SLACK: Final = 0.005


class Reaper:
    """The reap timers of one client (see the module docstring)."""

    def __init__(self, caller: Caller) -> None:
        self.caller = caller
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._users: dict[str, int] = {}
        self._running: dict[str, asyncio.Task[None]] = {}

    def add(self, node: str) -> None:
        """A session of this client lives on ``node``."""
        self._users[node] = self._users.get(node, 0) + 1

    def remove(self, node: str) -> None:
        """One of them ended; the node's timer stops with the last."""
        users = self._users.get(node, 0) - 1
        if users > 0:
            self._users[node] = users
            return
        self._users.pop(node, None)
        timer = self._timers.pop(node, None)
        if timer is not None:
            timer.cancel()

    def due(self, node: str, seconds: float | None) -> None:
        """The database says the node's next deadline is ``seconds`` from now."""
        if node not in self._users or seconds is None:
            return
        old = self._timers.pop(node, None)
        if old is not None:
            old.cancel()
        loop = asyncio.get_running_loop()
        self._timers[node] = loop.call_later(max(0.0, seconds) + SLACK, self._fire, node)

    def _fire(self, node: str) -> None:
        self._timers.pop(node, None)
        running = self._running.get(node)
        if running is None or running.done():
            self._running[node] = asyncio.ensure_future(self._reap(node))

    async def _reap(self, node: str) -> None:
        for _ in range(MAX_ROUNDS):
            try:
                answer = await self.caller.call("reap", [node])
            except TenureError as error:
                log.info("reap of node %r failed: %s", node, error)
                self.due(node, 1.0)
                return
            if not answer.get("more"):
                self.due(node, answer.get("next"))
                return
        self.due(node, 0.0)

    async def close(self) -> None:
        """Stop every timer and reap in progress."""
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        for task in self._running.values():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        self._running.clear()
