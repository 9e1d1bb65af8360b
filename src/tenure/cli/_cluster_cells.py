"""``tenure cluster status`` of a service of several cells (docs/cluster.md, "Cells").

Each member of a service answers ClusterStatus with its own cell's view (the leader,
term, log index and members its cell's store records: exact for that cell) and the
service's directory's records of every cell (each member's record as it last wrote
it, read every second). The command shows each cell from the view of a member of
that cell, when one of the doors asked is one (its leader's own first, else the
latest, as for one cluster: :func:`shown_view`); else from the directory's records
of it, as the first door that answered read them. A cell has a leader when a door
of it that answered leads (as one cluster is judged), or, when no door of it
answered, when a member's record says it leads.

The answers are shown so once they name more than one cell, or one other than
``default`` (:func:`is_service`): a cluster started without ``--cell`` is cell
``default``, a service of one cell whose output stays that of one cluster, as it
was before cells (an older server names no cell: the same).

Layer (CONTRIBUTING.md): this module may also import tenure.backends.remote (types).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rich.text import Text

from tenure.cli import _render

if TYPE_CHECKING:
    from tenure.backends.remote import ClusterView, DoorStatus, MemberView

#: Welcome.role of a cluster's leader (tenure._protocol's word, said here as text).
LEADER = "leader"
#: The cell of a member started without ``--cell`` (and of an older server's answer).
DEFAULT_CELL = "default"


@dataclass(frozen=True, slots=True)
class CellStatus:
    """One cell of a service, as ``tenure cluster status`` shows it (module docstring).

    ``view``: the view of a member of the cell that answered (None: no door of the
    cell answered, and ``members`` are the directory's records of it); ``source``:
    that member, or the one whose reading of the directory is shown; ``leader``:
    the leading member's name (empty: none known); ``term``: the leader's (0:
    unknown, as the records do not say it); ``index``: the log's last index (from
    the records: the furthest a member applied); ``leads``: whether the cell is
    judged to have a leader.
    """

    name: str
    source: str
    leader: str
    term: int
    index: int
    members: tuple[MemberView, ...]
    leads: bool
    view: ClusterView | None = None


def cell_of(view: ClusterView) -> str:
    """The cell of the member that answered ``view`` (an older server names none: it
    is a cluster made before cells, cell ``default``)."""
    return view.cell or DEFAULT_CELL


def cell_names(doors: Sequence[DoorStatus]) -> list[str]:
    """Every cell the answers name (their members' own, and the directory's), sorted."""
    names: set[str] = set()
    for door in doors:
        if door.view is not None:
            names.add(cell_of(door.view))
            names.update(cell.name for cell in door.view.cells)
    return sorted(names)


def is_service(doors: Sequence[DoorStatus]) -> bool:
    """Whether the answers are shown cell by cell (module docstring)."""
    names = cell_names(doors)
    return len(names) > 1 or any(name != DEFAULT_CELL for name in names)


def shown_view(doors: Sequence[DoorStatus]) -> ClusterView | None:
    """The view to show: the leader's own if it answered, else the latest (by term, index)."""
    views = [(door.role == LEADER, door.view) for door in doors if door.view is not None]
    if not views:
        return None
    return max(views, key=lambda seen: (seen[0], seen[1].term, seen[1].index))[1]


def cells_status(doors: Sequence[DoorStatus]) -> list[CellStatus]:
    """Each cell the answers name, by name (module docstring)."""
    cells: list[CellStatus] = []
    for name in cell_names(doors):
        own = [door for door in doors if door.view is not None and cell_of(door.view) == name]
        view = shown_view(own)
        if view is not None:
            leads = any(door.role == LEADER for door in own)
            cells.append(
                CellStatus(
                    name=name,
                    source=view.answered_by,
                    leader=view.leader,
                    term=view.term,
                    index=view.index,
                    members=view.members,
                    leads=leads,
                    view=view,
                )
            )
        else:
            cells.append(_recorded(doors, name))
    return cells


def _recorded(doors: Sequence[DoorStatus], name: str) -> CellStatus:
    """Cell ``name`` as the directory records it, read by the first door that answered
    with it (each member reads every record at once: one reading is shown, whole)."""
    for door in doors:
        if door.view is None:
            continue
        for cell in door.view.cells:
            if cell.name == name:
                leader = cell.leading()
                index = max((member.applied for member in cell.members), default=0)
                return CellStatus(
                    name=name,
                    source=door.view.answered_by,
                    leader=leader.name if leader is not None else "",
                    term=0,
                    index=index,
                    members=cell.members,
                    leads=leader is not None,
                )
    raise AssertionError(f"no answer names cell {name!r}")  # (cell_names found it in one)


def service_view(doors: Sequence[DoorStatus], cells: Sequence[CellStatus]) -> ClusterView | None:
    """The view ``--json``'s keys of one cluster are of, in a service: that of the cell
    of the first door that answered (its leader's, as :func:`shown_view` chooses)."""
    first = next((door.view for door in doors if door.view is not None), None)
    if first is None:
        return None
    return next(cell.view for cell in cells if cell.name == cell_of(first))


def no_leader(cell: CellStatus) -> str:
    """Why ``cell`` is judged to have no leader, in a few words."""
    if cell.view is None:
        return (
            f"cell {cell.name!r}: no door of it answered, and no record of its members "
            "says one leads"
        )
    known = f"its members name {cell.leader!r}" if cell.leader else "no member leads"
    return f"cell {cell.name!r}: no door of it that answered leads ({known})"


def members_json(members: Sequence[MemberView], index: int) -> list[dict[str, object]]:
    """Each member as JSON, with its lag behind the log (``index - applied``)."""
    return [
        {
            "name": member.name,
            "role": member.role,
            "address": member.address,
            "applied": member.applied,
            "lag": max(0, index - member.applied),
            "age": member.age,
            "http": member.http or None,
            "ydb": member.ydb or None,
        }
        for member in members
    ]


def cells_json(cells: Sequence[CellStatus]) -> list[dict[str, object]]:
    """``--json``'s ``cells``: each cell, ``exact`` when a member of it answered (else
    the directory's records, as ``answered_by`` read them; ``term`` unknown: null)."""
    return [
        {
            "name": cell.name,
            "exact": cell.view is not None,
            "answered_by": cell.source,
            "leader": cell.leader or None,
            "term": cell.term if cell.view is not None else None,
            "index": cell.index,
            "has_leader": cell.leads,
            "members": members_json(cell.members, cell.index),
        }
        for cell in cells
    ]


def members_table(title: str, members: Sequence[MemberView], index: int) -> Any:
    """The table of ``members``: role, address, applied index, lag, age of the record."""
    return _render.table(
        title,
        ["name", "role", "address", "applied", "lag", "age"],
        (
            [
                member.name,
                member.role,
                member.address,
                str(member.applied),
                str(max(0, index - member.applied)),
                _render.duration_text(member.age),
            ]
            for member in members
        ),
    )


def cells_parts(cluster: str, cells: Sequence[CellStatus]) -> list[Any]:
    """What the command prints of a service before its doors: a heading, then each
    cell's line and members (what the servers say is shown as text, escaped)."""
    missing = [cell.name for cell in cells if not cell.leads]
    heading = f"service {cluster!r}: {len(cells)} cells ({', '.join(c.name for c in cells)})"
    if missing:
        heading += f"; without a leader: {', '.join(missing)}"
    parts: list[Any] = [Text(_render.safe(heading))]
    for cell in cells:
        if cell.view is not None:
            leader = f"leader {cell.leader} (term {cell.term})" if cell.leader else "no leader"
            seen = f"as {cell.source} sees it"
        else:
            leader = f"leader {cell.leader}" if cell.leader else "no member records itself leader"
            seen = (
                f"its records in the directory, as {cell.source} read them: no door of it answered"
            )
        line = f"cell {cell.name!r}: {leader}, log index {cell.index} ({seen})"
        parts.append(Text(_render.safe(line)))
        parts.append(members_table(f"cell {cell.name}", cell.members, cell.index))
    return parts
