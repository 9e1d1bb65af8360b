"""Commands on prefix watches: arm one, cancel a watch."""

from __future__ import annotations

from dataclasses import dataclass

from tenure._core.commands.base import Command


@dataclass(frozen=True, slots=True)
class WatchArmed:
    """Reply to WatchPrefix: the id of the watch it armed (for CancelWatch)."""

    watch_id: int


@dataclass(frozen=True, slots=True)
class WatchPrefix(Command[WatchArmed]):
    """Arm a repeating watch of every semaphore of the session's node whose name starts
    with ``prefix`` (``""``: every one), those made later included.

    It fires a WatchFired (with the name and the state the change left) on every
    change of a watched aspect (``watch_data``, ``watch_owners``, ``watch_waiters``;
    a semaphore's appearing or vanishing always) of any such semaphore, until
    CancelWatch or the end of the session. The state lists owners if they are
    watched and waiters if they are. Counts against the node's
    ``max_watches_per_session``.
    """

    session_id: int
    prefix: str
    watch_data: bool = False
    watch_owners: bool = False
    watch_waiters: bool = False


@dataclass(frozen=True, slots=True)
class CancelWatch(Command[bool]):
    """Disarm a watch (one-shot: that has not fired yet); replies whether it was armed."""

    session_id: int
    watch_id: int
