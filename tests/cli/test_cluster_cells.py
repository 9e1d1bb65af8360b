"""``tenure cluster status`` of a service of several cells, in this process: which
view each cell is shown from, how each cell is judged, what is printed and what
``--json`` says (tenure.cli._cluster_cells; the real service: tests/cluster/
test_cells_status.py)."""

from __future__ import annotations

import io

from rich.console import Console

from tenure._protocol.cluster import CellView
from tenure._protocol.messages import LEADER, STANDBY
from tenure.backends.remote import ClusterView, DoorStatus, MemberView
from tenure.cli._cluster_cells import cells_status, is_service, service_view, shown_view
from tenure.cli._status import Status
from tenure.cli.cluster import judge, status_json, status_parts
from tenure.errors import UnavailableError


def member(name: str, role: str, applied: int, age: float | None = 0.5) -> MemberView:
    return MemberView(name, role, f"{name}.example:6388", applied, age)


#: The directory's records of both cells, as every member reads them.
RECORDS = (
    CellView("a", (member("a1", LEADER, 10), member("a2", STANDBY, 8))),
    CellView("b", (member("b1", LEADER, 4), member("b2", STANDBY, 3, age=1.5))),
)


def view_of(name: str, leader: str, index: int, cell: str = "a", term: int = 7) -> ClusterView:
    """What a member of cell ``cell`` answers (its cell's store: exact, fresher than
    the directory's records)."""
    members = (member(f"{cell}1", LEADER, index, 0.1), member(f"{cell}2", STANDBY, index - 1))
    return ClusterView("prod", leader, term, index, name, members, cell=cell, cells=RECORDS)


def printed(doors: list[DoorStatus]) -> str:
    cells = cells_status(doors)
    service = cells if is_service(doors) else None
    view = shown_view(doors) if service is None else service_view(doors, service)
    out = io.StringIO()
    console = Console(file=out, width=200, no_color=True, highlight=False)
    for part in status_parts(doors, view, service):
        console.print(part)
    return out.getvalue()


def rows(out: str) -> list[list[str]]:
    return [[c.strip() for c in line.split("│")] for line in out.splitlines() if "│" in line]


def test_a_cell_is_shown_from_its_own_members_answer_and_another_from_its_records() -> None:
    doors = [
        DoorStatus("a2.example:6388", STANDBY, view_of("a2", "a1", 12)),
        DoorStatus("a1.example:6388", LEADER, view_of("a1", "a1", 12)),
    ]
    assert is_service(doors)
    a, b = cells_status(doors)
    # Cell a: the view of its leader, which answered (exact: its index, not the records').
    assert (a.name, a.view, a.leader, a.term, a.index, a.leads) == (
        "a", doors[1].view, "a1", 7, 12, True
    )  # fmt: skip
    # Cell b: no door of it was asked; its records say b1 leads.
    assert (b.name, b.view, b.source, b.leader, b.term, b.index, b.leads) == (
        "b", None, "a2", "b1", 0, 4, True
    )  # fmt: skip
    assert b.members == RECORDS[1].members
    assert judge(doors, service_view(doors, [a, b]), [a, b]) == (Status.OK, "")
    out = printed(doors)
    assert out.splitlines()[0] == "service 'prod': 2 cells (a, b)"
    assert "cell 'a': leader a1 (term 7), log index 12 (as a1 sees it)" in out
    assert (
        "cell 'b': leader b1, log index 4 (its records in the directory, as a2 read them: "
        "no door of it answered)"
    ) in out
    shown = {row[0]: row for row in rows(out)}
    assert shown["a1"] == ["a1", LEADER, "a1.example:6388", "12", "0", "0.1s"]
    assert shown["b2"] == ["b2", STANDBY, "b2.example:6388", "3", "1", "1.5s"]
    assert shown["a2.example:6388"] == ["a2.example:6388", STANDBY, "a2", "a", "ok"]


def test_the_json_keeps_one_cells_keys_and_lists_every_cell() -> None:
    doors = [
        DoorStatus("b1.example:6388", LEADER, view_of("b1", "b1", 5, cell="b", term=3)),
        DoorStatus("a1.example:6388", LEADER, view_of("a1", "a1", 12)),
    ]
    cells = cells_status(doors)
    view = service_view(doors, cells)
    document = status_json(doors, view, Status.OK, cells)
    # The keys of one cluster are the first door's cell's (b), which "cell" names.
    assert (document["cell"], document["leader"], document["term"], document["index"]) == (
        "b", "b1", 3, 5
    )  # fmt: skip
    listed = document["cells"]
    assert isinstance(listed, list)
    assert [(c["name"], c["exact"], c["leader"], c["has_leader"]) for c in listed] == [
        ("a", True, "a1", True),
        ("b", True, "b1", True),
    ]
    assert [(m["name"], m["lag"]) for m in listed[0]["members"]] == [("a1", 0), ("a2", 1)]


def test_each_cell_is_judged_and_the_one_without_a_leader_is_named() -> None:
    # Cell b's door answered, but as a standby: no door of it that answered leads.
    doors = [
        DoorStatus("a1.example:6388", LEADER, view_of("a1", "a1", 12)),
        DoorStatus("b2.example:6388", STANDBY, view_of("b2", "b1", 5, cell="b")),
    ]
    cells = cells_status(doors)
    verdict, why = judge(doors, service_view(doors, cells), cells)
    assert verdict == Status.BUSY
    assert why == (
        "a cell has no leader: cell 'b': no door of it that answered leads (its members name 'b1')"
    )
    assert printed(doors).splitlines()[0] == "service 'prod': 2 cells (a, b); without a leader: b"
    # Cell b never asked, and no record of it says one leads.
    records = (RECORDS[0], CellView("b", (member("b2", STANDBY, 3),)))
    view = ClusterView("prod", "a1", 7, 12, "a1", RECORDS[0].members, cell="a", cells=records)
    doors = [DoorStatus("a1.example:6388", LEADER, view)]
    cells = cells_status(doors)
    assert judge(doors, view, cells) == (
        Status.BUSY,
        "a cell has no leader: cell 'b': no door of it answered, and no record of its "
        "members says one leads",
    )
    assert "cell 'b': no member records itself leader, log index 3" in printed(doors)
    # Every cell leads, but a door could not be asked: as for one cluster, exit 3.
    down = DoorStatus("b9.example:6388", None, None, UnavailableError("refused"))
    doors = [DoorStatus("a1.example:6388", LEADER, view_of("a1", "a1", 12)), down]
    cells = cells_status(doors)
    verdict, why = judge(doors, service_view(doors, cells), cells)
    assert verdict == Status.FAILED
    assert why.startswith("1 of 2 doors could not be asked: b9.example:6388: UnavailableError")


def test_a_cluster_of_the_default_cell_is_shown_as_one_cluster() -> None:
    records = (CellView("default", (member("t1", LEADER, 10),)),)
    view = ClusterView(
        "prod", "t1", 2, 10, "t1", (member("t1", LEADER, 10),), cell="default", cells=records
    )
    doors = [DoorStatus("t1.example:6388", LEADER, view)]
    assert not is_service(doors)
    out = printed(doors)
    assert out.splitlines()[0] == "cluster 'prod': leader t1 (term 2), log index 10 (as t1 sees it)"
    assert "cell" not in out
    # (an older server names no cell: cell default, the same)
    old = DoorStatus("t1.example:6388", LEADER, ClusterView("prod", "t1", 2, 10, "t1"))
    assert not is_service([old])
    # A service of one cell named otherwise is shown as a service: its name says so.
    named = ClusterView("prod", "t1", 2, 10, "t1", cell="a", cells=(CellView("a"),))
    assert is_service([DoorStatus("t1.example:6388", LEADER, named)])


def test_of_two_records_that_say_they_lead_the_newest_is_the_leader() -> None:
    deposed = member("b1", LEADER, 4, age=2.5)
    cell = CellView("b", (deposed, member("b2", LEADER, 5, age=0.2), member("b3", STANDBY, 5)))
    assert cell.leading() == cell.members[1]
    assert CellView("b", (member("b3", STANDBY, 5),)).leading() is None


def test_what_members_say_of_their_cells_is_shown_escaped() -> None:
    evil = "x\x1b[2J\rFORGED\u202e"
    records = (CellView(f"c{evil}", (member(f"m{evil}", LEADER, 1),)), RECORDS[0])
    view = ClusterView("prod", "a1", 7, 12, "a1", RECORDS[0].members, cell="a", cells=records)
    out = printed([DoorStatus("a1.example:6388", LEADER, view)])
    assert "\x1b" not in out
    assert "\u202e" not in out
    assert out.count("x\\x1b[2J\\rFORGED\\u202e") >= 3  # heading, cell line, member
