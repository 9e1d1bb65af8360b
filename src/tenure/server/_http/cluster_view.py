"""What the HTTP endpoint shows of a cluster (``tenure serve --cluster``): its gauges on
``/metrics`` and the dashboard's ``cluster`` object, both read from the server's
:class:`~tenure.server._role.Role` when asked, as the engine's gauges are.

A standalone server's role has no status (:meth:`~tenure.server._role.Role.status`
is None): then nothing here is shown, no ``tenure_cluster_*`` series and a null
``cluster``, so that an alert on them never fires for a server that has no cluster.

The series (every one of this server; no per-member series: each member reports its
own, and the same member seen from three servers would be three series):

* ``tenure_cluster_role{role}``: 1 for this server's role (``leader`` or
  ``standby``), 0 for the other; both label values are always there, so
  ``sum(tenure_cluster_role{role="leader"})`` over a cluster's servers is 1 when all
  is well;
* ``tenure_cluster_term``: the leader's term (its election key's revision; 0: no
  leader known);
* ``tenure_cluster_log_index``: the last log entry this server knows of (the leader:
  the last it appended; a standby: the furthest of its own and the members' records);
* ``tenure_cluster_applied_index``: the last entry this server's engine holds;
* ``tenure_cluster_lag_entries``: the log index less the applied index (0 on the
  leader; a standby that stays behind is not following);
* ``tenure_cluster_members``: the members recorded in etcd (this one included);
* ``tenure_cluster_cells``: the cells of the service this server knows (docs/cluster.md,
  "Cells": its own, and those whose members the service's directory records; 0 for a
  cluster run without a directory, as the simulation's);
* ``tenure_cluster_leader_changes_total``: the new terms this server has seen since
  it started (not its first).

The leader's append latency is a histogram of :class:`ServerMetrics`
(``tenure_cluster_append_seconds``: it is observed as the appends are made, not read
at scrape time).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Final, Protocol, runtime_checkable

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from tenure._protocol.cluster import CellView, ClusterView, MemberView
from tenure.server._role import LEADER, STANDBY, Role

__all__ = ["ROLES", "cluster_families", "cluster_view", "dashboard_url"]

#: The values of ``tenure_cluster_role``'s ``role`` label (a fixed set).
ROLES: Final = (LEADER, STANDBY)

#: JSON-ready data (as :mod:`tenure.server._http.board`'s).
Json = dict[str, object]


@runtime_checkable
class _CountsLeaderChanges(Protocol):
    """What a cluster's role keeps beyond :class:`Role` that the metrics read: the
    leader changes it saw (:class:`tenure.server._cluster.role.ClusterRole`'s; this
    module does not import it: the cluster imports the endpoint, and an import back
    would close a circle, ``tests/test_import_graph.py``)."""

    leader_changes: int


def _leader_changes(role: Role) -> int:
    return role.leader_changes if isinstance(role, _CountsLeaderChanges) else 0


def _me(view: ClusterView) -> MemberView | None:
    """This server's own record in ``view`` (the member that answers)."""
    for member in view.members:
        if member.name == view.answered_by:
            return member
    return None


def _applied(view: ClusterView) -> int:
    me = _me(view)
    return me.applied if me is not None else 0


def cluster_families(role: Role) -> Iterator[Metric]:
    """The ``tenure_cluster_*`` gauges and counter, as they are now (none on a
    standalone server)."""
    view = role.status()
    if view is None:
        return
    roles = GaugeMetricFamily(
        "tenure_cluster_role",
        "1 for this server's role in its cluster (leader or standby), 0 for the other.",
        labels=["role"],
    )
    for name in ROLES:
        roles.add_metric([name], 1.0 if role.name == name else 0.0)
    yield roles
    applied = _applied(view)
    gauges = {
        "term": (view.term, "The leader's term (its election key's revision; 0: none known)."),
        "log_index": (view.index, "The last log entry this server knows was appended."),
        "applied_index": (applied, "The last log entry this server's engine holds."),
        "lag_entries": (max(0, view.index - applied), "Log entries known but not applied."),
        "members": (len(view.members), "Members recorded in etcd, this one included."),
        "cells": (len(view.cells), "Cells of the service this server knows, its own included."),
    }
    for name, (value, documentation) in gauges.items():
        yield GaugeMetricFamily(f"tenure_cluster_{name}", documentation, value=float(value))
    yield CounterMetricFamily(
        "tenure_cluster_leader_changes",
        "New terms (a leader elected) this server has seen since it started.",
        value=float(_leader_changes(role)),
    )


def dashboard_url(http: str | None) -> str | None:
    """The dashboard at the HTTP address ``HOST:PORT`` (None: it has none). Plain
    ``http``: the endpoint has no TLS of its own (docs/operations.md)."""
    return f"http://{http}/" if http else None


def cluster_view(role: Role) -> Json | None:
    """The dashboard's ``cluster`` object (None on a standalone server).

    ``role``, ``term``, ``index``, ``applied``, ``lag`` and ``leader_changes`` are this
    server's (as its metrics say); ``leader`` the leader (``name``, ``address``, its
    ``http`` address and ``dashboard`` URL; None while none is known); ``members``
    every member's record as last read from etcd: ``applied`` and ``lag`` as it last
    recorded them, ``recorded_at`` when (UNIX seconds: an instant, so that an
    unchanged record is the same bytes; the page works out the age; None for this
    server's own, which is the state now); ``cell`` this server's cell (None: a
    cluster of no cell) and ``cells`` every cell of the service (:func:`_cell`).
    """
    view = role.status()
    if view is None:
        return None
    applied = _applied(view)
    leader: Json | None = None
    if view.leader:
        http = role.leader("http")
        leader = {
            "name": view.leader,
            "address": role.leader("native"),
            "http": http,
            "dashboard": dashboard_url(http),
        }
    return {
        "name": view.cluster,
        "member": view.answered_by,
        "role": role.name,
        "term": view.term,
        "index": view.index,
        "applied": applied,
        "lag": max(0, view.index - applied),
        "leader_changes": _leader_changes(role),
        "leader": leader,
        "cell": view.cell or None,
        "cells": [_cell(cell, view) for cell in view.cells],
        "members": [_member(member, view.index, view.answered_by) for member in view.members],
    }


def _cell(cell: CellView, view: ClusterView) -> Json:
    """One cell of the service: its ``name``, whether it is this server's (``self``),
    its ``leader`` (a name; None: none known), ``index`` and ``members`` (as
    ``members`` above). This server's cell is as its own view says (its cell's store,
    exact); another as the directory records its members: its leader the member whose
    record says it leads, its index the furthest one of them applied."""
    own = cell.name == view.cell
    if own:
        leader, index, members = view.leader, view.index, view.members
    else:
        leading = cell.leading()
        leader = leading.name if leading is not None else ""
        index = max((member.applied for member in cell.members), default=0)
        members = cell.members
    return {
        "name": cell.name,
        "self": own,
        "leader": leader or None,
        "index": index,
        # (a member of another cell is never this server, whatever its name)
        "members": [_member(member, index, view.answered_by if own else "") for member in members],
    }


def _member(member: MemberView, index: int, me: str) -> Json:
    """``member`` as the dashboard shows it: its lag behind ``index``; ``me``: the name
    of this server (its own record is the state now)."""
    mine = member.name == me
    return {
        "name": member.name,
        "role": member.role,
        "address": member.address,
        "applied": member.applied,
        "lag": max(0, index - member.applied),
        # This server's own record is the state now: no instant to show.
        "recorded_at": None if mine or member.age is None else _instant(member.age),
        "self": mine,
        "http": member.http or None,
        "dashboard": dashboard_url(member.http),
    }


def _instant(age: float) -> int:
    """When a record ``age`` seconds old was written, to the second: the same record
    gives the same number however long after it is read (the role's clock and this
    one are read microseconds apart), and the page shows ages in seconds."""
    return round(time.time() - age)
