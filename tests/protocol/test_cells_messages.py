"""Protocol version 12: a service of several cells (docs/protocol.md section 16,
"Cells"): Welcome's trailing ``cell``, ClusterView's ``cell`` and ``cells``, the
error WRONG_CELL, and what an older peer is sent instead."""

from __future__ import annotations

import pytest

from tenure._core import SessionEnded
from tenure._protocol import PROTOCOL_VERSION, Failure, Push, Reply, Welcome
from tenure._protocol.cluster import CellView, ClusterView, MemberView
from tenure._protocol.messages import LEADER, STANDBY
from tenure._protocol.older_peers import for_version
from tenure.errors import ErrorCode, UnavailableError, WrongCellError, error_from_code
from tests.protocol.helpers import message_of, wire_of

MEMBERS = (MemberView("a1", LEADER, "a1:6388", 7), MemberView("a2", STANDBY, "a2:6388", 6))
VIEW = ClusterView(
    cluster="svc",
    leader="a1",
    term=3,
    index=7,
    answered_by="a1",
    members=MEMBERS,
    cell="a",
    cells=(CellView("a", MEMBERS), CellView("b", (MemberView("b1", LEADER, "b1:6388", 2),))),
)


def test_a_welcome_names_the_cell_last() -> None:
    welcome = Welcome(server_name="s", role=LEADER, cell="a")
    assert wire_of(welcome) == [
        11,
        PROTOCOL_VERSION,
        "s",
        b"",
        1048576,
        0.0,
        "leader",
        None,
        True,
        "a",
    ]
    assert message_of(wire_of(welcome)) == welcome
    # A standalone server's Welcome is unchanged (no cell: not sent).
    assert wire_of(Welcome(server_name="s")) == [11, PROTOCOL_VERSION, "s", b"", 1048576, 0.0]


def test_a_cluster_view_lists_the_cells_last() -> None:
    wire = wire_of(Reply(1, VIEW))
    assert wire[2][7:] == [
        "a",
        [
            [
                "a",
                [
                    ["a1", "leader", "a1:6388", 7, None, "", ""],
                    ["a2", "standby", "a2:6388", 6, None, "", ""],
                ],
            ],
            ["b", [["b1", "leader", "b1:6388", 2, None, "", ""]]],
        ],
    ]
    assert message_of(wire) == Reply(1, VIEW)


@pytest.mark.parametrize("version", [11, 10, 3])
def test_an_older_peer_is_sent_no_cell(version: int) -> None:
    welcome = for_version(Welcome(version=version, role=LEADER, cell="a"), version)
    assert isinstance(welcome, Welcome)
    assert welcome.cell == ""
    view = for_version(Reply(1, VIEW), version)
    assert isinstance(view, Reply)
    assert isinstance(view.value, ClusterView)
    assert (view.value.cell, view.value.cells) == ("", ())
    assert view.value.members == MEMBERS
    assert for_version(Reply(1, VIEW), 12) == Reply(1, VIEW)


def test_wrong_cell_is_code_44_names_the_cell_and_the_epoch() -> None:
    assert int(ErrorCode.WRONG_CELL) == 44
    said = WrongCellError.pointing_to("orders", "b", 3)
    assert str(said) == "cell=b epoch=3 (node 'orders' is served by that cell)"
    error = error_from_code(ErrorCode.WRONG_CELL, str(said))
    assert isinstance(error, WrongCellError)
    assert isinstance(error, UnavailableError)
    assert (error.cell, error.epoch) == ("b", 3)
    assert (WrongCellError("no marks").cell, WrongCellError("no marks").epoch) == ("", 0)


def test_an_older_peer_is_told_unavailable_in_its_place() -> None:
    failure = Failure(4, ErrorCode.WRONG_CELL, str(WrongCellError.pointing_to("n", "b", 1)))
    older = for_version(failure, 11)
    assert older == Failure(4, ErrorCode.UNAVAILABLE, failure.message)
    assert for_version(failure, 12) is failure
    assert message_of(wire_of(failure)) == failure


def test_an_older_peer_is_told_its_session_expired_as_its_node_moves() -> None:
    why = "node 'n' is moving to cell 'b'"
    moving = Push(SessionEnded(7, ErrorCode.WRONG_CELL, why))
    older = for_version(moving, 11)
    assert older == Push(SessionEnded(7, ErrorCode.SESSION_EXPIRED, why))
    assert for_version(moving, 12) is moving
    assert message_of(wire_of(moving)) == moving
    ended = Push(SessionEnded(7, ErrorCode.SESSION_EXPIRED, "expired"))
    assert for_version(ended, 11) is ended
