"""Usage errors of ``tenure lock``, ``elect`` and ``claim``, in-process (issue 50).

``tenure lock job echo hi`` (no ``--``) said "Got unexpected extra arguments (echo
hi)" and nothing of ``--``, the likely mistake. Each way of leaving the command
out of place now names where it goes. Parsing fails before anything is opened,
so :func:`tenure.cli.app.main` runs here in the test's process.
"""

from __future__ import annotations

import pytest

from tenure.cli.app import main

CASES = [
    (["lock", "job", "echo", "hi"], "tenure lock", "unexpected extra arguments (echo hi)"),
    (["lock", "job", "ls", "-l"], "tenure lock", "No such option '-l'"),
    (["lock", "job"], "tenure lock", "no command to run"),
    (["lock", "job", "--"], "tenure lock", "no command after '--'"),
    (["elect", "leader", "echo", "hi"], "tenure elect", "unexpected extra arguments"),
    (
        ["claim", "slot", "--at-least", "1", "--at-most", "9", "echo"],
        "tenure claim",
        "unexpected extra argument",
    ),
]


@pytest.mark.parametrize(("args", "command", "reason"), CASES)
def test_a_command_out_of_place_is_told_where_it_goes(
    args: list[str], command: str, reason: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err  # one line
    assert err.startswith(f"{command}: "), err
    assert reason in err
    assert f"use: {command} [OPTIONS] NAME -- COMMAND..." in err


def test_help_without_a_command_still_shows_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lock", "job", "--help"]) == 0
    assert "Usage: tenure lock [OPTIONS] [NAME]" in capsys.readouterr().out
