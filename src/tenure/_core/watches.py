"""Watches on a semaphore's data, owners and waiters.

A watch is armed by a describe and fires on a change of an aspect it watches (or
of the semaphore's existence, which changes every aspect). Firing carries the state
the change left (described as the arming describe asked: with owners and waiters
or without), so a watcher sees it without another round trip.

A one-shot watch fires once: the watcher describes again to arm the next, and that
describe reads the latest state, so changes in between coalesce. A repeating watch
(``watch_repeat``) fires on every change until it is disarmed: no describe per
change, for the server or the watcher; the client keeps only the latest state it
was sent, so changes it has no time for coalesce there.
"""

from __future__ import annotations

from typing import Final, TypeAlias

from tenure._core._dataclass import dataclass


@dataclass(frozen=True, slots=True)
class Watch:
    """An armed watch."""

    watch_id: int
    session_id: int
    node: str
    name: str
    data: bool
    owners: bool
    waiters: bool
    #: What the arming describe listed (its ``owners``/``waiters`` flags): the
    #: description that firing carries lists the same.
    with_owners: bool = False
    with_waiters: bool = False
    #: Fire on every change it watches (until disarmed), not only on the first.
    repeat: bool = False


#: Which aspects of a semaphore changed in one step: an int of the bits below. Every
#: acquire and release makes and combines some, so they are ints, not objects.
Change: TypeAlias = int
NOTHING: Final = 0
DATA: Final = 1
OWNERS: Final = 2
WAITERS: Final = 4
EXISTENCE: Final = 8  # appearing or vanishing changes every aspect


def matches(change: Change, watch: Watch) -> bool:
    """Whether ``watch`` cares about ``change``."""
    return bool(
        change & EXISTENCE
        or (change & DATA and watch.data)
        or (change & OWNERS and watch.owners)
        or (change & WAITERS and watch.waiters)
    )


class Watches:
    """All armed watches, indexed by target and by id."""

    __slots__ = ("_by_id", "_by_target")

    def __init__(self) -> None:
        self._by_target: dict[tuple[str, str], dict[int, Watch]] = {}
        self._by_id: dict[int, Watch] = {}

    def __len__(self) -> int:
        return len(self._by_id)

    def arm(self, watch: Watch) -> None:
        """Register ``watch``."""
        self._by_id[watch.watch_id] = watch
        self._by_target.setdefault((watch.node, watch.name), {})[watch.watch_id] = watch

    def disarm(self, watch_id: int) -> Watch | None:
        """Remove a watch without firing it."""
        watch = self._by_id.pop(watch_id, None)
        if watch is not None:
            target = (watch.node, watch.name)
            group = self._by_target[target]
            del group[watch_id]
            if not group:
                del self._by_target[target]
        return watch

    def fire(self, node: str, name: str, change: Change) -> list[Watch]:
        """Return, in arming order, the watches on the target that ``change`` hits.

        One-shot watches are removed; repeating ones stay armed.
        """
        group = self._by_target.get((node, name))
        if not group:
            return []
        fired = [w for w in group.values() if matches(change, w)]
        for watch in fired:
            if not watch.repeat:
                self.disarm(watch.watch_id)
        return fired
