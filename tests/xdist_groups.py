"""How pytest-xdist hands out the tests under ``--dist loadgroup``: whole groups (the
fault suite, the files of :data:`tests.tiers.ONE_WORKER`) to one worker each, every
other test on its own, the largest groups first.

xdist's own ``loadgroup`` reads ``xdist_group`` marks and tells the controller of
them by renaming each item (``Item._nodeid += "@group"``), which pytest 9.2 no
longer reads (a node's id is its ``NodeId``): the marks are silently ignored and
a group's tests spread over the workers. This scheduler takes the groups from the
node id instead (:func:`tests.tiers.xdist_group_of`), which the controller has;
a ``@group`` suffix, should an xdist version add one again, still wins.

A unit whose tests have all run also leaves its worker's workload: xdist counts a
worker's pending tests over every unit the worker was ever given, after each test
and on each turn of the controller's loop (every test is a unit of its own here),
so the controller's work grew with the square of the tests run: seconds of CPU
for the unit tier's 4,600 tests, on a core the workers need.
"""

from __future__ import annotations

from typing import Any

from xdist.scheduler import LoadGroupScheduling

from tests import tiers

__all__ = ["TierGroupScheduling"]


class TierGroupScheduling(LoadGroupScheduling):  # type: ignore[misc]  # xdist has no types
    """``--dist loadgroup`` with the groups of :mod:`tests.tiers`."""

    def _split_scope(self, nodeid: str) -> str:
        scope: str = super()._split_scope(nodeid)
        if scope != nodeid:
            return scope  # an xdist_group suffix
        group = tiers.xdist_group_of(nodeid, tiers.markers_of(nodeid, {}))
        return nodeid if group is None else group

    def mark_test_complete(self, node: Any, item_index: int, duration: float = 0) -> None:
        """xdist's, except that a unit all of whose tests have run leaves the node's
        workload (a finished unit counts no pending test: every count is the same)."""
        nodeid = self.registered_collections[node][item_index]
        workload = self.assigned_work[node]
        scope = self._split_scope(nodeid)
        unit = workload[scope]
        unit[nodeid] = True
        if all(unit.values()):
            del workload[scope]
        self._reschedule(node)
