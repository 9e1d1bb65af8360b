"""``/metrics``' statistics per name: at most ``--contention-series`` names, and ``other``.

A series per name would be a million series after a million names; a metrics system
wants a few hundred. So ``/metrics`` shows the ``--contention-series`` (100 by
default) kept names (:mod:`tenure._core.name_stats`) with the most seconds waited,
each labelled ``{node, name}``, and one more series, ``{node="", name="other"}``
(no node is called ""), that is the server's total less the names shown: everything
else, kept or not. The families, all counters since the server started (a name's
since it was kept):

* ``tenure_name_wait_seconds``: seconds waited by the waits that ended (granted,
  timed out, cancelled);
* ``tenure_name_hold_seconds``: seconds held by the holds that ended;
* ``tenure_name_grants``, ``tenure_name_timeouts``, ``tenure_name_cancelled`` (waits
  cancelled: by their client, their session's end, a delete) and
  ``tenure_name_losses`` (holds lost: an expired lease or session, a max_hold, a
  delete).

Which names are shown changes as their waits do, and a name pushed out of the sketch
starts again from 0 when it comes back: ``rate()`` over a name's series reads that as
a counter reset, and ``other`` moves the other way. For a name's exact history, ask
``tenure top``; the metrics say where the waiting goes.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from typing import Final

from prometheus_client.metrics_core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from tenure._core.name_stats import CONTENTION_SERIES, NameEntry, NameStats

__all__ = ["CONTENTION_SERIES", "OTHER", "PREFIX", "WithoutNames", "contention_families"]

#: The labels of the series of everything not shown.
OTHER: Final = ("", "other")
#: What the families' names begin with.
PREFIX: Final = "tenure_name_"

_FAMILIES: Final = (
    ("wait_seconds", "Seconds waited by the waits on the name that ended (granted or not)."),
    ("hold_seconds", "Seconds held by the holds of the name that ended."),
    ("grants", "Grants of the name."),
    ("timeouts", "Waits on the name that timed out."),
    ("cancelled", "Waits on the name cancelled (by their client, a session's end, a delete)."),
    ("losses", "Holds of the name lost (an expired lease or session, a max_hold, a delete)."),
)


def _values(entry: NameEntry | NameStats) -> tuple[float, ...]:
    return (
        entry.wait_total,
        entry.hold_total,
        float(entry.grants),
        float(entry.timeouts),
        float(entry.cancelled),
        float(entry.losses),
    )


def contention_families(stats: NameStats, series: int) -> Iterator[Metric]:
    """The families of the module docstring: the ``series`` most-waited kept names and
    ``other`` (no name series when ``series`` is 0: ``other`` is then the total)."""
    kept = (entry for names in stats.nodes.values() for entry in names.values())
    shown = heapq.nlargest(series, kept, key=lambda entry: entry.wait_total) if series else []
    families = [
        CounterMetricFamily(
            f"{PREFIX}{name}",
            f"{documentation} Per name for the --contention-series most waited; the rest "
            'in name="other".',
            labels=["node", "name"],
        )
        for name, documentation in _FAMILIES
    ]
    other = list(_values(stats))
    for entry in shown:
        values = _values(entry)
        for index, family in enumerate(families):
            family.add_metric([entry.node, entry.name], values[index])
            other[index] -= values[index]
    for index, family in enumerate(families):
        family.add_metric(list(OTHER), max(0.0, other[index]))
        yield family


class WithoutNames(Collector):
    """``collector``'s families but those of this module: what a token limited to some
    nodes is shown of ``/metrics`` (``--metrics-auth``), the names of every node's
    semaphores left out."""

    def __init__(self, collector: Collector) -> None:
        self._collector = collector

    def collect(self) -> Iterable[Metric]:
        """Every family of the collector whose name is not a name's statistic."""
        for family in self._collector.collect():
            if not family.name.startswith(PREFIX):
                yield family
