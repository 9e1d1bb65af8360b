"""How busy each node of the dashboard's view is: the busiest first, the idle ones folded.

A node's activity (:func:`activity_entry`, the node entry's ``activity``) is read from
the view of it:

* ``waiters``: acquires queued on its semaphores shown (clients blocked: contention);
* ``disconnected``: its sessions shown whose connection is gone, which the server
  keeps for their recovery window (a client that died, or a network in trouble);
* ``holds``: owners of its semaphores shown;
* ``grants``: grants made on it (holds and claims given a fencing token) in about the
  last minute, from its counter (:attr:`tenure._core.node.Node.grants`) as
  :class:`NodeActivity` samples it; null until it was sampled twice;
* ``granted_at``: when its latest grant was (UNIX seconds; null: none since the
  server started), which tells a node granted lately before its counter was sampled.

A node with none of these (no grant within :data:`GRANTS_WINDOW`) is ``idle``: the
page folds it into one line. So a view depends on the time as well as on the state
by its nodes' activity alone, which settles a minute after the last grant.

The order (:func:`busy_key`): the most waiters first, then the most disconnected
sessions, then the most holds and grants, each counted in powers of two (1, 2-3,
4-7, ...), then by name. Nodes about as busy keep their places (by name) from one
update to the next, instead of trading places whenever a count moves by one; a
node whose locks are short shows by its grants, whether or not the view caught one
held.

What it costs: the samples are of the nodes the views show and of the first
``--dashboard-max-nodes`` names, one counter each, at most once per
:data:`SAMPLE_EVERY` seconds, kept for :data:`GRANTS_WINDOW`; a node no view showed
for :data:`FOLLOW_SECONDS` is forgotten.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Final

from tenure._core import Engine
from tenure._core.node import Node

__all__ = [
    "FOLLOW_SECONDS",
    "GRANTS_WINDOW",
    "SAMPLE_EVERY",
    "BusyKey",
    "NodeActivity",
    "activity_entry",
    "busy_key",
]

#: A node's ``grants`` are those of about this many seconds (the page: "in the last minute").
GRANTS_WINDOW: Final = 60.0
#: A node's grant counter is kept at most once per this many seconds.
SAMPLE_EVERY: Final = 5.0
#: A node no view showed for this long is no longer sampled (unless among the first names).
FOLLOW_SECONDS: Final = 600.0

#: What orders nodes (smaller first): see the module docstring.
BusyKey = tuple[int, int, int, str]


def activity_entry(
    waiters: int,
    disconnected: int,
    holds: int,
    grants: int | None,
    granted_at: float | None,
    lately: bool,
) -> dict[str, object]:
    """A node entry's ``activity`` (module docstring): ``granted_at`` is when its latest
    grant was (UNIX seconds; None: none since the server started), ``lately`` whether
    that is within :data:`GRANTS_WINDOW`."""
    return {
        "waiters": waiters,
        "disconnected": disconnected,
        "holds": holds,
        "grants": grants,
        "granted_at": granted_at,
        "idle": not (waiters or disconnected or holds or grants or lately),
    }


def busy_key(
    name: str, waiters: int, disconnected: int, holds: int, grants: int | None, lately: bool
) -> BusyKey:
    """Where a node comes (smaller first), with the counts of :func:`activity_entry`:
    a node granted lately whose grants are not known yet counts one."""
    moving = holds + max(grants or 0, int(lately))
    return -waiters.bit_length(), -disconnected.bit_length(), -moving.bit_length(), name


class _Samples:
    """One node's grant counter as sampled: which node object (a node dropped and made
    again counts afresh), when each sample was taken and what it said, oldest first."""

    __slots__ = ("node", "samples", "shown_at")

    def __init__(self, node: Node, shown_at: float) -> None:
        self.node = id(node)
        self.samples: deque[tuple[float, int]] = deque()
        self.shown_at = shown_at


class NodeActivity:
    """The dashboard's memory of its nodes' grant counters (module docstring), and of
    each node's place in the latest view (what a view is built in: the busiest
    first, so that ``--dashboard-max-bytes`` leaves out the idlest)."""

    def __init__(self) -> None:
        self._nodes: dict[str, _Samples] = {}
        #: Each node's key in the latest view that showed it.
        self._keys: dict[str, BusyKey] = {}

    def __len__(self) -> int:
        """How many nodes it follows."""
        return len(self._nodes)

    def grants(self, name: str, node: Node, now: float, *, shown: bool = True) -> int | None:
        """Grants made on ``node`` (named ``name``) in about the last minute, sampling
        its counter now (engine time) if the last sample is :data:`SAMPLE_EVERY` old;
        None while there is no earlier sample. ``shown``: a view shows it (it is
        followed for :data:`FOLLOW_SECONDS` more)."""
        followed = self._nodes.get(name)
        if followed is None or followed.node != id(node):
            followed = self._nodes[name] = _Samples(node, now)
        samples = followed.samples
        if shown:
            followed.shown_at = now
        if samples and samples[-1][1] > node.grants:  # (another engine: a new term's)
            samples.clear()
        if not samples or now - samples[-1][0] >= SAMPLE_EVERY:
            samples.append((now, node.grants))
        while len(samples) > 1 and now - samples[1][0] >= GRANTS_WINDOW:
            samples.popleft()  # (the oldest kept is at most a window old, or the only one)
        return self._since_oldest(name, node, now)

    def _since_oldest(self, name: str, node: Node, now: float) -> int | None:
        """Grants on ``node`` since the oldest sample kept of it, without sampling; None
        if there is none older than ``now``."""
        followed = self._nodes.get(name)
        if followed is None or followed.node != id(node) or not followed.samples:
            return None
        oldest_at, oldest = followed.samples[0]
        return None if oldest_at >= now else max(0, node.grants - oldest)

    def sample(self, engine: Engine, now: float, first: Iterable[str]) -> None:
        """Sample the nodes followed and the ``first`` names (the sampler's, once a
        second; the first names are always followed); forget a node that is gone, or
        that no view showed for :data:`FOLLOW_SECONDS`."""
        always = set(first)
        for name in [*self._nodes, *(name for name in always if name not in self._nodes)]:
            node = engine.nodes.get(name)
            followed = self._nodes.get(name)
            stale = (
                followed is not None
                and name not in always
                and now - followed.shown_at > FOLLOW_SECONDS
            )
            if node is None or stale:
                self._nodes.pop(name, None)
                self._keys.pop(name, None)
                continue
            self.grants(name, node, now, shown=name in always)

    def remember(self, keys: Iterable[BusyKey]) -> None:
        """The keys of the nodes a view showed."""
        for key in keys:
            self._keys[key[-1]] = key

    def in_order(self, names: Iterable[str], engine: Engine, now: float) -> list[str]:
        """``names`` the busiest first as the latest views found them, then by name; a
        node no view showed yet (or left out, past ``--dashboard-max-bytes``) by what
        is known of it without reading it: its recent grants."""

        def key(name: str) -> BusyKey:
            known = self._keys.get(name)
            node = engine.nodes.get(name)
            if known is not None or node is None:
                return known or (0, 0, 0, name)
            at = node.granted_at
            lately = at is not None and now - at <= GRANTS_WINDOW
            return busy_key(name, 0, 0, 0, self._since_oldest(name, node, now), lately)

        return sorted(names, key=key)
