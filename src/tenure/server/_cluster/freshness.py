"""How fresh a standby's state is, confirmed on demand (etcd's ReadIndex idea).

A standby's engine follows the log in etcd (:class:`~.follower.Follower`), some time
behind the leader. To serve a read with bounded staleness it must know that its
state holds everything committed up to some recent moment. The rule:

    a :meth:`~.store.ClusterStore.last_index` read *sent* at loop time ``t0``
    returns ``L``; once the follower has applied ``L``, its state holds everything
    etcd committed before ``t0``: the state is *confirmed* at ``t0``.

Why the send time, not the time the answer came: the read is linearizable (one
etcd Txn), so it sees every write etcd committed before the read began, and the
leader acknowledges a change to its client only once etcd committed its entry.
Every change acknowledged before ``t0`` is therefore at an index ``<= L``. What
was committed while the read travelled may or may not be in ``L``: only the send
time is safe. (The loop times compared are this process's, so the staleness bound
is as good as this host's monotonic clock; no other clock is involved.)

:meth:`Freshness.within` waits until the state is confirmed recently enough,
reading etcd only when it must and sharing each read between every caller that
can use it: at most one read is in flight, and callers that need a newer one than
that wait for the next, which starts when the one in flight ends. However many
callers arrive at once, they cause at most two reads.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from tenure.errors import UnavailableError
from tenure.server._cluster.follower import Follower

__all__ = ["Freshness"]

#: The most confirmations kept waiting for the follower to apply their index: beyond
#: it the oldest is forgotten (only ever late to confirm, never wrong).
MAX_PENDING: Final = 16


def loop_time() -> float:
    """The running event loop's time (:class:`Freshness`'s default clock)."""
    return asyncio.get_running_loop().time()


@dataclass(eq=False, slots=True)
class _IndexRead:
    """One :meth:`~.store.ClusterStore.last_index` read, shared by its callers."""

    #: What its callers await: the send time and the index read.
    answer: asyncio.Future[tuple[float, int]]
    #: When it was sent (set by _send; a read waiting to be sent is never ridden by
    #: its send time: its callers chose it because the one in flight was too old).
    sent_at: float = math.inf


class Freshness:
    """How fresh ``follower``'s state is (module docstring); ``clock``: the loop time.

    A caller's error when etcd cannot be read: the read's own
    :class:`~tenure.errors.UnavailableError` goes to every caller waiting for that
    read at once, without trying again (a caller with time left may call again; one
    error answers them all, instead of each hammering an etcd that is away).
    """

    def __init__(self, follower: Follower, clock: Callable[[], float] = loop_time) -> None:
        self.follower = follower
        self.clock = clock
        self._confirmed_at = -math.inf
        #: Confirmations whose index the follower had not applied yet: (sent at, index),
        #: in the order read (both rise: the log's last index never falls).
        self._pending: list[tuple[float, int]] = []
        self._flight: _IndexRead | None = None  # the read in flight, if any
        self._next: _IndexRead | None = None  # the read to send when that one ends
        self._task: asyncio.Future[int] | None = None  # the flight's etcd call (kept alive)

    @property
    def confirmed_at(self) -> float:
        """The latest loop time ``t0`` such that a read sent at ``t0`` returned an index
        the follower has applied since: its state holds everything etcd committed
        before ``t0`` (-inf: never confirmed)."""
        self._settle()
        return self._confirmed_at

    @property
    def applied(self) -> int:
        """The index of the last log entry the follower's state holds."""
        return self.follower.applied

    def age(self) -> float:
        """Seconds since :attr:`confirmed_at` (inf: never confirmed)."""
        return self.clock() - self.confirmed_at

    def holds(self, max_staleness: float, min_index: int = 0) -> bool:
        """Whether :meth:`within` would return at once: the state confirmed at most
        ``max_staleness`` seconds ago and ``min_index`` applied (a read answered in
        this turn of the loop, with no task: the common case under load)."""
        return (
            self.follower.applied >= min_index and self.confirmed_at >= self.clock() - max_staleness
        )

    async def within(self, max_staleness: float, min_index: int = 0, *, timeout: float) -> int:
        """Until the state is confirmed at most ``max_staleness`` seconds before this
        call and the follower has applied ``min_index``; the index applied then.

        Reads etcd only when no confirmation is recent enough, riding the read in
        flight if it was sent recently enough, else the next (module docstring).
        Cancelling a caller never cancels a read others wait for. ``max_staleness``
        of inf asks no confirmation at all (only ``min_index``).

        Raises:
            UnavailableError: not so within ``timeout`` seconds (the whole call), or
                etcd could not be read (its error, given to every caller of that read).
        """
        oldest = self.clock() - max_staleness
        try:
            async with asyncio.timeout(timeout):
                while True:
                    if self.confirmed_at >= oldest:
                        # Fresh enough: the rest is the follower's (no read helps it).
                        await self.follower.applied_past(min_index)
                        return self.follower.applied
                    # A shield: a caller cancelled (or timed out) leaves the read to the rest.
                    sent_at, last = await asyncio.shield(self._ride(oldest))
                    await self.follower.applied_past(last)
                    # The rule itself (the pending list may have dropped it): then the
                    # loop's first test passes, as sent_at >= oldest.
                    self._confirmed_at = max(self._confirmed_at, sent_at)
        except TimeoutError:
            raise UnavailableError(self._why_not(timeout, min_index)) from None

    def _why_not(self, timeout: float, min_index: int) -> str:
        """Why :meth:`within` gave up after ``timeout`` seconds."""
        age = self.age()
        last = "never confirmed" if math.isinf(age) else f"last confirmed {age:.3f} s ago"
        applied = self.follower.applied
        behind = f", applied index {applied} < {min_index}" if applied < min_index else ""
        return f"the standby could not confirm its state within {timeout:g} s ({last}{behind})"

    # -- the shared reads ---------------------------------------------------------------

    def _ride(self, oldest: float) -> asyncio.Future[tuple[float, int]]:
        """The answer of a read sent at or after ``oldest``: the one in flight if it
        was, else the next (sent as soon as the one in flight ends)."""
        flight = self._flight
        if flight is None:
            read = _IndexRead(asyncio.get_running_loop().create_future())
            self._send(read)
            return read.answer
        if flight.sent_at >= oldest:
            return flight.answer
        if self._next is None:
            self._next = _IndexRead(asyncio.get_running_loop().create_future())
        return self._next.answer

    def _send(self, read: _IndexRead) -> None:
        """Send ``read`` now: it is the flight until its answer comes."""
        read.sent_at = self.clock()  # before the call leaves: the safe side (module docstring)
        self._flight = read
        task = asyncio.ensure_future(self.follower.store.last_index())
        task.add_done_callback(lambda done: self._landed(read, done))
        self._task = task

    def _landed(self, read: _IndexRead, task: asyncio.Future[int]) -> None:
        """``read``'s etcd call ended: its callers told, the next read sent."""
        self._flight = self._task = None
        answer = read.answer
        if task.cancelled():  # only by the loop shutting down
            answer.set_exception(UnavailableError("the standby's read of etcd was cancelled"))
        elif (error := task.exception()) is not None:
            answer.set_exception(error)
        else:
            last = task.result()
            self._note(read.sent_at, last)
            answer.set_result((read.sent_at, last))
        if not answer.cancelled():
            answer.exception()  # asked once: no "never retrieved" warning if all left
        following, self._next = self._next, None
        if following is not None:
            self._send(following)

    def _note(self, sent_at: float, last: int) -> None:
        """A read sent at ``sent_at`` returned ``last``: a confirmation once applied."""
        pending = self._pending
        # One waiting for an index as high or higher was sent earlier: it confirms an
        # older time and needs as much, so this one replaces it.
        while pending and pending[-1][1] >= last:
            pending.pop()
        pending.append((sent_at, last))
        if len(pending) > MAX_PENDING:
            del pending[0]
        self._settle()  # the follower may have applied it already

    def _settle(self) -> None:
        """Confirm each pending read whose index the follower has applied. Lazily, by
        whoever asks: a read's callers may all have gone before the follower got there."""
        applied, pending = self.follower.applied, self._pending
        while pending and pending[0][1] <= applied:
            self._confirmed_at = max(self._confirmed_at, pending.pop(0)[0])
