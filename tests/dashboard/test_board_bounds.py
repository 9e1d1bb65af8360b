"""What one dashboard view costs, whatever a tenant's state (issue 47): the board of
60 groups of 1,000 members reads a bounded sample of their holders, is built in
slices of the step budget with the loop's other tasks run between two, and its
JSON is bounded in bytes however big the names and texts. Shown by counts and
orders (the holders the classifier was given, the slices, the bytes), never by time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Callable, Iterable
from typing import Any

import pytest

import tenure._core.kinds as kinds_module
from tenure._core import Acquire, CreateNode, CreateSemaphore, CreateSession, Engine, NodeConfig
from tenure._core.members import GROUP_DATA, Hold, Member, member_record, members_of
from tenure._core.values import MAX_COUNT, ClientIdentity
from tenure.server._config.serve_config import ConfigError, add_arguments, resolve
from tenure.server._http.board import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_SCAN,
    KIND_SCAN,
    BoardLimits,
    BoardWork,
    board,
    board_in_slices,
)
from tenure.server._http.board_entries import HOLDS_SCAN

GROUPS = 60
MEMBERS = 1_000
BIG = NodeConfig(max_sessions=100_000, max_semaphores=100_000, max_waiters=100_000)


def groups_engine(groups: int = GROUPS, members: int = MEMBERS) -> Engine:
    """Node n: ``groups`` groups (g00, g01...) of ``members`` members each (one session
    per member, in every group), as ``Group.join`` leaves them."""
    engine = Engine()
    engine.apply(CreateNode("n", BIG), 0.0)
    sids = [engine.apply(CreateSession("n", b"k", None), 0.0).session_id for _ in range(members)]
    for g in range(groups):
        name = f"g{g:02d}"
        engine.apply(CreateSemaphore(sids[0], name, members, GROUP_DATA), 0.0)
        for i, sid in enumerate(sids):
            record = member_record(f"member-{i:04d}", b"10.0.0.1:80", weight=None, state="joined")
            engine.apply(Acquire(sid, name, 1, request_id=g + 1, data=record), 1.0)
    return engine


class Reads:
    """Counts the holds the group classifier is given (``kinds.members_of``): what a
    view reads to tell its groups' members, whichever code gives it them."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        self.holds = 0
        self.most = 0

        def counted(holds: Iterable[Hold]) -> dict[str, Member]:
            held = list(holds)
            self.calls += 1
            self.holds += len(held)
            self.most = max(self.most, len(held))
            return members_of(held)

        monkeypatch.setattr(kinds_module, "members_of", counted)


def view_args(
    limits: BoardLimits, may_see: Callable[[str], bool] = lambda node: True, **more: Any
) -> dict[str, Any]:
    """The keywords of a view (``board`` and ``board_in_slices`` alike) at time 0 by a
    viewer who sees the nodes ``may_see`` names and may kill nothing; ``more`` added."""
    return {
        "now": 0.0,
        "shift": 0.0,
        "limits": limits,
        "may_see": may_see,
        "may_kill": lambda node: False,
        **more,
    }


def view(engine: Engine, limits: BoardLimits, work: BoardWork | None = None) -> dict[str, Any]:
    seen: dict[str, Any] = board(engine, **view_args(limits), work=work)
    return seen


@pytest.fixture(scope="module")
def sixty_groups() -> Engine:
    return groups_engine()


def test_a_view_of_60_groups_of_1000_reads_a_bounded_sample_with_exact_totals(
    sixty_groups: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = Reads(monkeypatch)
    work = BoardWork()
    seen = view(sixty_groups, BoardLimits(), work)
    # Before: 1,000 holders of each group, 60,000 in one view.
    assert reads.calls == GROUPS
    assert reads.holds <= DEFAULT_MAX_SCAN + GROUPS
    assert reads.most <= KIND_SCAN
    assert work.scanned == reads.holds
    [node] = seen["nodes"]
    assert [s["name"] for s in node["semaphores"]] == [f"g{g:02d}" for g in range(GROUPS)]
    for group in node["semaphores"]:
        recipe = group["recipe"]
        # A fair share each (10,000 over 60: what is left over the groups left), said;
        # the totals exact.
        assert DEFAULT_MAX_SCAN // GROUPS <= recipe["scanned"] <= DEFAULT_MAX_SCAN // GROUPS + 1
        assert (group["owners_total"], group["waiters_total"]) == (MEMBERS, 0)
        assert (recipe["kind"], recipe["members"], recipe["counted_all"]) == (
            "group",
            recipe["scanned"],
            False,
        )
        assert recipe["ids"][:2] == ["member-0000", "member-0001"]  # the first, in order
        assert len(group["owners"]) == BoardLimits().max_holders


def test_a_small_group_is_read_whole_beside_big_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    # What the small semaphores leave of their share goes to the ones after them.
    engine = groups_engine(groups=3, members=30)
    seen = view(engine, BoardLimits(max_scan=40))
    recipes = [s["recipe"] for s in seen["nodes"][0]["semaphores"]]
    assert [r["scanned"] for r in recipes] == [13, 13, 14]
    assert [r["counted_all"] for r in recipes] == [False, False, False]
    whole = view(engine, BoardLimits())
    assert [(r["recipe"]["members"], r["recipe"]["counted_all"]) for r in whole["nodes"][0][
        "semaphores"
    ]] == [(30, True)] * 3  # fmt: skip
    assert whole["cut"] is False


async def test_a_view_is_built_in_slices_of_the_budget_others_run_between(
    sixty_groups: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = Reads(monkeypatch)
    groups_read_at_turns: list[int] = []
    done = False

    async def bystander() -> None:
        while not done:
            groups_read_at_turns.append(reads.calls)
            await asyncio.sleep(0)

    task = asyncio.ensure_future(bystander())
    await asyncio.sleep(0)
    work = BoardWork()
    budget = 1_000
    seen: dict[str, Any] = await board_in_slices(
        sixty_groups, **view_args(BoardLimits()), budget=budget, work=work
    )
    done = True
    await task
    # The other task ran while some groups were read and others not yet.
    assert any(0 < read < GROUPS for read in groups_read_at_turns), groups_read_at_turns
    # Each slice ended once it had done its budget: at most one entry past it.
    assert work.slices >= work.items // (budget + work.largest_entry) > 1
    assert 0 < work.most_in_a_slice < budget + work.largest_entry
    # A group's: its share of holders read, its first 20 shown, and its bytes.
    share = DEFAULT_MAX_SCAN // GROUPS + 1
    assert work.largest_entry < 3 + share + BoardLimits().max_holders + 20
    assert seen == view(sixty_groups, BoardLimits())  # the same view as in one go


def test_a_semaphore_past_the_budget_is_a_slice_of_its_own() -> None:
    engine = groups_engine(groups=2, members=300)
    work = BoardWork()
    limits = BoardLimits(max_holders=5)

    async def sliced() -> object:
        return await board_in_slices(engine, **view_args(limits), budget=10, work=work)

    asyncio.run(sliced())
    assert work.scanned == 600
    # A group of 300 holders read is an entry past the budget of 10: a slice of its own.
    assert 300 < work.largest_entry < 10 + 3 + 300 + 2 * limits.max_holders + 10
    assert work.most_in_a_slice < 10 + work.largest_entry
    assert work.slices >= 3  # the node, each group (the sessions after them)


def test_a_view_of_big_names_and_texts_is_cut_to_its_bytes() -> None:
    # Names, descriptions and data that escape to six bytes a character (a bidi
    # override), on 100 semaphores of 20 holders and 20 waiters each.
    engine = Engine()
    engine.apply(CreateNode("n", BIG), 0.0)
    who = ClientIdentity("h" * 200, 1, "\u202e" * 300)
    sids = [
        engine.apply(CreateSession("n", b"k", None, "\u202e" * 340, who), 0.0).session_id
        for _ in range(40)
    ]
    for s in range(100):
        name = f"s{s:03d}" + "\u202e" * 340  # (1,024 bytes, the most)
        engine.apply(CreateSemaphore(sids[0], name, MAX_COUNT), 0.0)
        for i, sid in enumerate(sids):
            data = "\u202e".encode() * 200
            engine.apply(Acquire(sid, name, 2**62 if i % 2 else 1, i + 1, data=data), 0.0)
    seen = view(engine, BoardLimits())
    size = len(json.dumps(seen, separators=(",", ":")))
    assert size <= DEFAULT_MAX_BYTES  # before: 100 semaphores of about 70 KB each
    assert seen["cut"] is True
    [node] = seen["nodes"]
    assert 0 < len(node["semaphores"]) < 100
    assert node["semaphores_total"] == 100  # the totals still say how many
    assert node["sessions"] == []  # nothing after the cut
    small = view(engine, BoardLimits(max_bytes=16 * 1024, max_semaphores=1))
    assert len(json.dumps(small, separators=(",", ":"))) <= 16 * 1024
    assert (len(small["nodes"]), small["cut"]) == (1, True)


def test_the_scan_and_bytes_settings_are_named_and_checked() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    defaults = resolve(parser.parse_args([]), {})
    assert BoardLimits.of(defaults) == BoardLimits()
    assert (defaults.dashboard_max_scan, defaults.dashboard_max_bytes) == (
        DEFAULT_MAX_SCAN,
        DEFAULT_MAX_BYTES,
    )
    chosen = resolve(
        parser.parse_args(["--dashboard-max-scan", "500"]),
        {"TENURE_DASHBOARD_MAX_BYTES": "65536"},
    )
    assert BoardLimits.of(chosen) == BoardLimits(max_scan=500, max_bytes=65536)
    for flag, value in [
        ("--dashboard-max-scan", "0"),
        ("--dashboard-max-scan", "1000001"),
        ("--dashboard-max-bytes", "1000"),
        ("--dashboard-max-bytes", str(64 * 1024 * 1024 + 1)),
    ]:
        with pytest.raises(ConfigError, match=flag):
            resolve(parser.parse_args([flag, value]), {})


def test_a_sessions_holds_are_counted_exactly_up_to_a_bound() -> None:
    engine = Engine()
    engine.apply(CreateNode("n", BIG), 0.0)
    few, many = (engine.apply(CreateSession("n", b"k", None), 0.0).session_id for _ in range(2))
    engine.apply(CreateSemaphore(few, "pool", 10), 0.0)
    for hold in (1, 2):  # two holds of one session on one semaphore: two holds
        engine.apply(Acquire(few, "pool", 1, request_id=hold, hold=hold), 0.0)
    engine.apply(CreateSemaphore(many, "pool2", 10), 0.0)
    for hold in (1, 2):
        engine.apply(Acquire(many, "pool2", 1, request_id=hold, hold=hold), 0.0)
    for i in range(HOLDS_SCAN):  # past the bound: one per semaphore held
        engine.apply(Acquire(many, f"m{i:04d}", MAX_COUNT, i + 10, ephemeral=True), 0.0)
    work = BoardWork()
    sessions = view(engine, BoardLimits(max_semaphores=1), work)["nodes"][0]["sessions"]
    assert [s["holds"] for s in sessions] == [2, HOLDS_SCAN + 1]
    assert work.items < 3 * HOLDS_SCAN  # not one per hold of every session


async def test_a_wildcard_viewer_s_walk_of_every_node_name_is_sliced() -> None:
    # Issue 47, round two: a token whose pattern starts with a wildcard (``*-jobs``)
    # has the range of "", every node's name, which its view read (and matched) in
    # one step, however many nodes the others have. Counted in names matched per
    # turn of the loop, never timed.
    nodes, budget = 3_000, 100
    engine = Engine(max_nodes=nodes + 2)
    for i in range(nodes):
        engine.apply(CreateNode(f"n{i:05d}"), 0.0)
    for name in ("a-jobs", "z-jobs"):
        engine.apply(CreateNode(name), 0.0)
    matched = 0

    def jobs(name: str) -> bool:
        nonlocal matched
        matched += 1
        return name.endswith("-jobs")

    matched_at_turns: list[int] = []
    done = False

    async def bystander() -> None:
        while not done:
            matched_at_turns.append(matched)
            await asyncio.sleep(0)

    task = asyncio.ensure_future(bystander())
    await asyncio.sleep(0)
    work = BoardWork()
    args = view_args(BoardLimits(max_nodes=1), jobs, prefixes=("",))
    seen: dict[str, Any] = await board_in_slices(engine, **args, budget=budget, work=work)
    done = True
    await task
    assert matched == nodes + 2  # every name, once: the total is exact
    assert seen["nodes_total"] == 2
    assert [node["name"] for node in seen["nodes"]] == ["a-jobs"]
    # No turn matched more than a budget of names (before: all 3,002 in one).
    per_turn = [
        b - a for a, b in zip(matched_at_turns, [*matched_at_turns[1:], matched], strict=True)
    ]
    assert max(per_turn) <= budget, max(per_turn)
    assert work.slices > nodes // budget
    assert work.most_in_a_slice < budget + work.largest_entry
    matched = 0
    assert seen == board(engine, **args)  # the same view as in one go
