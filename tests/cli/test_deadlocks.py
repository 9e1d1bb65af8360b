"""``tenure describe NODE`` and ``tenure node describe``: the deadlocks a server broke."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

import tenure
from tenure.errors import DeadlockError
from tenure.testing.conformance.support import wait_for_waiters
from tests.cli.support import run_tenure


async def break_a_deadlock(url: str, node: str) -> tuple[int, int]:
    """Two sessions cross two mutexes; the closing acquire is refused. Their ids."""
    async with tenure.connect(url) as client:
        await client.create_node(node)
        async with client.session(node) as one, client.session(node) as two:
            b = await two.mutex("b").lock()
            holds = asyncio.Event()

            async def first() -> None:
                async with one.mutex("a").lock():
                    holds.set()
                    async with one.mutex("b").lock():
                        pass

            task = asyncio.create_task(first())
            await asyncio.wait_for(holds.wait(), 10)
            await wait_for_waiters(one, "b", 1)
            with pytest.raises(DeadlockError):
                await two.mutex("a").lock()
            await b.release()
            await asyncio.wait_for(task, 10)
            return one.id, two.id


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
