"""A min-heap of timed events with lazy cancellation, and the typed keys of its events. [compiled]

The engine schedules every deadline here (session expiry, acquire timeout, lease
expiry, end of lock-delay, end of a claim) and never removes an entry when plans change: it asks,
when an entry comes due, whether the entry still matches the live state. That keeps
every reschedule O(log n) and cancellation free.

A dead entry stays until its time, and a client chooses that time: each renew of a
lease of a day (or of 10**9 seconds: a lease's TTL has no most), each acquire with a
long timeout that it cancels, left one behind (issue 47: 100,000 renews of one lease
kept 17 MB that no quota or budget saw). So the heap is compacted (its dead entries
dropped, :meth:`Deadlines.compact`) once it is twice what it kept at the last
compaction and at least :data:`COMPACT_AT_LEAST`: dead entries are then at most
about as many as live ones (plus that floor), and each compaction's cost, O(heap),
is paid by the schedules since the last one (amortized O(1) each).

What a deadline is for is its key's *type*: one small immutable value per kind,
carrying what is needed to find the thing it times and to tell whether that thing
is still the one that was timed (a waiter's request id, a grant's token). The
engine dispatches on that type (:mod:`tenure._core.handlers.expiry`).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from typing import Final, NamedTuple, TypeAlias

# The keys are NamedTuples rather than frozen dataclasses: they are made on the hot
# path (every timed acquire, every lease) and a tuple is the cheapest immutable
# value to build, hash and keep.


class SessionDeadline(NamedTuple):
    """A detached session's recovery window ends (``Session.expires_at``)."""

    session_id: int


class WaiterDeadline(NamedTuple):
    """A queued acquire times out (``Waiter.deadline``).

    ``holder`` is the waiter's holder key (a session's hold:
    :func:`tenure._core.semaphore.holder_key`); ``request_id`` tells the waiter
    that was timed from a later one of the same hold.
    """

    node: str
    semaphore: str
    holder: int
    request_id: int


class LeaseDeadline(NamedTuple):
    """A grant's lease expires unless renewed (``Owner.lease_deadline``).

    ``holder`` is the owner's holder key; ``token`` tells the grant that was timed
    from a later one of the same hold.
    """

    node: str
    semaphore: str
    holder: int
    token: int


class LockDelayDeadline(NamedTuple):
    """A semaphore's lock-delay ends (``Semaphore.blocked_until``)."""

    node: str
    semaphore: str


class ClaimDeadline(NamedTuple):
    """A claim ends (``ClaimTimer.ends_at``): its semaphore goes.

    ``token`` tells the claim that was timed from a later one of the same name.
    """

    node: str
    semaphore: str
    token: int


#: The key of a scheduled deadline: what it is for is its type.
DeadlineKey: TypeAlias = (
    SessionDeadline | WaiterDeadline | LeaseDeadline | LockDelayDeadline | ClaimDeadline
)

# A heap entry: (when, rank, key). Entries order by time, then by a fixed order of
# their keys (the kind's rank, then the key's own fields), never by when they were
# scheduled: an engine loaded from a snapshot schedules its deadlines anew, in
# another order, and must still handle deadlines of one instant in the same order as
# the engine it was saved from (else a restart replays the log to another state).
_Entry: TypeAlias = tuple[float, int, DeadlineKey]


def _rank(key: DeadlineKey) -> int:
    """Which kind of deadline goes first in an instant (keys of one kind then compare)."""
    kind = type(key)
    if kind is SessionDeadline:
        return 0
    if kind is LockDelayDeadline:
        return 1
    if kind is WaiterDeadline:
        return 2
    if kind is LeaseDeadline:
        return 3
    return 4


#: The fewest entries the heap holds when it is compacted (module docstring): below
#: it, dead entries wait for their time (a few hundred KiB at most).
COMPACT_AT_LEAST: Final = 4096


class Deadlines:
    """Timed events, popped in time order (ties in a fixed order of their keys)."""

    __slots__ = ("_compact_at", "_heap")

    def __init__(self) -> None:
        self._heap: list[_Entry] = []
        #: The heap's size at which :meth:`crowded` says to compact it.
        self._compact_at = COMPACT_AT_LEAST

    def __len__(self) -> int:
        return len(self._heap)

    def schedule(self, when: float, key: DeadlineKey) -> None:
        """Add an event for ``key`` at ``when``."""
        heapq.heappush(self._heap, (when, _rank(key), key))

    def next_live(self, is_live: Callable[[float, DeadlineKey], bool]) -> float | None:
        """Earliest time of an entry that ``is_live`` accepts; dead entries are discarded."""
        heap = self._heap
        while heap:
            when, _, key = heap[0]
            if is_live(when, key):
                return when
            heapq.heappop(heap)
        return None

    def crowded(self) -> bool:
        """Whether the heap has doubled since its last compaction (and holds at least
        :data:`COMPACT_AT_LEAST`): O(1), asked after every command."""
        return len(self._heap) >= self._compact_at

    def compact(self, is_live: Callable[[float, DeadlineKey], bool]) -> int:
        """Drop every entry ``is_live`` refuses, and every copy of a kept one (a renew
        or a restated wait in the same instant schedules the same entry again): each
        would be dropped when due (the first copy handled, the rest dead then), so
        what is handled, and in which order, is the same. Returns how many went.

        O(heap): :meth:`crowded` asks for it once the heap has doubled.
        """
        heap = self._heap
        kept = list(dict.fromkeys(entry for entry in heap if is_live(entry[0], entry[2])))
        heapq.heapify(kept)  # (entries order by their own fields: the same order)
        self._heap = kept
        self._compact_at = max(COMPACT_AT_LEAST, 2 * len(kept))
        return len(heap) - len(kept)

    def any_due(self, now: float) -> bool:
        """Whether some entry (live or not) is due at ``now``: O(1), for the hot path."""
        return bool(self._heap) and self._heap[0][0] <= now

    def pop_due(self, now: float) -> Iterator[tuple[float, DeadlineKey]]:
        """Pop entries due at ``now`` or earlier, in order, including ones scheduled meanwhile."""
        heap = self._heap
        while heap and heap[0][0] <= now:
            when, _, key = heapq.heappop(heap)
            yield when, key
