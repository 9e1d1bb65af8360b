"""The quotas' names and what one owner may hold: :class:`Quota` (an auth file's
``[token.quota]`` table), and the indexes of what :mod:`tenure._core.quotas` counts.

:mod:`tenure._core.quotas` (the counting, the checks and the memory budget)
re-exports every name here; this module holds the values, apart from the counting.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Final

from tenure._core._dataclass import dataclass
from tenure.errors import InvalidArgumentError

__all__ = [
    "COUNTED",
    "NO_QUOTA",
    "QUOTA_NAMES",
    "Q_DATA_BYTES",
    "Q_HOLDS",
    "Q_MISSED_BYTES",
    "Q_NODES",
    "Q_PREFIX_WATCHES",
    "Q_SEMAPHORES",
    "Q_SESSIONS",
    "Q_WAITERS",
    "Q_WATCHES",
    "Quota",
    "TRACKED",
]

#: Indexes of :attr:`tenure._core.quotas.Usage.counts` (one list per owner: an int each,
#: no attribute lookups).
Q_SESSIONS: Final = 0
Q_WATCHES: Final = 1
Q_WAITERS: Final = 2
Q_SEMAPHORES: Final = 3
Q_NODES: Final = 4
Q_DATA_BYTES: Final = 5
Q_PREFIX_WATCHES: Final = 6
#: Holds (grants held): counted for the memory budget only (no quota: a token's holds
#: are bounded by its sessions and the semaphores' limits).
Q_HOLDS: Final = 7
#: The estimated bytes of the endings its sessions keep (``Session.missed``): counted
#: for the memory budget only, as they are (one byte each in :data:`OBJECT_BYTES`).
Q_MISSED_BYTES: Final = 8
#: The counted quotas, in the order of :attr:`Usage.counts`.
COUNTED: Final = (
    "sessions",
    "watches",
    "waiters",
    "semaphores",
    "nodes",
    "data_bytes",
    "prefix_watches",
)
#: Everything :attr:`Usage.counts` counts: the counted quotas, then ``holds`` and
#: ``missed_bytes`` (the memory budget's only).
TRACKED: Final = (*COUNTED, "holds", "missed_bytes")
#: Every quota of a token (the auth file's ``[token.quota]`` keys), counted or not.
QUOTA_NAMES: Final = (*COUNTED, "recovery_window", "requests_per_second")


@dataclass(frozen=True, slots=True)
class Quota:
    """What one owner may hold at once; None: no quota on that.

    ``recovery_window`` is in seconds; ``requests_per_second`` is checked by the
    server (a token bucket whose burst is one second's worth).
    """

    sessions: int | None = None
    watches: int | None = None
    waiters: int | None = None
    semaphores: int | None = None
    nodes: int | None = None
    data_bytes: int | None = None
    prefix_watches: int | None = None
    recovery_window: float | None = None
    requests_per_second: float | None = None

    def limit(self, index: int) -> int | None:
        """The quota on the counted thing ``index`` (:data:`Q_SESSIONS`...; None for
        :data:`Q_HOLDS`, which has none)."""
        if index >= len(COUNTED):
            return None
        limit = self.values()[index]
        assert limit is None or isinstance(limit, int)  # (the counted ones are ints)
        return limit

    @staticmethod
    def from_mapping(values: Mapping[str, object], where: str) -> Quota:
        """A quota from a table (an auth file's ``[token.quota]``); every key optional.

        Raises:
            InvalidArgumentError: an unknown key, or a value that is not a number in
                range (``where`` names the table).
        """
        unknown = sorted(set(values) - set(QUOTA_NAMES))
        if unknown:
            raise InvalidArgumentError(
                f"{where}: unknown quota {unknown[0]!r} (known: {', '.join(QUOTA_NAMES)})"
            )
        read: list[int | float | None] = []
        for name in QUOTA_NAMES:
            value = values.get(name)
            if value is None:
                read.append(None)
            elif name in COUNTED:
                if type(value) is not int or value < 0:
                    raise InvalidArgumentError(f"{where}: {name} must be an integer >= 0")
                read.append(value)
            else:
                number = float(value) if type(value) in (int, float) else math.nan  # type: ignore[arg-type]
                if not math.isfinite(number) or number <= 0:
                    raise InvalidArgumentError(f"{where}: {name} must be a number > 0")
                read.append(number)
        return Quota.of(read)

    @staticmethod
    def of(values: Sequence[int | float | None]) -> Quota:
        """A quota from its values in :data:`QUOTA_NAMES` order (counts are ints)."""
        sessions, watches, waiters, semaphores, nodes, data_bytes, prefix_watches = (
            None if value is None else int(value) for value in values[: len(COUNTED)]
        )
        window, rate = values[len(COUNTED) :]
        return Quota(
            sessions,
            watches,
            waiters,
            semaphores,
            nodes,
            data_bytes,
            prefix_watches,
            recovery_window=None if window is None else float(window),
            requests_per_second=None if rate is None else float(rate),
        )

    def over(self, base: Quota) -> Quota:
        """This quota, with ``base``'s value wherever this one has none."""
        return Quota.of(
            [
                mine if mine is not None else theirs
                for mine, theirs in zip(self.values(), base.values(), strict=True)
            ]
        )

    def values(self) -> tuple[int | float | None, ...]:
        """Every quota, in :data:`QUOTA_NAMES` order."""
        return (
            self.sessions,
            self.watches,
            self.waiters,
            self.semaphores,
            self.nodes,
            self.data_bytes,
            self.prefix_watches,
            self.recovery_window,
            self.requests_per_second,
        )


#: No quota at all.
NO_QUOTA: Final = Quota()
