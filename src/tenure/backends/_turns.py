"""One client's requests join a semaphore's queue one at a time, in the order made.

A client sends the requests of all its tasks (of all its sessions) over a channel
or a pool of connections, and the store may apply two calls in flight at once the
other way round (etcd serves each call in a goroutine of its own; two pooled
connections to Redis or PostgreSQL commit in either order). So each join takes the
semaphore's *turn*: it is sent only when the join made before it (by this client)
was answered, and FIFO holds down to this client's calls. Every backend that
joins a queue in its store uses these turns (etcd://, redis://, postgres://).

An uncontended join costs a dict entry put and removed, no lock and no future (an
acquire of a name nobody here is joining is the common case: an ``asyncio.Lock``
per name behind a context manager cost an acquire of ``etcd://`` more than its
Txn's building). A second join of the same name waits on a future, and turns are
handed over in the order asked. :meth:`Turns.held` wraps the three steps in a
context manager for callers off the hottest path.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import AsyncIterator, Hashable
from typing import Generic, TypeVar

__all__ = ["Turns"]

K = TypeVar("K", bound=Hashable)


class Turns(Generic[K]):
    """The turns of one client's joins, by semaphore (a key naming it in its store)."""

    def __init__(self) -> None:
        #: A semaphore whose turn is taken: None while nobody else waits for it, else
        #: the futures of those who do, in the order they asked.
        self._taken: dict[K, collections.deque[asyncio.Future[None]] | None] = {}

    def __len__(self) -> int:
        """How many semaphores have a join in progress (or waiting) here."""
        return len(self._taken)

    def take(self, key: K) -> asyncio.Future[None] | None:
        """Take ``key``'s turn: None if it is ours now (nobody here has it), else the
        future that hands it over (:meth:`wait` for it). :meth:`give` it back after."""
        taken = self._taken
        if key not in taken:
            taken[key] = None
            return None
        waiting = taken[key]
        if waiting is None:
            waiting = taken[key] = collections.deque()
        turn = asyncio.get_running_loop().create_future()
        waiting.append(turn)
        return turn

    async def wait(self, key: K, turn: asyncio.Future[None]) -> None:
        """Wait until ``turn`` (of :meth:`take`) hands ``key``'s turn over."""
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self.give(key)  # handed to us as we were cancelled: pass it on
            raise

    def give(self, key: K) -> None:
        """Hand ``key``'s turn to the next join waiting for it (or let it go)."""
        waiting = self._taken[key]
        while waiting:
            turn = waiting.popleft()
            if not turn.done():  # (a cancelled waiter left its future cancelled)
                turn.set_result(None)
                return
        del self._taken[key]

    @contextlib.asynccontextmanager
    async def held(self, key: K) -> AsyncIterator[None]:
        """``key``'s turn, held for the body: taken, waited for, and given back after
        (however the body ends, cancelled included)."""
        turn = self.take(key)
        if turn is not None:
            await self.wait(key, turn)
        try:
            yield
        finally:
            self.give(key)
