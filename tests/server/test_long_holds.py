"""``--long-hold-seconds`` and a node's ``long_hold``: each hold held past its node's
threshold told once (tenure.server._long_holds), in a walk that lets the loop serve
between slices and outlives a failed walk; and a real server's log line, audit record
and ``tenure_long_holds_total``, with the flag and with a node's setting alone (kept
across a restart)."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import urllib.request
from pathlib import Path

import aiohttp
import pytest

import tenure
from tenure._core import (
    MAX_COUNT,
    Acquire,
    AlterNode,
    CreateNode,
    CreateSession,
    Engine,
    NodeConfig,
    Release,
)
from tenure.server._audit import AuditLog
from tenure.server._long_holds import IDLE_PERIOD, LongHolds, walk_period
from tests.ports import free_port

from .wire import WAIT, ServerProcess


def test_the_walk_period_is_a_quarter_within_bounds() -> None:
    assert [walk_period(s) for s in (1.0, 20.0, 3600.0)] == [1.0, 5.0, 60.0]


async def test_each_hold_past_the_limit_is_told_once_and_again_after_a_new_grant(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    engine = Engine()
    for node in ("a", "b"):
        engine.apply(CreateNode(node, NodeConfig()), 0.0)
    sid = {node: engine.apply(CreateSession(node, b"k", description=f"job {node}"), 0.0).session_id
           for node in ("a", "b")}  # fmt: skip
    for i in range(5):  # (old holds on several semaphores of two nodes)
        engine.apply(Acquire(sid["a"], f"old-{i}", MAX_COUNT, i + 1, ephemeral=True), 0.0)
    engine.apply(Acquire(sid["b"], "old", MAX_COUNT, 1, ephemeral=True), 0.0)
    engine.apply(Acquire(sid["b"], "young", MAX_COUNT, 2, ephemeral=True), 95.0)
    clock = [100.0]
    audit = AuditLog(str(tmp_path / "audit.log"), queue_size=100)
    holds = LongHolds(10.0, lambda: engine, lambda: clock[0], audit, budget=1)
    with caplog.at_level(logging.WARNING, "tenure.server"):
        assert await holds.walk() == 6  # (a slice of one semaphore a turn: every one seen)
        assert await holds.walk() == 0  # (told once)
    told = [r for r in caplog.records if getattr(r, "event", None) == "long_hold"]
    assert len(told) == 6
    fields = next(r.fields for r in told if r.fields["node"] == "b")  # type: ignore[attr-defined]
    assert fields["name"] == "old"
    assert fields["description"] == "job b"
    assert fields["held_for"] == 100.0
    engine.apply(Release(sid["b"], "old"), 100.0)
    engine.apply(Acquire(sid["b"], "old", MAX_COUNT, 3, ephemeral=True), 100.0)
    clock[0] = 120.0  # the new grant (a new token) is old now, and "young" too
    assert await holds.walk() == 2
    assert holds.told == 8
    audit.close()
    acts = [json.loads(line) for line in (tmp_path / "audit.log").read_text().splitlines()]
    assert len(acts) == 8
    assert {act["act"] for act in acts} == {"long_hold"}
    assert all(act["outcome"] == "ok" for act in acts)
    assert all(act["address"] is None for act in acts)


def _holding(nodes: dict[str, NodeConfig], at: float = 0.0) -> Engine:
    """An engine with each of ``nodes`` (by its config), each holding ``held`` since
    ``at`` in a session described as the node's name."""
    engine = Engine()
    for node, config in nodes.items():
        engine.apply(CreateNode(node, config), at)
        sid = engine.apply(CreateSession(node, b"k", description=node), at).session_id
        engine.apply(Acquire(sid, "held", MAX_COUNT, 1, ephemeral=True), at)
    return engine


def _told(caplog: pytest.LogCaptureFixture) -> dict[str, dict[str, object]]:
    """The long_hold lines logged, by node: their fields."""
    records = [r for r in caplog.records if getattr(r, "event", None) == "long_hold"]
    return {r.fields["node"]: r.fields for r in records}  # type: ignore[attr-defined]


async def test_a_nodes_long_hold_below_the_servers_tells_its_holds_and_not_anothers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    engine = _holding({"jobs": NodeConfig(long_hold=10.0), "batch": NodeConfig()})
    clock = [50.0]  # past jobs' 10 s, short of the server's 100
    holds = LongHolds(100.0, lambda: engine, lambda: clock[0], None, budget=100)
    assert holds.period == walk_period(100.0)  # (the server's, before the first walk)
    with caplog.at_level(logging.WARNING, "tenure.server"):
        assert await holds.walk() == 1
        assert holds.period == walk_period(10.0)  # the smallest threshold in force
        told = _told(caplog)
        assert list(told) == ["jobs"]
        assert told["jobs"]["long_hold_seconds"] == 10.0  # the threshold that applied
        assert told["jobs"]["held_for"] == 50.0
        clock[0] = 100.0  # the server's threshold, for the node that sets none
        assert await holds.walk() == 1
        assert _told(caplog)["batch"]["long_hold_seconds"] == 100.0
    # A node's threshold wins upwards too: 1000 s on jobs, nothing told there until then.
    engine.apply(AlterNode("jobs", {"long_hold": 1000.0}), 100.0)
    assert await holds.walk() == 0
    assert holds.period == walk_period(100.0)
    assert holds.told == 2


async def test_a_nodes_zero_tells_nothing_while_the_servers_flag_tells_the_others(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    engine = _holding({"elections": NodeConfig(long_hold=0.0), "jobs": NodeConfig()})
    audit = AuditLog(str(tmp_path / "audit.log"), queue_size=100)
    holds = LongHolds(10.0, lambda: engine, lambda: 3600.0, audit, budget=1)
    with caplog.at_level(logging.WARNING, "tenure.server"):
        assert await holds.walk() == 1
        assert await holds.walk() == 0  # (told once)
    assert list(_told(caplog)) == ["jobs"]
    audit.close()
    (act,) = [json.loads(line) for line in (tmp_path / "audit.log").read_text().splitlines()]
    assert act["what"]["node"] == "jobs"
    assert act["what"]["long_hold_seconds"] == 10.0
    # With every threshold off (the elections' 0, and no server flag), nothing is in
    # force: the walks come at the idle period, each node costing one look.
    quiet = LongHolds(0.0, lambda: engine, lambda: 3600.0, None, budget=1)
    assert quiet.period == IDLE_PERIOD
    assert await quiet.walk() == 0
    assert quiet.period == IDLE_PERIOD
    engine.apply(AlterNode("elections", {"long_hold": 60.0}), 3600.0)  # (seen at the next walk)
    assert await quiet.walk() == 1
    assert quiet.period == walk_period(60.0)


async def test_a_failed_walk_is_logged_with_its_traceback_and_the_walks_go_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    engine = _holding({"jobs": NodeConfig(long_hold=1.0)})
    calls = 0

    def engine_of() -> Engine:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("a bug in the walk")
        return engine

    walked = asyncio.Event()

    class Watched(LongHolds):
        async def walk(self) -> int:
            told = await super().walk()
            walked.set()  # (a walk that ran to its end: not the failed first)
            return told

    holds = Watched(1.0, engine_of, lambda: 10.0, None, budget=100)
    with caplog.at_level(logging.WARNING, "tenure.server"):
        holds.start()  # (the first walk a period from now, 1 s, and the next 1 s later)
        try:
            async with asyncio.timeout(WAIT):
                await walked.wait()
        finally:
            holds.stop()
    assert holds.told == 1
    (failed,) = [r for r in caplog.records if getattr(r, "event", None) == "long_hold_walk_failed"]
    assert failed.levelno == logging.ERROR
    assert failed.exc_info is not None
    assert "a bug in the walk" in str(failed.exc_info[1])
    assert list(_told(caplog)) == ["jobs"]
    # The look of a server where nothing is set fails alike: said, and looked again.
    caplog.clear()

    def broken() -> Engine:
        raise RuntimeError("a bug in the look")

    idle = LongHolds(0.0, broken, lambda: 10.0, None, budget=100)
    with caplog.at_level(logging.WARNING, "tenure.server"):
        idle.start()
    try:
        (failed,) = [
            r for r in caplog.records if getattr(r, "event", None) == "long_hold_walk_failed"
        ]
        assert failed.exc_info is not None
        assert "a bug in the look" in str(failed.exc_info[1])
        assert isinstance(idle._next, asyncio.TimerHandle)  # (the next look, a minute on)
    finally:
        idle.stop()


async def test_an_idle_server_runs_no_task_and_walks_once_a_nodes_setting_is_found(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """No flag and no node's own threshold: a look at the nodes' settings, a slice of
    ``budget`` nodes a turn in plain callbacks, makes no task and walks no hold, and
    waits a minute; a node that sets one (here found at the start, as after a
    restart, in the last slice) starts a walk at once."""
    engine = _holding({"a": NodeConfig(), "b": NodeConfig(), "c": NodeConfig()})
    walked = asyncio.Event()

    class Watched(LongHolds):
        async def walk(self) -> int:
            told = await super().walk()
            walked.set()
            return told

    idle = Watched(0.0, lambda: engine, lambda: 100.0, None, budget=1)
    idle.start()
    try:
        for _ in range(10):  # (three slices of one node: a turn each)
            await asyncio.sleep(0)
        assert idle._task is None
        assert isinstance(idle._next, asyncio.TimerHandle)
        assert idle._next.when() - asyncio.get_running_loop().time() > IDLE_PERIOD - 1
        assert not walked.is_set()
    finally:
        idle.stop()
    engine.apply(AlterNode("c", {"long_hold": 10.0}), 100.0)
    found = Watched(0.0, lambda: engine, lambda: 100.0, None, budget=1)
    with caplog.at_level(logging.WARNING, "tenure.server"):
        found.start()
        try:
            async with asyncio.timeout(WAIT):
                await walked.wait()
        finally:
            found.stop()
    assert list(_told(caplog)) == ["c"]
    assert found.period == walk_period(10.0)


def _audited(path: Path) -> list[dict[str, object]]:
    if not path.exists():
        return []
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [line for line in lines if line.get("act") == "long_hold"]


async def _wait_audited(path: Path, name: str) -> list[dict[str, object]]:
    deadline = time.monotonic() + WAIT
    while not any(act["what"]["name"] == name for act in _audited(path)):  # type: ignore[index]
        assert time.monotonic() < deadline, f"no long_hold of {name!r}: {_audited(path)}"
        await asyncio.sleep(0.05)
    return _audited(path)


async def test_a_server_tells_of_a_long_hold_in_its_log_audit_and_metrics(tmp_path: Path) -> None:
    audit, http = tmp_path / "audit.log", free_port()
    extra = ("--long-hold-seconds", "1", "--audit-log", str(audit), "--http-port", str(http))
    with ServerProcess(tmp_path / "data", *extra) as server:
        async with tenure.connect(f"tenure://127.0.0.1:{server.port}") as client:
            await client.create_node("jobs")
            async with client.session("jobs", description="nightly export") as session:
                async with session.mutex("quick"):
                    pass  # (released at once: never told of)
                async with session.mutex("stuck"):
                    await _wait_audited(audit, "stuck")
                    async with session.mutex("stuck-too"):
                        acts = await _wait_audited(audit, "stuck-too")
        # "stuck" was walked past again while "stuck-too" waited its turn: told once.
        assert [act["what"]["name"] for act in acts] == ["stuck", "stuck-too"]  # type: ignore[index]
        assert acts[0]["what"]["description"] == "nightly export"  # type: ignore[index]
        server.wait_log('"msg": "long hold"')
        async with (
            aiohttp.ClientSession() as web,
            web.get(f"http://127.0.0.1:{http}/metrics") as response,
        ):
            metrics = await response.text()
        assert "tenure_long_holds_total 2.0" in metrics


async def test_a_nodes_setting_tells_without_the_flag_and_is_kept_across_a_restart(
    tmp_path: Path,
) -> None:
    """No ``--long-hold-seconds``: a node's own long_hold is told of all the same (its
    threshold in the log and audit lines), and another node's holds are not; the
    setting comes back with the node after a restart (the journal replayed), where the
    restarted server's first walk finds it."""
    data, audit = tmp_path / "data", tmp_path / "audit.log"
    with ServerProcess(data) as server:
        async with tenure.connect(f"tenure://127.0.0.1:{server.port}") as client:
            await client.create_node("jobs", long_hold=1.0)
            await client.create_node("batch")  # (no threshold: neither its own nor the flag)
    http = free_port()
    extra = ("--audit-log", str(audit), "--http-port", str(http))
    with ServerProcess(data, *extra) as server:
        async with tenure.connect(f"tenure://127.0.0.1:{server.port}") as client:
            assert (await client.describe_node("jobs")).config.long_hold == 1.0
            async with (
                client.session("batch") as batch,
                client.session("jobs", description="nightly export") as jobs,
                batch.mutex("quiet"),  # (held first: it is older than the one told of)
                jobs.mutex("stuck"),
            ):
                acts = await _wait_audited(audit, "stuck")
        server.wait_log('"long_hold_seconds": 1.0')
        async with (
            aiohttp.ClientSession() as web,
            web.get(f"http://127.0.0.1:{http}/metrics") as response,
        ):
            metrics = await response.text()
    assert [act["what"]["name"] for act in acts] == ["stuck"]  # type: ignore[index]
    assert acts[0]["what"]["node"] == "jobs"  # type: ignore[index]
    assert acts[0]["what"]["long_hold_seconds"] == 1.0  # type: ignore[index]
    assert "tenure_long_holds_total 1.0" in metrics


def test_the_long_hold_series_is_there_at_zero_without_the_flag(tmp_path: Path) -> None:
    """A server without ``--long-hold-seconds`` still tells of the holds of a node that
    sets its own threshold: its counter is there from the start, at 0."""
    http = free_port()
    with ServerProcess(tmp_path / "data", "--http-port", str(http)) as server:
        server.wait_log('"msg": "listening"')
        with urllib.request.urlopen(f"http://127.0.0.1:{http}/metrics", timeout=WAIT) as got:
            assert b"tenure_long_holds_total 0.0" in got.read()
