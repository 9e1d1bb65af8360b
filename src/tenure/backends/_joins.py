"""One client's requests join a semaphore's queue one at a time, in the order made.

A client that sends the requests of several tasks (of all its sessions) over
several connections cannot otherwise say in which order the store sees them: two
calls in flight at once may be applied the other way round. :class:`JoinLocks`
keeps one first-come, first-served lock per semaphore (asyncio's Lock wakes its
waiters in order), so each join is answered before the next is sent, and FIFO
holds down to this client's calls. A lock nobody uses any more is forgotten, so
the table stays as small as the joins in progress.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

__all__ = ["JoinLocks"]


class JoinLocks:
    """One lock per ``(scope, name)`` while somebody holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[tuple[str, str], tuple[asyncio.Lock, int]] = {}

    def __len__(self) -> int:
        """How many semaphores have a join in progress (or waiting) here."""
        return len(self._locks)

    @contextlib.asynccontextmanager
    async def held(self, scope: str, name: str) -> AsyncIterator[None]:
        """Held while a request joins ``name``'s queue (``scope``: its node)."""
        key = (scope, name)
        lock, users = self._locks.get(key) or (asyncio.Lock(), 0)
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)
