"""The dashboard's view of an engine (:func:`tenure.server._http.board.board`): what it
shows, in which order, bounded by each ``--dashboard-max-*`` limit; its ``cluster``
object (:func:`tenure.server._http.cluster_view.cluster_view`); and the settings."""

from __future__ import annotations

import argparse
import json
from typing import Any, cast

import pytest

import tenure.server._http.board as board_module
from tenure._core import (
    Acquire,
    ClaimName,
    CreateNode,
    CreateSemaphore,
    CreateSession,
    Engine,
)
from tenure._core.kinds import parties_data
from tenure._core.members import GROUP_DATA, member_record
from tenure._core.rates import Bucket, bucket_data
from tenure._core.values import MAX_COUNT, ClientIdentity
from tenure.server._cluster.directory import DirectoryKeys, ServiceDirectory
from tenure.server._cluster.keys import ServerRecord
from tenure.server._cluster.role import ClusterRole
from tenure.server._cluster.store import Leader
from tenure.server._config.serve_config import ConfigError, add_arguments, resolve
from tenure.server._http.board import (
    DEFAULT_MAX_DATA_CHARS,
    BoardLimits,
    RateMeter,
    board,
    shown_data,
)
from tenure.server._http.board_rates import HISTORY, waited
from tenure.server._http.cluster_view import cluster_families, cluster_view
from tenure.server._http.metrics import GRANT_WAIT_BUCKETS
from tenure.server._http.tally import LoopHistogram
from tenure.server._role import STANDALONE_ROLE

WHO = ClientIdentity("host-a", 4242, "billing-worker")
SHIFT = 1_700_000_000.0  # engine time 0 is this UNIX time in these tests


def engine_with_queue() -> tuple[Engine, list[int]]:
    """Nodes a, b, c; in a: sessions 1-4, semaphores s0-s4 (limit 1), s0 held by the
    first session (at time 1) and waited for by the three others (at times 2, 3, 4)."""
    engine = Engine()
    for node in ("c", "a", "b"):
        engine.apply(CreateNode(node), 0.0)
    sids = [
        engine.apply(CreateSession("a", b"k", None, f"worker {i}", WHO), 0.0).session_id
        for i in range(4)
    ]
    for i in range(5):
        engine.apply(CreateSemaphore(sids[0], f"s{i}", 1), 0.0)
    for at, sid in enumerate(sids, 1):
        engine.apply(Acquire(sid, "s0", 1, request_id=1), float(at))
    return engine, sids


def view(engine: Engine, limits: BoardLimits, **kwargs: Any) -> dict[str, Any]:
    seen: dict[str, Any] = board(
        engine,
        now=kwargs.pop("now", 5.0),
        shift=SHIFT,
        limits=limits,
        may_see=kwargs.pop("may_see", lambda node: True),
        may_kill=kwargs.pop("may_kill", lambda node: False),
    )
    return seen


def test_owners_waiters_and_sessions_with_who_and_when() -> None:
    engine, sids = engine_with_queue()
    seen = view(engine, BoardLimits())
    assert [n["name"] for n in seen["nodes"]] == ["a", "b", "c"]
    a = seen["nodes"][0]
    s0 = a["semaphores"][0]
    assert (s0["name"], s0["kind"], s0["limit"], s0["count"]) == ("s0", "semaphore", 1, 1)
    [owner] = s0["owners"]
    assert owner == {
        "session_id": sids[0],
        "count": 1,
        "description": "worker 0",
        "identity": {"host": "host-a", "pid": 4242, "name": "billing-worker"},
        "expires_at": None,  # its connection keeps it
        "since": SHIFT + 1.0,
        "token": 1,
        "data": "",
        "data_bytes": 0,
        "data_truncated": False,
    }
    assert [w["session_id"] for w in s0["waiters"]] == sids[1:]  # queue order
    assert [w["since"] for w in s0["waiters"]] == [SHIFT + 2, SHIFT + 3, SHIFT + 4]
    assert [s["session_id"] for s in a["sessions"]] == sids
    assert a["sessions"][0]["holds"] == 1
    assert a["sessions"][1]["waits"] == 1
    assert a["sessions"][0]["expires_at"] is None  # attached: no expiry yet


def test_the_deadlocks_broken_on_a_node_newest_first() -> None:
    from tenure.errors import DeadlockError

    engine, sids = engine_with_queue()
    assert view(engine, BoardLimits())["nodes"][0]["deadlocks"] == []
    one, two = sids[0], sids[1]
    for sid, name, task in ((one, "x", 1), (two, "y", 2), (one, "y", 1)):
        engine.apply(Acquire(sid, name, MAX_COUNT, 7, ephemeral=True, task=task), 6.0)
    for at in (7.0, 8.0):
        with pytest.raises(DeadlockError):
            engine.apply(Acquire(two, "x", MAX_COUNT, 8, ephemeral=True, task=2), at)
    seen = view(engine, BoardLimits())
    a, b = seen["nodes"][0], seen["nodes"][1]
    assert [d["at"] for d in a["deadlocks"]] == [SHIFT + 8, SHIFT + 7]  # newest first
    assert {(d["session_id"], d["task"]) for d in a["deadlocks"]} == {(two, 2)}
    assert a["deadlocks"][0]["cycle"] == (
        f"session {two} (task 2) waits for 'x' held by session {one} (task 1), which waits "
        f"for 'y' held by session {two} (task 2)"
    )
    assert b["deadlocks"] == []


def test_each_limit_bounds_its_list_and_the_totals_say_how_many() -> None:
    engine, sids = engine_with_queue()
    limits = BoardLimits(max_nodes=2, max_semaphores=3, max_sessions=2, max_holders=2)
    seen = view(engine, limits)
    assert seen["nodes_total"] == 3
    assert [n["name"] for n in seen["nodes"]] == ["a", "b"]
    a = seen["nodes"][0]
    assert a["semaphores_total"] == 5
    assert [s["name"] for s in a["semaphores"]] == ["s0", "s1", "s2"]
    assert a["sessions_total"] == 4
    assert [s["session_id"] for s in a["sessions"]] == sids[:2]
    s0 = a["semaphores"][0]
    assert s0["waiters_total"] == 3
    assert [w["session_id"] for w in s0["waiters"]] == sids[1:3]  # the first two in line
    one = view(engine, BoardLimits(max_nodes=1, max_semaphores=1, max_sessions=1, max_holders=1))
    assert [n["name"] for n in one["nodes"]] == ["a"]
    assert len(one["nodes"][0]["semaphores"][0]["waiters"]) == 1


def test_only_the_nodes_the_viewer_may_see_nor_their_count() -> None:
    engine, _ = engine_with_queue()
    seen = view(
        engine, BoardLimits(), may_see=lambda node: node != "b", may_kill=lambda n: n == "c"
    )
    assert [(n["name"], n["can_kill"]) for n in seen["nodes"]] == [("a", False), ("c", True)]
    assert seen["nodes_total"] == 2


def test_a_mutex_has_limit_1_and_a_detached_session_has_an_expiry() -> None:
    engine = Engine()
    engine.apply(CreateNode("n"), 0.0)
    sid = engine.apply(CreateSession("n", b"k", 10.0), 0.0).session_id
    other = engine.apply(CreateSession("n", b"k", 10.0), 0.0).session_id
    engine.apply(Acquire(sid, "m", MAX_COUNT, request_id=1, ephemeral=True), 0.0)
    engine.apply(Acquire(other, "m", MAX_COUNT, request_id=1, ephemeral=True), 0.0)
    engine.sessions[sid].expires_at = 8.0  # as a DetachSession at time -2 would leave it
    seen = view(engine, BoardLimits(), now=5.0)
    [node] = seen["nodes"]
    [mutex] = node["semaphores"]
    # What a mutex means (one holder at a time), never its 2**64-1 tokens.
    assert (mutex["kind"], mutex["limit"], mutex["count"], mutex["held"]) == ("mutex", 1, 1, True)
    assert (mutex["ephemeral"], mutex["owners_total"], mutex["waiters_total"]) == (True, 1, 1)
    assert (mutex["owners"][0]["count"], mutex["waiters"][0]["count"]) == (1, 1)
    assert str(MAX_COUNT) not in json.dumps(seen)
    assert node["sessions"][0]["expires_at"] == SHIFT + 8.0


def test_an_election_shows_its_leader_data_and_term() -> None:
    # An election is a mutex whose holder's data is the leader's (Election.campaign):
    # the view shows that data and the token, the leadership's term.
    engine = Engine()
    engine.apply(CreateNode("n"), 0.0)
    sid = engine.apply(CreateSession("n", b"k", None, "tenure elect", WHO), 0.0).session_id
    leader = Acquire(sid, "primary", MAX_COUNT, request_id=1, data=b"10.0.0.7:8080", ephemeral=True)
    token = engine.apply(leader, 1.0).token
    [election] = view(engine, BoardLimits())["nodes"][0]["semaphores"]
    assert (election["kind"], election["limit"], election["held"]) == ("mutex", 1, True)
    [owner] = election["owners"]
    assert (owner["data"], owner["token"], owner["data_truncated"]) == (
        "10.0.0.7:8080",
        token,
        False,
    )


def test_other_ephemeral_semaphores_have_no_limit() -> None:
    engine = Engine()
    engine.apply(CreateNode("n"), 0.0)
    sid = engine.apply(CreateSession("n", b"k", None), 0.0).session_id
    engine.apply(Acquire(sid, "pool", 3, request_id=1, ephemeral=True), 0.0)
    [pool] = view(engine, BoardLimits())["nodes"][0]["semaphores"]
    assert (pool["kind"], pool["limit"], pool["count"]) == ("ephemeral", None, 3)
    assert pool["owners"][0]["count"] == 3


def test_owner_data_is_escaped_and_cut_to_its_limit() -> None:
    engine = Engine()
    engine.apply(CreateNode("n"), 0.0)
    sid = engine.apply(CreateSession("n", b"k", None), 0.0).session_id
    other = engine.apply(CreateSession("n", b"k", None), 0.0).session_id
    # A newline, a bidi override and an undecodable byte would not show as themselves.
    sneaky = "host\n\u202etoken 999\x1b[2J".encode() + b"\xff"
    engine.apply(Acquire(sid, "a", MAX_COUNT, request_id=1, data=sneaky, ephemeral=True), 0.0)
    long = "é" * 50
    engine.apply(Acquire(other, "b", 1, request_id=1, data=long.encode(), ephemeral=True), 0.0)
    a, b = view(engine, BoardLimits(max_data_chars=40))["nodes"][0]["semaphores"]
    [held] = a["owners"]
    assert held["data"] == "host\\n\\u202etoken 999\\x1b[2J\\xff"
    assert (held["data_bytes"], held["data_truncated"]) == (len(sneaky), False)
    [cut] = b["owners"]
    assert (cut["data"], cut["data_bytes"], cut["data_truncated"]) == ("é" * 40, 100, True)
    assert shown_data(b"x" * 10_000, 5) == ("xxxxx", True)
    assert shown_data(b"", 5) == ("", False)
    assert BoardLimits().max_data_chars == DEFAULT_MAX_DATA_CHARS


def test_rates_are_per_second_over_the_window() -> None:
    meter = RateMeter(window=10.0)
    meter.sample(100.0, 0, 0)
    assert meter.rates() == (0.0, 0.0)  # one sample: no rate yet
    meter.sample(102.0, 10, 1)
    assert meter.rates() == (5.0, 0.5)
    for at in range(103, 121):
        meter.sample(float(at), 10, 1)
    assert meter.rates() == (0.0, 0.0)  # nothing in the last 10 s
    meter.sample(125.0, 15, 1)
    # From the newest sample at least a window old (115) on: 5 grants in 10 s.
    assert meter.rates() == pytest.approx((0.5, 0.0))


def test_a_history_of_grants_waits_and_expiries_per_second() -> None:
    # Issue 50: the page had the last 10 s's averages alone; it now draws a minute.
    meter = RateMeter(window=10.0)
    assert meter.history() == {"grants": [], "waits": [], "expiries": []}
    meter.sample(100.0, 0, 0, 0)
    meter.sample(101.0, 4, 0, 1)
    meter.sample(103.0, 10, 2, 4)
    assert meter.history() == {"grants": [4.0, 3.0], "waits": [1.0, 1.5], "expiries": [0.0, 1.0]}
    for at in range(104, 104 + HISTORY):
        meter.sample(float(at), 10, 2, 4)
    assert meter.history()["grants"] == [0.0] * HISTORY  # the last HISTORY intervals only


def test_waits_are_the_grants_past_the_first_bucket() -> None:
    histogram = LoopHistogram("tenure_grant_wait_seconds", "waits", GRANT_WAIT_BUCKETS)
    for _ in range(3):
        histogram.observe_zero()  # granted at once
    histogram.observe(0.0005)  # within the first bucket: not told from "at once"
    histogram.observe(0.25)
    histogram.observe(30.0)
    assert waited([histogram.family()]) == 2


def test_a_standby_names_the_leader_and_links_its_dashboard() -> None:
    written = 1_700_000_000.25
    leader = ServerRecord("a", "10.0.0.1:6388", "leader", 8, written, http="10.0.0.1:9100")
    role = ClusterRole("prod", ServerRecord("b", "10.0.0.2:6388", http="10.0.0.2:9100"))
    role.members = [leader, ServerRecord("c", "10.0.0.3:6388", "standby", 6, written)]
    role.applied = lambda: 7
    role.saw(Leader(leader, term=42, lease=1))
    seen = cluster_view(role)
    assert seen is not None
    members = seen.pop("members")
    assert seen == {
        "name": "prod",
        "member": "b",
        "role": "standby",
        "term": 42,
        "index": 8,
        "applied": 7,
        "lag": 1,
        "leader_changes": 0,
        "leader": {
            "name": "a",
            "address": "10.0.0.1:6388",
            "http": "10.0.0.1:9100",
            "dashboard": "http://10.0.0.1:9100/",
        },
        "cell": None,  # (a role without the service's directory: no cell)
        "cells": [],
    }
    assert isinstance(members, list)
    assert [(m["name"], m["role"], m["applied"], m["lag"], m["self"]) for m in members] == [
        ("a", "leader", 8, 0, False),
        ("b", "standby", 7, 1, True),
        ("c", "standby", 6, 2, False),
    ]
    a, b, c = members
    # An instant, to the second (the same record: the same bytes); none for this server.
    assert (a["recorded_at"], b["recorded_at"]) == (round(written), None)
    assert (c["http"], c["dashboard"]) == (None, None)  # no HTTP endpoint: no link
    assert b["dashboard"] == "http://10.0.0.2:9100/"
    assert json.dumps(cluster_view(role)) == json.dumps({**seen, "members": members})


def test_no_leader_known_and_no_cluster() -> None:
    role = ClusterRole("prod", ServerRecord("b", "10.0.0.2:6388"))
    seen = cluster_view(role)
    assert seen is not None
    assert (seen["leader"], seen["term"], seen["role"]) == (None, 0, "standby")
    assert cluster_view(STANDALONE_ROLE) is None


def test_a_service_of_two_cells_lists_each_cell_its_leader_and_members() -> None:
    written = 1_700_000_000.25
    places = ServiceDirectory(
        cast(Any, None), cast(Any, None), cast(Any, None), DirectoryKeys.of("", "prod"), "a", 5
    )
    a1 = ServerRecord("a1", "10.0.0.1:6388", "leader", 8, written, http="10.0.0.1:9100")
    a2 = ServerRecord("a2", "10.0.0.2:6388", "standby", 6, written)
    b1 = ServerRecord("b1", "10.0.1.1:6388", "standby", 3, written)
    b2 = ServerRecord("b2", "10.0.1.2:6388", "leader", 4, written, http="10.0.1.2:9100")
    # (the directory's records of cell a are older than the cell's own store's)
    places.cells = {"a": [a1.rewritten("leader", 5, written, 0.0), a2], "b": [b2, b1]}
    role = ClusterRole("prod", a2, places)
    role.members = [a1, a2]
    role.applied = lambda: 7
    role.saw(Leader(a1, term=42, lease=1))
    seen = cluster_view(role)
    assert seen is not None
    assert seen["cell"] == "a"
    cells = seen["cells"]
    assert isinstance(cells, list)
    [a, b] = cells
    # This server's cell as its own view says: the store's records, this server's now.
    assert (a["name"], a["self"], a["leader"], a["index"]) == ("a", True, "a1", 8)
    assert [(m["name"], m["applied"], m["self"]) for m in a["members"]] == [
        ("a1", 8, False),
        ("a2", 7, True),
    ]
    # Another cell as the directory records it: its leader the one whose record says so.
    assert (b["name"], b["self"], b["leader"], b["index"]) == ("b", False, "b2", 4)
    assert [(m["name"], m["role"], m["lag"], m["self"]) for m in b["members"]] == [
        ("b1", "standby", 1, False),
        ("b2", "leader", 0, False),
    ]
    assert b["members"][1]["dashboard"] == "http://10.0.1.2:9100/"
    assert b["members"][1]["recorded_at"] == round(written)
    gauges = {family.name: family for family in cluster_families(role)}
    assert gauges["tenure_cluster_cells"].samples[0].value == 2
    assert gauges["tenure_cluster_members"].samples[0].value == 2
    # A cluster run without the service's directory knows no cell.
    alone = ClusterRole("prod", a2)
    assert {f.name: f for f in cluster_families(alone)}["tenure_cluster_cells"].samples[
        0
    ].value == 0


def config(*argv: str, **environ: str) -> Any:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return resolve(parser.parse_args(list(argv)), environ)


def test_the_dashboard_settings_are_named_and_checked() -> None:
    defaults = config()
    assert BoardLimits.of(defaults) == BoardLimits(50, 100, 100, 20)
    assert (defaults.dashboard_rate, defaults.dashboard_actions) == (2.0, False)
    assert defaults.dashboard_max_streams == 64
    chosen = config(
        "--dashboard-max-semaphores",
        "7",
        "--dashboard-rate",
        "0.5",
        TENURE_DASHBOARD_MAX_NODES="3",
        TENURE_DASHBOARD_ACTIONS="true",
    )
    assert (chosen.dashboard_max_semaphores, chosen.dashboard_max_nodes) == (7, 3)
    assert (chosen.dashboard_rate, chosen.dashboard_actions) == (0.5, True)
    for flag, value in [
        ("--dashboard-max-semaphores", "0"),
        ("--dashboard-max-nodes", "10001"),
        ("--dashboard-max-sessions", "-1"),
        ("--dashboard-max-streams", "0"),
        ("--dashboard-max-holders", "0"),
        ("--dashboard-rate", "0"),
        ("--dashboard-rate", "21"),
    ]:
        with pytest.raises(ConfigError, match=flag):
            config(flag, value)


def engine_with_recipes() -> Engine:
    """Node n with what each recipe writes: a readers-writer lock (two readers, a
    writer waiting), a rate limiter, a barrier (two of four arrived after round 7), a
    counter, a claim, and a semaphore whose data only looks like a counter's."""
    engine = Engine()
    engine.apply(CreateNode("n"), 0.0)
    one, two, three = (
        engine.apply(CreateSession("n", b"k", None), 0.0).session_id for _ in range(3)
    )
    for sid, count in ((one, 1), (two, 1), (three, MAX_COUNT)):
        engine.apply(Acquire(sid, "rw", count, request_id=1, ephemeral=True), 1.0)
    limiter = bucket_data(Bucket(50.0, 100.0, SHIFT + 10.0))
    engine.apply(CreateSemaphore(one, "api", 1, limiter), 0.0)
    # Tokens 1 and 2 went to the readers: the arrivals have 3 and 4, after LAST.
    engine.apply(CreateSemaphore(one, "stage", MAX_COUNT, b"7 2"), 0.0)
    for sid in (one, two):
        engine.apply(Acquire(sid, "stage", 1, request_id=2, data=parties_data(4)), 2.0)
    engine.apply(CreateSemaphore(one, "jobs", 1, b"41"), 0.0)
    engine.apply(CreateSemaphore(one, "pool", 1, b"+41"), 0.0)
    engine.apply(ClaimName(one, "nightly", "a" * 32, 60.0, 600.0, b"host-a", SHIFT + 3.0), 3.0)
    return engine


def test_each_semaphore_says_its_recipe_and_facts() -> None:
    seen = view(engine_with_recipes(), BoardLimits())
    recipes = {s["name"]: s["recipe"] for s in seen["nodes"][0]["semaphores"]}
    assert recipes == {
        "api": {
            "kind": "rate_limiter",
            "rate": 50.0,
            "burst": 100.0,
            "tat": SHIFT + 10.0,
            "scanned": 0,
            "counted_all": True,
        },
        "jobs": {"kind": "counter", "value": 41, "scanned": 0, "counted_all": True},
        # A claim's id and owner data are left out: who reads an id may release it.
        "nightly": {
            "kind": "claim",
            "token": 5,
            "granted_at": SHIFT + 3.0,
            "at_least": 60.0,
            "at_most": 600.0,
            "released_at": None,
            "session_id": 1,
            "ends_at": SHIFT + 603.0,
            "scanned": 0,
            "counted_all": True,
        },
        "pool": {"kind": "semaphore", "scanned": 0, "counted_all": True},
        "rw": {
            "kind": "rwlock",
            "readers": 2,
            "writer": False,
            "readers_waiting": 0,
            "writers_waiting": 1,
            "scanned": 3,  # two readers holding, a writer waiting
            "counted_all": True,
        },
        "stage": {
            "kind": "barrier",
            "rounds": 7,
            "last": 2,
            "arrived": 2,
            "parties": 4,
            "scanned": 2,
            "counted_all": True,
        },
    }
    # The kind scripts already read is unchanged.
    kinds = {s["name"]: s["kind"] for s in seen["nodes"][0]["semaphores"]}
    assert (kinds["rw"], kinds["api"]) == ("ephemeral", "semaphore")


def test_a_view_of_recipes_depends_on_the_state_alone() -> None:
    # No level worked out from a clock: an unchanged state is the same view (the
    # server pushes only views that changed), and the page computes the level.
    # (A node's activity looks back a minute: board_activity's tests.)
    engine = engine_with_recipes()
    soon, late = (view(engine, BoardLimits(), now=now)["nodes"] for now in (5.0, 500.0))
    assert [(n["semaphores"], n["sessions"]) for n in soon] == [
        (n["semaphores"], n["sessions"]) for n in late
    ]


def test_recipe_counts_are_read_from_the_first_holders_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(board_module, "KIND_SCAN", 1)
    seen = view(engine_with_recipes(), BoardLimits())
    rw = next(s for s in seen["nodes"][0]["semaphores"] if s["name"] == "rw")
    assert (rw["recipe"]["readers"], rw["recipe"]["counted_all"]) == (1, False)
    assert rw["owners_total"] == 2


def test_a_group_names_its_first_members_shown_as_data_is() -> None:
    engine = Engine()
    engine.apply(CreateNode("n"), 0.0)
    sids = [engine.apply(CreateSession("n", b"k", None), 0.0).session_id for _ in range(3)]
    engine.apply(CreateSemaphore(sids[0], "workers", 10, GROUP_DATA), 0.0)
    for sid, member_id in zip(sids, ("w-\u202e1", "w-2", "w-3"), strict=True):
        record = member_record(member_id, b"addr", weight=None, state="joined")
        engine.apply(Acquire(sid, "workers", 1, request_id=1, data=record), 1.0)
    seen = view(engine, BoardLimits(max_holders=2))
    [workers] = seen["nodes"][0]["semaphores"]
    assert workers["recipe"] == {
        "kind": "group",
        "members": 3,
        "ids": ["w-\\u202e1", "w-2"],  # the first max_holders, escaped as data is
        "joining": 0,
        "max_members": 10,
        "partition_members": 0,
        "scanned": 3,
        "counted_all": True,
    }


def test_a_view_reads_the_nodes_it_shows_or_its_tokens_ranges_not_every_node() -> None:
    # Issue 37: the view of 20,000 nodes read every name (and matched it against the
    # viewer's patterns) to show the first 50. Counted by the node index's looked_at.
    engine = Engine(max_nodes=20_001)
    for i in range(20_000):
        engine.apply(CreateNode(f"n{i:05d}"), 0.0)
    engine.apply(CreateNode("jobs-1"), 0.0)
    index = engine.node_index
    limits = BoardLimits(max_nodes=50)

    def everything(name: str) -> bool:
        return True

    before = index.looked_at
    every: dict[str, Any] = board(
        engine,
        now=0.0,
        shift=0.0,
        limits=limits,
        may_see=everything,
        may_kill=everything,
        prefixes=None,
    )
    assert index.looked_at - before <= 50
    assert every["nodes_total"] == 20_001
    assert [node["name"] for node in every["nodes"]] == ["jobs-1"] + [
        f"n{i:05d}" for i in range(49)
    ]

    def jobs(name: str) -> bool:
        return name.startswith("jobs-")

    before = index.looked_at
    scoped: dict[str, Any] = board(
        engine, now=0.0, shift=0.0, limits=limits, may_see=jobs, may_kill=jobs, prefixes=("jobs-",)
    )
    assert index.looked_at - before <= 2
    assert scoped["nodes_total"] == 1
    assert [node["name"] for node in scoped["nodes"]] == ["jobs-1"]


def test_a_group_member_shows_its_id_and_its_own_data_not_its_record() -> None:
    # Issue 50: a member's row showed its record ("member joined 8:worker-1 - ...").
    engine = Engine()
    engine.apply(CreateNode("n"), 0.0)
    one, two = (engine.apply(CreateSession("n", b"k", None), 0.0).session_id for _ in range(2))
    engine.apply(CreateSemaphore(one, "workers", 10, GROUP_DATA), 0.0)
    joined = member_record("worker-1", b"10.0.0.5:8080", weight=2, state="joined")
    engine.apply(Acquire(one, "workers", 1, request_id=1, data=joined), 1.0)
    joining = member_record("w-\u202e2", b"\x1b[2J", weight=None, state="joining")
    engine.apply(Acquire(two, "workers", 1, request_id=1, data=joining), 1.0)
    # A semaphore whose holders' data only looks like records is no group: left alone.
    engine.apply(CreateSemaphore(one, "plain", 10, b"not a group"), 0.0)
    engine.apply(Acquire(one, "plain", 1, request_id=2, data=joined), 1.0)
    seen = view(engine, BoardLimits())
    sems = {s["name"]: s for s in seen["nodes"][0]["semaphores"]}
    first, second = sems["workers"]["owners"]
    assert (first["data"], first["data_bytes"]) == ("10.0.0.5:8080", 13)
    assert first["member"] == {"id": "worker-1", "state": "joined", "weight": 2}
    assert (second["data"], second["data_bytes"]) == ("\\x1b[2J", 4)  # escaped as data is
    assert second["member"] == {"id": "w-\\u202e2", "state": "joining", "weight": None}
    [plain] = sems["plain"]["owners"]
    assert "member" not in plain
    assert plain["data"].startswith("member joined 8:worker-1 ")
