"""What one dashboard view may cost, and what it did: its limits (the
``--dashboard-max-*`` settings), its work counted, and the slices it is built in
(:mod:`tenure.server._http.board` says how a view is bounded; this module keeps the
count).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Final

from tenure.server._config.serve_config import ServeConfig
from tenure.server._http.board_entries import Json
from tenure.server._http.shown import DEFAULT_MAX_DATA_CHARS

__all__ = [
    "BYTES_PER_ITEM",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_SCAN",
    "FRAME",
    "BoardLimits",
    "BoardWork",
    "Slices",
]

#: Holders read to tell recipes, in all, by one view by default (``--dashboard-max-scan``).
DEFAULT_MAX_SCAN: Final = 10_000
#: A view's most bytes of JSON by default (``--dashboard-max-bytes``): about 5 ms to
#: encode, pure build, and a page that a browser still renders at once.
DEFAULT_MAX_BYTES: Final = 512 * 1024
#: Bytes kept aside from ``max_bytes`` for what holds the entries (``{"nodes":[...``).
FRAME: Final = 128
#: Bytes of a view's JSON that count as one item of work (to make, escape and
#: measure them: about as long as reading a holder, pure build).
BYTES_PER_ITEM: Final = 512


@dataclass(frozen=True, slots=True)
class BoardLimits:
    """How much of the engine one view shows (the ``--dashboard-max-*`` settings)."""

    max_nodes: int = 50
    max_semaphores: int = 100
    max_sessions: int = 100
    max_holders: int = 20
    #: Characters of each owner's and waiter's data shown (before escaping); the
    #: rest is cut, and ``data_truncated`` says so.
    max_data_chars: int = DEFAULT_MAX_DATA_CHARS
    #: Holders read to tell recipes, in all (module docstring).
    max_scan: int = DEFAULT_MAX_SCAN
    #: The view's most bytes of JSON (module docstring).
    max_bytes: int = DEFAULT_MAX_BYTES

    @classmethod
    def of(cls, config: ServeConfig) -> BoardLimits:
        """The limits ``config`` sets."""
        return cls(
            max_nodes=config.dashboard_max_nodes,
            max_semaphores=config.dashboard_max_semaphores,
            max_sessions=config.dashboard_max_sessions,
            max_holders=config.dashboard_max_holders,
            max_scan=config.dashboard_max_scan,
            max_bytes=config.dashboard_max_bytes,
        )


@dataclass(slots=True)
class BoardWork:
    """What building one view did (module docstring), counted as it goes."""

    #: Holders read to tell recipes.
    scanned: int = 0
    #: Items of work in all, in the largest slice, and of the largest entry.
    items: int = 0
    most_in_a_slice: int = 0
    largest_entry: int = 0
    #: Slices the view was built in (the loop served others between two).
    slices: int = 1
    #: Bytes of JSON of the entries kept; whether one was left out for ``max_bytes``.
    bytes: int = 0
    cut: bool = False


class Slices:
    """The work of one view: its items, the slice under way, the bytes left."""

    def __init__(self, budget: int | None, work: BoardWork, max_bytes: int) -> None:
        self.budget = budget
        self.work = work
        self.in_slice = 0
        self.room = max_bytes - FRAME

    def spend(self, cost: int) -> None:
        """``cost`` items done in this slice."""
        self.in_slice += cost
        self.work.items += cost
        self.work.most_in_a_slice = max(self.work.most_in_a_slice, self.in_slice)

    def over(self) -> bool:
        """Whether the slice under way has done its budget: if so, the caller yields,
        and a new slice begins."""
        if self.budget is None or self.in_slice < self.budget:
            return False
        self.work.slices += 1
        self.in_slice = 0
        return True

    def keep(self, entry: Json, cost: int) -> bool:
        """Whether ``entry``, made with ``cost`` items of work, fits in the bytes left
        as JSON (its bytes are work too: one item per :data:`BYTES_PER_ITEM`); once
        one does not, nothing more does (module docstring)."""
        size = len(json.dumps(entry, separators=(",", ":"))) + 1  # (and a comma)
        cost += size // BYTES_PER_ITEM
        self.spend(cost)
        self.work.largest_entry = max(self.work.largest_entry, cost)
        if self.work.cut or size > self.room:
            self.work.cut = True
            return False
        self.room -= size
        self.work.bytes += size
        return True
