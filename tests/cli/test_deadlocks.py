"""``tenure describe NODE`` and ``tenure node describe``: the deadlocks a server broke."""

from __future__ import annotations

import asyncio
import json
import time

from tests.broken_deadlock import break_a_deadlock
from tests.cli.support import run_tenure


def test_describe_node_shows_the_broken_deadlock(url: str, node: str) -> None:
    before = time.time()
    one, two = asyncio.run(break_a_deadlock(url, node))
    result = run_tenure("describe", node, "--json", url=url)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["name"] == node
    [broken] = document["deadlocks"]
    assert broken["session_id"] == two
    assert broken["task"] > 0
    assert before - 1 <= broken["at"] <= time.time() + 1  # UNIX seconds, the server's clock
    assert broken["cycle"].startswith(f"session {two} (task {broken['task']}) waits for 'a'")
    assert f"held by session {one} (task" in broken["cycle"]
    for args in (("describe", node), ("node", "describe", node)):
        text = run_tenure(*args, url=url)
        assert text.returncode == 0, text.stderr
        assert "deadlocks broken lately (1: an acquire refused each)" in text.stdout
        assert f"session {two} (task" in text.stdout
        assert "waits for 'a'" in text.stdout


def test_describe_node_says_when_none_was_broken(url: str, node: str) -> None:
    created = run_tenure("node", "create", node, url=url)
    assert created.returncode == 0, created.stderr
    text = run_tenure("describe", node, url=url)
    assert text.returncode == 0, text.stderr
    assert f"node '{node}'" in text.stdout
    assert "no deadlock broken lately" in text.stdout
    assert json.loads(run_tenure("describe", node, "--json", url=url).stdout)["deadlocks"] == []
