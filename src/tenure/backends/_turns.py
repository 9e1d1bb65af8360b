"""One client's requests join a semaphore's queue one at a time, in the order made.

The client sends the requests of all its tasks over one channel, and etcd serves
each call in a goroutine of its own: two Txns in flight at once may be applied
the other way round. So each join takes the semaphore's *turn*: it is sent only
when the join made before it (by this client) was answered, and FIFO holds down
to this client's calls.

An uncontended join costs a dict entry put and removed, no lock and no future (an
acquire of a name nobody here is joining is the common case; the backends' shared
``JoinLocks``, an ``asyncio.Lock`` per name behind a context manager, cost an
acquire of ``etcd://`` more than its Txn's building). A second join of the same
name waits on a future, and turns are handed over in the order asked.
"""

from __future__ import annotations

import asyncio
import collections

__all__ = ["Turns"]


class Turns:
    """The turns of one client's joins, by semaphore (its keys' prefix)."""

    def __init__(self) -> None:
        #: A semaphore whose turn is taken: None while nobody else waits for it, else
        #: the futures of those who do, in the order they asked.
        self._taken: dict[bytes, collections.deque[asyncio.Future[None]] | None] = {}

    def __len__(self) -> int:
        """How many semaphores have a join in progress (or waiting) here."""
        return len(self._taken)

    def take(self, key: bytes) -> asyncio.Future[None] | None:
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

    async def wait(self, key: bytes, turn: asyncio.Future[None]) -> None:
        """Wait until ``turn`` (of :meth:`take`) hands ``key``'s turn over."""
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self.give(key)  # handed to us as we were cancelled: pass it on
            raise

    def give(self, key: bytes) -> None:
        """Hand ``key``'s turn to the next join waiting for it (or let it go)."""
        waiting = self._taken[key]
        while waiting:
            turn = waiting.popleft()
            if not turn.done():  # (a cancelled waiter left its future cancelled)
                turn.set_result(None)
                return
        del self._taken[key]
