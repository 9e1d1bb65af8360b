"""The dashboard's view of an engine (:func:`tenure.server._http.board.board`): what it
shows, in which order, bounded by each ``--dashboard-max-*`` limit; and the settings."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from tenure._core import Acquire, CreateNode, CreateSemaphore, CreateSession, Engine
from tenure._core.values import MAX_COUNT, ClientIdentity
from tenure.server._config.serve_config import ConfigError, add_arguments, resolve
from tenure.server._http.board import BoardLimits, RateMeter, board

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
    assert (s0["name"], s0["limit"], s0["count"], s0["exclusive"]) == ("s0", 1, 1, False)
    [owner] = s0["owners"]
    assert owner == {
        "session_id": sids[0],
        "count": 1,
        "description": "worker 0",
        "identity": {"host": "host-a", "pid": 4242, "name": "billing-worker"},
        "since": SHIFT + 1.0,
        "token": 1,
    }
    assert [w["session_id"] for w in s0["waiters"]] == sids[1:]  # queue order
    assert [w["since"] for w in s0["waiters"]] == [SHIFT + 2, SHIFT + 3, SHIFT + 4]
    assert [s["session_id"] for s in a["sessions"]] == sids
    assert a["sessions"][0]["holds"] == 1
    assert a["sessions"][1]["waits"] == 1
    assert a["sessions"][0]["expires_at"] is None  # attached: no expiry yet


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


def test_a_mutex_is_exclusive_and_a_detached_session_has_an_expiry() -> None:
    engine = Engine()
    engine.apply(CreateNode("n"), 0.0)
    sid = engine.apply(CreateSession("n", b"k", 10.0), 0.0).session_id
    engine.apply(Acquire(sid, "m", MAX_COUNT, request_id=1, ephemeral=True), 0.0)
    engine.sessions[sid].expires_at = 8.0  # as a DetachSession at time -2 would leave it
    [node] = view(engine, BoardLimits(), now=5.0)["nodes"]
    [mutex] = node["semaphores"]
    assert (mutex["exclusive"], mutex["ephemeral"], mutex["owners_total"]) == (True, True, 1)
    assert node["sessions"][0]["expires_at"] == SHIFT + 8.0


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
