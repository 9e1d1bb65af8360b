"""What a member of a cluster knows of it: its own role, the leader, the members.

:class:`ClusterRole` is the :class:`~tenure.server._role.Role` every server of a
member runs with (one object across its terms): the handshake, the faces and
``/readyz`` ask it whether this server leads and where the leader is; ClusterStatus
and the dashboard ask it for the whole cluster. The member
(:mod:`tenure.server._cluster.member`) keeps it up to date: its role as it changes,
the leader as the election keys say, the members as their records say.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from tenure._protocol.cluster import CellView, ClusterView, MemberView
from tenure.server._cluster.directory import ServiceDirectory
from tenure.server._cluster.keys import ServerRecord
from tenure.server._cluster.store import Leader
from tenure.server._role import LEADER, STANDBY, Fresh

__all__ = ["ClusterRole"]


class ClusterRole:
    """See the module docstring."""

    def __init__(
        self, cluster: str, me: ServerRecord, places: ServiceDirectory | None = None
    ) -> None:
        """``places``: the service's directory (None: a cluster run without one, as the
        simulation's; the cell is then ``default``)."""
        self.cluster = cluster
        #: Which cell serves each node of the service.
        self.places = places
        #: This member's record (its addresses and name; role and applied as it writes).
        self.me = me
        self.name = STANDBY
        #: The leader as the election keys said when last read (None: no candidate).
        self.current: Leader | None = None
        #: Every member's record, as last read.
        self.members: list[ServerRecord] = []
        #: The index of the last log entry this member's engine holds.
        self.applied: Callable[[], int] = lambda: 0
        #: Leader changes this member has seen (a new term), for the metrics.
        self.leader_changes = 0
        self._last_term = 0
        #: The term this member leads in (0: it does not lead).
        self.own_term = 0
        #: While this member stands by: its state's freshness, for the reads it answers.
        self.freshness: Fresh | None = None

    @property
    def leading(self) -> bool:
        """Whether this member leads (and serves requests)."""
        return self.name == LEADER

    def leader(self, face: str = "native") -> str | None:
        """The leader's address for clients of ``face`` (None: unknown, or no such face)."""
        current = self.current
        if self.leading:
            member = self.me
        elif current is None:
            return None
        else:
            member = current.member
        if face == "native":
            address = member.address
        elif face == "http":
            address = member.http
        else:  # a face of another lock service (its registry entry's name)
            address = member.faces.get(face, "")
        return address or None

    def lead(self, term: int) -> None:
        """This member leads from now on, in ``term``."""
        self.name, self.own_term = LEADER, term
        self._count(term)

    def stand_by(self) -> None:
        """This member no longer leads (or never did)."""
        self.name, self.own_term = STANDBY, 0

    @property
    def term(self) -> int:
        """The current leader's term as this member knows it (0: none)."""
        if self.own_term:
            return self.own_term
        return self.current.term if self.current is not None else 0

    @property
    def leader_shift(self) -> float | None:
        """What turns the replicated engine's times into UNIX time: the leader's wall
        clock less its monotonic clock, as its record says (None: not known yet)."""
        current = self.current
        if current is None:
            return None
        for member in self.members:
            if member.name == current.member.name and member.shift:
                return member.shift
        return None

    def saw(self, current: Leader | None) -> None:
        """The election keys were read: ``current`` leads (None: nobody)."""
        self.current = current
        if current is not None:
            self._count(current.term)

    def _count(self, term: int) -> None:
        if term > self._last_term:
            if self._last_term:
                self.leader_changes += 1
            self._last_term = term

    def status(self) -> ClusterView:
        """The cluster as this member knows it now (its own record as it is now)."""
        now = time.time()
        records = {member.name: member for member in self.members}
        records[self.me.name] = self.me
        mine = self.applied()
        views = [
            _view(record, now, (self.name, mine) if name == self.me.name else None)
            for name, record in sorted(records.items())
        ]
        current = self.current
        leader = self.me.name if self.leading else (current.member.name if current else "")
        term = self.term
        index = max([mine, *(view.applied for view in views)])
        return ClusterView(
            cluster=self.cluster,
            leader=leader,
            term=term,
            index=index,
            answered_by=self.me.name,
            members=tuple(views),
            cell=self.places.cell if self.places is not None else "",
            cells=self._cells(now),
        )

    def _cells(self, now: float) -> tuple[CellView, ...]:
        """The service's cells, as the directory records their members (this one's
        too, even before its records are read; none without a directory)."""
        places = self.places
        if places is None:
            return ()
        cells = {cell: list(records) for cell, records in places.cells.items()}
        cells.setdefault(places.cell, [])
        return tuple(
            CellView(cell, tuple(_view(record, now) for record in sorted(records, key=_name)))
            for cell, records in sorted(cells.items())
        )


def _name(record: ServerRecord) -> str:
    return record.name


def _view(record: ServerRecord, now: float, own: tuple[str, int] | None = None) -> MemberView:
    """``record``'s view; ``own``: this member's role and applied index now (its own
    record's are as it last wrote them)."""
    role, applied = own if own is not None else (record.role, record.applied)
    return MemberView.of(
        name=record.name,
        role=role,
        address=record.address,
        applied=applied,
        age=0.0 if own is not None else max(0.0, now - record.written),
        http=record.http,
        faces=record.faces,
    )
