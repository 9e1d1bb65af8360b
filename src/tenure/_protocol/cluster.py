"""What a server of a cluster says about the cluster: the ClusterStatus request (version 3).

``tenure serve --cluster`` runs several servers as one service: one leads, the
others are standbys (docs/cluster.md). Any of them answers :class:`ClusterStatus`
with a :class:`ClusterView`: the members as the cluster's store (etcd) records
them, which one leads, and how far each has applied the shared log, so that
``tenure cluster status`` can show the whole cluster from any door. A server that
is not part of a cluster answers it ``Failure(UNSUPPORTED)``.

ClusterStatus is not an engine command: it travels in a Request like one (so that
answers are matched by request id as every other), but the server answers it
itself, on a standby as on the leader, and never journals it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from tenure._core.commands import Command
from tenure._protocol.wire import FLOAT, STR, UINT, ArrayOf, Optional, Record

__all__ = [
    "CELL_VIEW",
    "CLUSTER_STATUS",
    "CLUSTER_VIEW",
    "MEMBER_VIEW",
    "CellView",
    "ClusterStatus",
    "ClusterView",
    "MemberView",
]

#: A member's roles, as :attr:`MemberView.role` says them.
LEADER: Final = "leader"
STANDBY: Final = "standby"


@dataclass(frozen=True, slots=True)
class MemberView:
    """One server of the cluster, as it last recorded itself in the cluster's store.

    ``role``: ``leader`` or ``standby``; ``address``: where its clients reach it
    (``--advertise``); ``applied``: the index of the last log entry its engine holds;
    ``age``: seconds since it last recorded itself (None: unknown); ``http`` and
    ``ydb``: its HTTP endpoint's and YDB face's addresses (empty: none).
    """

    name: str
    role: str
    address: str
    applied: int
    age: float | None = None
    http: str = ""
    ydb: str = ""

    @classmethod
    def of(
        cls,
        name: str,
        role: str,
        address: str,
        applied: int,
        age: float | None,
        http: str,
        faces: Mapping[str, str],
    ) -> MemberView:
        """The view of a member whose faces of other lock services listen at ``faces``
        (by face name): the view carries YDB's (its clients' discovery), as ``ydb``."""
        return cls(name, role, address, applied, age, http, faces.get("ydb", ""))


@dataclass(frozen=True, slots=True)
class CellView:
    """One cell of a service, as the service's directory records its members
    (docs/cluster.md, "Cells").

    ``name``: the cell's; ``members``: each member that records itself there (its
    ``role`` and ``applied`` as it last wrote them), by name.
    """

    name: str
    members: tuple[MemberView, ...] = ()

    def leading(self) -> MemberView | None:
        """The member whose record says it leads (None: none does).

        Should two records say so (a deposed leader's lasts until its next write, or
        until its lease ends if it died), the newest record is the one taken.
        """
        leaders = [member for member in self.members if member.role == LEADER]
        if not leaders:
            return None
        return min(leaders, key=lambda member: (member.age is None, member.age or 0.0))


@dataclass(frozen=True, slots=True)
class ClusterView:
    """The reply to :class:`ClusterStatus`.

    ``cluster``: the cluster's name; ``leader``: the leading member's name (empty:
    none now); ``term``: the leader's term (its election key's revision in etcd;
    0: none); ``index``: the last log entry appended; ``answered_by``: the member
    that answers; ``members``: every member that records itself, by name.

    Since version 12, the service the cluster is a cell of: ``cell``, the answering
    member's cell (the others above are that cell's), and ``cells``, every cell of the
    service, this one too, by name (a client sends each node's requests to its cell's
    members). To an older peer both are left out.
    """

    cluster: str
    leader: str
    term: int
    index: int
    answered_by: str
    members: tuple[MemberView, ...] = ()
    cell: str = ""
    cells: tuple[CellView, ...] = ()


@dataclass(frozen=True, slots=True)
class ClusterStatus(Command[ClusterView]):
    """Ask a server of a cluster for the cluster's members, leader and log positions."""


MEMBER_VIEW: Final = Record(
    MemberView,
    [
        ("name", STR),
        ("role", STR),
        ("address", STR),
        ("applied", UINT),
        ("age", Optional(FLOAT)),
        ("http", STR),
        ("ydb", STR),
    ],
)
CELL_VIEW: Final = Record(CellView, [("name", STR), ("members", ArrayOf(MEMBER_VIEW))])
CLUSTER_VIEW: Final = Record(
    ClusterView,
    [
        ("cluster", STR),
        ("leader", STR),
        ("term", UINT),
        ("index", UINT),
        ("answered_by", STR),
        ("members", ArrayOf(MEMBER_VIEW)),
        ("cell", STR),  # since version 12
        ("cells", ArrayOf(CELL_VIEW)),  # since version 12
    ],
    tag=9,
    since=6,
)
CLUSTER_STATUS: Final = Record(ClusterStatus, [], tag=30)
