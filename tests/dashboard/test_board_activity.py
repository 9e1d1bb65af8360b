"""How busy each node of the dashboard's view is, and the order that makes
(:mod:`tenure.server._http.board_activity`; issue 57: the nodes came in name order, the
one busy node below 11 idle ones): the most waiters first, then the most
disconnected sessions, then the most holds and grants, in powers of two, then by
name; a node idle only when nothing is held, waited for or granted lately."""

from __future__ import annotations

import json
from typing import Any

from tenure._core import Acquire, CreateNode, CreateSession, DetachSession, Engine, Release
from tenure._core.values import MAX_COUNT
from tenure.server._http.board import BoardLimits, board
from tenure.server._http.board_activity import (
    GRANTS_WINDOW,
    SAMPLE_EVERY,
    NodeActivity,
)

SHIFT = 1_700_000_000.0


def view(engine: Engine, now: float, activity: NodeActivity | None = None, **limits: int) -> Any:
    """The board of ``engine`` at ``now``, as a viewer of every node sees it."""
    return board(
        engine,
        now=now,
        shift=SHIFT,
        limits=BoardLimits(**limits),
        may_see=lambda node: True,
        may_kill=lambda node: False,
        prefixes=None,
        activity=activity,
    )


def hold(engine: Engine, node: str, name: str, at: float = 1.0) -> int:
    """A new session of ``node`` takes mutex ``name`` (queues, if it is held): its id."""
    sid = engine.apply(CreateSession(node, b"k", 30.0), at).session_id
    engine.apply(Acquire(sid, name, MAX_COUNT, request_id=1, ephemeral=True), at)
    return sid


def order(seen: Any) -> list[tuple[str, bool]]:
    """(name, idle) of each node of a view, in its order."""
    return [(node["name"], node["activity"]["idle"]) for node in seen["nodes"]]


def test_the_busiest_come_first_in_powers_of_two_then_by_name() -> None:
    engine = Engine()
    for node in "abcdefg":
        engine.apply(CreateNode(node), 0.0)
    hold(engine, "b", "m1")  # 1 hold
    for name in ("m1", "m2", "m3"):  # 3 holds
        hold(engine, "c", name)
    for name in ("m1", "m2"):  # 2 holds: as busy as c (2-3), so by name
        hold(engine, "d", name)
    hold(engine, "e", "m1")
    hold(engine, "e", "m1")  # 1 hold, 1 waiter: first of all
    seen = view(engine, now=100.0)  # (the grants are long past: a minute and more)
    assert order(seen) == [
        ("e", False),
        ("c", False),
        ("d", False),
        ("b", False),
        ("a", True),
        ("f", True),
        ("g", True),
    ]
    e = seen["nodes"][0]["activity"]
    assert (e["waiters"], e["holds"], e["disconnected"], e["grants"]) == (1, 1, 0, None)
    assert e["granted_at"] == SHIFT + 1.0
    # d takes a third hold (a minute ago): as busy as c still, it keeps its place.
    hold(engine, "d", "m3", at=101.0)
    later = 101.0 + GRANTS_WINDOW + 1
    assert [n for n, _ in order(view(engine, now=later))][:4] == ["e", "c", "d", "b"]
    # A fourth: a power of two more, it comes before c.
    hold(engine, "d", "m4", at=later)
    assert [n for n, _ in order(view(engine, now=later + 1))][:4] == ["e", "d", "c", "b"]


def test_a_disconnected_session_comes_before_holds_and_keeps_its_node_busy() -> None:
    engine = Engine()
    for node in ("a", "b", "c"):
        engine.apply(CreateNode(node), 0.0)
    for name in ("m1", "m2", "m3", "m4"):
        hold(engine, "a", name)
    gone = engine.apply(CreateSession("c", b"k", 30.0), 0.0).session_id
    engine.apply(DetachSession(gone), 100.0)  # its client's connection is gone
    seen = view(engine, now=101.0)
    assert order(seen) == [("c", False), ("a", False), ("b", True)]
    [session] = seen["nodes"][0]["sessions"]
    assert session["expires_at"] == SHIFT + 130.0
    assert seen["nodes"][0]["activity"]["disconnected"] == 1


def test_a_disconnected_holder_says_when_its_session_ends() -> None:
    engine = Engine()
    engine.apply(CreateNode("n"), 0.0)
    holder = hold(engine, "n", "m")
    waiter = hold(engine, "n", "m")
    engine.apply(DetachSession(holder), 10.0)
    [mutex] = view(engine, now=11.0)["nodes"][0]["semaphores"]
    assert mutex["owners"][0]["expires_at"] == SHIFT + 40.0  # its window: 30 s from 10
    assert mutex["waiters"][0]["session_id"] == waiter
    assert mutex["waiters"][0]["expires_at"] is None  # connected


def test_a_node_granted_lately_is_busy_until_a_minute_passes() -> None:
    engine = Engine()
    engine.apply(CreateNode("n"), 0.0)
    sid = hold(engine, "n", "m", at=10.0)
    engine.apply(Release(sid, "m"), 11.0)
    soon = view(engine, now=10.0 + GRANTS_WINDOW)["nodes"][0]["activity"]
    assert (soon["holds"], soon["granted_at"], soon["idle"]) == (0, SHIFT + 10.0, False)
    late = view(engine, now=10.0 + GRANTS_WINDOW + 1)["nodes"][0]["activity"]
    assert late["idle"] is True


def test_recent_grants_are_counted_from_the_nodes_counter_over_a_minute() -> None:
    engine = Engine()
    engine.apply(CreateNode("n"), 0.0)
    node = engine.nodes["n"]
    activity = NodeActivity()
    assert activity.grants("n", node, 0.0) is None  # one sample: nothing to count from
    sid = engine.apply(CreateSession("n", b"k", 30.0), 0.0).session_id
    for request in range(1, 6):  # five grants
        engine.apply(Acquire(sid, "m", MAX_COUNT, request_id=request, ephemeral=True), 1.0)
        engine.apply(Release(sid, "m"), 1.0)
    assert node.grants == 5
    assert activity.grants("n", node, 2.0) == 5
    for now in range(5, 60, int(SAMPLE_EVERY)):  # sampled, nothing new
        activity.sample(engine, float(now), first=["n"])
    assert activity.grants("n", node, 60.0) == 5  # the oldest kept is a minute old
    for now in range(60, 130, int(SAMPLE_EVERY)):
        activity.sample(engine, float(now), first=["n"])
    assert activity.grants("n", node, 130.0) == 0  # a minute and more without one
    # In a view, a node with recent grants is busy though it holds nothing now.
    seen = view(engine, now=130.0, activity=activity)
    assert seen["nodes"][0]["activity"]["grants"] == 0
    # A node dropped and made again counts afresh.
    fresh = Engine()
    fresh.apply(CreateNode("n"), 0.0)
    assert activity.grants("n", fresh.nodes["n"], 131.0) is None


def test_a_view_still_reads_only_the_nodes_it_shows_and_samples_only_those() -> None:
    # Issue 37's rule, kept with the order: a view of 20,000 nodes reads the first
    # 50 names; the sampler, those and the nodes views showed.
    engine = Engine(max_nodes=20_001)
    for i in range(20_000):
        engine.apply(CreateNode(f"n{i:05d}"), 0.0)
    hold(engine, "n00049", "m")
    index = engine.node_index
    activity = NodeActivity()
    before = index.looked_at
    seen = view(engine, now=5.0, activity=activity, max_nodes=50)
    assert index.looked_at - before <= 50
    assert [n["name"] for n in seen["nodes"]][:2] == ["n00049", "n00000"]  # the busy one
    activity.sample(engine, 6.0, first=index.page("", 50))
    assert len(activity) == 50


def test_a_cut_view_keeps_the_busy_node_and_leaves_out_idle_ones() -> None:
    # Past --dashboard-max-bytes the nodes left out are the idlest, as the latest view
    # (or, for a node not shown yet, its recent grants) found them.
    engine = Engine()
    for node in ("a", "b", "c", "d", "z"):
        engine.apply(CreateNode(node), 0.0)
    for node in ("a", "b", "c", "d"):  # idle, each with sessions of long descriptions
        for _ in range(6):
            engine.apply(CreateSession(node, b"k", 30.0, "x" * 1000), 0.0)
    hold(engine, "z", "m", at=1.0)
    activity = NodeActivity()
    shown = view(engine, now=2.0, activity=activity, max_bytes=16_384)
    assert shown["cut"] is True
    assert shown["nodes"][0]["name"] == "z"  # granted lately: built first
    assert len(json.dumps(shown)) <= 16_384
