"""Text that clients choose is shown escaped to people, exact in JSON (issue 28).

Any client that may open a session chooses its description and its owner data; shown
raw, an escape sequence, a carriage return or a bidi override would recolour, forge
or reverse lines on the operator's terminal.
"""

from __future__ import annotations

import json
import sys

import pytest

from tenure.cli._render import safe
from tests.cli.support import run_tenure, start_tenure, stop, wait_for_line

#: Text with an escape sequence, a forged line and a right-to-left override.
EVIL = "\x1b[31m\r\nforged line\u202e\x9b[bold]x"
#: What must never reach the terminal as it is.
RAW = ("\x1b", "\r", "\nforged", "\u202e", "\x9b")
#: How the same text must show.
ESCAPED = ("\\x1b[31m", "\\r\\nforged line", "\\u202e", "\\x9b", "[bold]x")
#: A child that says it runs, then waits to be stopped.
WAITING = "import time; print('child runs', flush=True); time.sleep(20)"


def strings(found: object) -> list[str]:
    """Every string in a JSON document."""
    if isinstance(found, str):
        return [found]
    if isinstance(found, dict):
        found = list(found.values())
    if isinstance(found, list):
        return [text for item in found for text in strings(item)]
    return []


def test_safe_escapes_control_and_bidi_characters_only() -> None:
    assert safe("plain text, ünïcode [b]") == "plain text, ünïcode [b]"
    assert safe(EVIL) == "\\x1b[31m\\r\\nforged line\\u202e\\x9b[bold]x"
    assert safe("\t\x00\x7f\u2066\u2028") == "\\t\\x00\\x7f\\u2066\\u2028"


@pytest.mark.parametrize(
    "args",
    [
        ["describe", "{node}", "job"],
        ["sessions", "{node}"],
        ["watch", "{node}", "job", "--count", "1"],
    ],
)
def test_commands_show_client_text_escaped(url: str, node: str, args: list[str]) -> None:
    # The description is the command line, so EVIL in the command's arguments is in it.
    holder = start_tenure(
        "lock", "job", "--node", node, "--create-node", "--data", EVIL,
        "--", sys.executable, "-c", WAITING, EVIL, url=url,
    )  # fmt: skip
    try:
        wait_for_line(holder, "child runs")
        shown = run_tenure(*(arg.format(node=node) for arg in args), url=url)
        assert shown.returncode == 0, shown.stderr
        for raw in RAW:
            assert raw not in shown.stdout, (raw, shown.stdout)
        wanted = ESCAPED if args[0] != "sessions" else ESCAPED[:3]  # sessions: no data
        for escaped in wanted:
            assert escaped in shown.stdout.replace("\n", ""), (escaped, shown.stdout)
        # JSON stays exact.
        exact = run_tenure(*(arg.format(node=node) for arg in args), "--json", url=url)
        documents = [json.loads(line) for line in exact.stdout.splitlines() if line.strip()]
        assert any(EVIL in text for text in strings(documents)), exact.stdout
    finally:
        stop(holder)


def test_the_leaders_data_is_shown_escaped(url: str, node: str) -> None:
    holder = start_tenure(
        "elect", "boss", "--node", node, "--create-node", "--data", EVIL,
        "--", sys.executable, "-c", WAITING, url=url,
    )  # fmt: skip
    try:
        wait_for_line(holder, "child runs")
        for args in (["leader", "boss"], ["observe", "boss", "--count", "1"]):
            shown = run_tenure(*args, "--node", node, url=url)
            assert shown.returncode == 0, shown.stderr
            for raw in RAW:
                assert raw not in shown.stdout, (args, raw, shown.stdout)
            for escaped in ESCAPED:
                assert escaped in shown.stdout, (args, escaped, shown.stdout)
    finally:
        stop(holder)
