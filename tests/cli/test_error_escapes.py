"""What servers and backends say reaches the terminal escaped: error lines, and
``tenure cluster status``'s heading and tables (names any member or client chose)."""

from __future__ import annotations

import io

from rich.console import Console

from tenure._protocol.cluster import ClusterView, MemberView
from tenure.backends.remote import DoorStatus
from tenure.cli._common import error_line
from tenure.cli.cluster import status_parts
from tenure.errors import NotFoundError, UnavailableError

#: A clear-screen, a carriage return forging a line, a right-to-left override.
EVIL = "x\x1b[2J\rFORGED\u202e"


def test_an_error_line_shows_control_characters_escaped() -> None:
    line = error_line(NotFoundError(f"semaphore '{EVIL}' does not exist"))
    assert "\x1b" not in line
    assert "\r" not in line
    assert "\u202e" not in line
    # (Whitespace, a carriage return included, is one space: the error is one line.)
    assert line == "tenure: NotFoundError: semaphore 'x\\x1b[2J FORGED\\u202e' does not exist"


def test_cluster_status_shows_what_members_say_escaped() -> None:
    member = MemberView(f"m{EVIL}", "leader", f"h{EVIL}:1", 5, 0.1, "", "")
    view = ClusterView(f"c{EVIL}", f"m{EVIL}", 3, 5, f"m{EVIL}", (member,))
    doors = [DoorStatus(f"d{EVIL}:1", "leader", view), DoorStatus("e:2", None, None,
             UnavailableError(f"refused by {EVIL}"))]  # fmt: skip
    out = io.StringIO()
    console = Console(file=out, width=400, no_color=True, highlight=False)
    for part in status_parts(doors, view):
        console.print(part)
    shown = out.getvalue()
    assert "\x1b" not in shown
    assert "\r" not in shown
    assert "\u202e" not in shown
    assert shown.count("x\\x1b[2J\\rFORGED\\u202e") >= 6  # heading, member, doors, error
