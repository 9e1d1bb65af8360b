"""A min-heap of timed events with lazy cancellation.

The engine schedules every deadline here (session expiry, acquire timeout, lease
expiry, end of lock-delay) and never removes an entry when plans change: it asks,
when an entry comes due, whether the entry still matches the live state. That keeps
every reschedule O(log n) and cancellation free.
"""

from __future__ import annotations

import enum
import heapq
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field


class Kind(enum.IntEnum):
    """What a deadline is for; the key's shape depends on it."""

    SESSION = 1  # key: (session_id,)
    WAITER = 2  # key: (node, semaphore, session_id, request_id)
    LEASE = 3  # key: (node, semaphore, session_id, token)
    LOCK_DELAY = 4  # key: (node, semaphore)


Key = tuple[object, ...]


@dataclass(order=True, slots=True)
class _Entry:
    when: float
    seq: int
    kind: Kind = field(compare=False)
    key: Key = field(compare=False)


class Deadlines:
    """Timed events, popped in time order (ties in scheduling order)."""

    __slots__ = ("_heap", "_seq")

    def __init__(self) -> None:
        self._heap: list[_Entry] = []
        self._seq = 0

    def __len__(self) -> int:
        return len(self._heap)

    def schedule(self, when: float, kind: Kind, key: Key) -> None:
        """Add an event at ``when``."""
        self._seq += 1
        heapq.heappush(self._heap, _Entry(when, self._seq, kind, key))

    def next_live(self, is_live: Callable[[float, Kind, Key], bool]) -> float | None:
        """Earliest time of an entry that ``is_live`` accepts; dead entries are discarded."""
        heap = self._heap
        while heap:
            top = heap[0]
            if is_live(top.when, top.kind, top.key):
                return top.when
            heapq.heappop(heap)
        return None

    def any_due(self, now: float) -> bool:
        """Whether some entry (live or not) is due at ``now``: O(1), for the hot path."""
        return bool(self._heap) and self._heap[0].when <= now

    def pop_due(self, now: float) -> Iterator[tuple[float, Kind, Key]]:
        """Pop entries due at ``now`` or earlier, in order, including ones scheduled meanwhile."""
        heap = self._heap
        while heap and heap[0].when <= now:
            entry = heapq.heappop(heap)
            yield entry.when, entry.kind, entry.key
