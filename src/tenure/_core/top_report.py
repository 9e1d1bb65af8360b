"""What ``top`` answers: the most contended names (:class:`TopReport`, :class:`NameStat`).

The values only; :mod:`tenure._core.contention` makes them from an engine's state and
its statistics per name (:mod:`tenure._core.name_stats`). Public as
``tenure.TopReport`` and ``tenure.NameStat``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["SORTS", "TOP_PAGE", "TOP_WINDOWS", "NameStat", "TopReport"]

#: What ``top`` may sort by: the total wait in the window, the queue now, the longest
#: hold now, the grants and the timeouts in the window (each largest first).
SORTS: Final = ("wait", "queue", "hold", "grants", "timeouts")
#: The windows ``top`` answers over, in seconds (the default first).
TOP_WINDOWS: Final = (60.0, 300.0)
#: The names one answer lists by default.
TOP_PAGE: Final = 20


@dataclass(frozen=True, slots=True)
class NameStat:
    """One kept name (:mod:`tenure._core.name_stats`), over the report's window:

    - ``wait_seconds``: seconds waited by the waits that ended in it (granted or not);
    - ``queued``, ``grants``, ``timeouts``, ``cancelled``, ``losses``: requests that
      queued, grants made, waits timed out and cancelled, holds lost (an expired
      lease or session, a max_hold, a delete) in it;

    and now: ``queue`` (requests waiting), ``holders`` and ``longest_hold`` (seconds
    the oldest of its holds has been held; None: not held). Since it was kept
    (``kept_for`` seconds ago): ``wait_p50``, ``wait_p99``, ``hold_p50``,
    ``hold_p99`` (seconds, a log bucket's upper bound; None: nothing ended yet), and
    ``error``: how many of its counted events may be other names' (the sketch's
    floor when it came in).
    """

    node: str
    name: str
    wait_seconds: float
    queued: int
    grants: int
    timeouts: int
    cancelled: int
    losses: int
    queue: int
    holders: int
    longest_hold: float | None
    wait_p50: float | None
    wait_p99: float | None
    hold_p50: float | None
    hold_p99: float | None
    kept_for: float
    error: int


@dataclass(frozen=True, slots=True)
class TopReport:
    """The most contended names of ``node`` (``""``: of every node), sorted by
    ``sort`` over the last ``window`` seconds: ``names``, and of the sketch: how many
    names it keeps now (``kept``) and at most (``capacity``), and how many it pushed
    out since the server started (``evicted``)."""

    node: str
    window: float
    sort: str
    names: tuple[NameStat, ...]
    kept: int
    capacity: int
    evicted: int
