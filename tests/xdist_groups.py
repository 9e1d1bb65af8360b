"""How pytest-xdist hands out the tests under ``--dist loadgroup``: whole groups (the
fault suite, the files of :data:`tests.tiers.ONE_WORKER`) to one worker each, every
other test on its own, the largest groups first.

xdist's own ``loadgroup`` reads ``xdist_group`` marks and tells the controller of
them by renaming each item (``Item._nodeid += "@group"``), which pytest 9.2 no
longer reads (a node's id is its ``NodeId``): the marks are silently ignored and
a group's tests spread over the workers. This scheduler takes the groups from the
node id instead (:func:`tests.tiers.xdist_group_of`), which the controller has;
a ``@group`` suffix, should an xdist version add one again, still wins.
"""

from __future__ import annotations

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
