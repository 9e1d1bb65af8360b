"""``--long-hold-seconds``: each hold held past it told once (tenure.server._long_holds),
in a walk that lets the loop serve between slices; and a real server's log line, audit
record and ``tenure_long_holds_total``."""

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
from tenure._core import MAX_COUNT, Acquire, CreateNode, CreateSession, Engine, NodeConfig, Release
from tenure.server._audit import AuditLog
from tenure.server._long_holds import LongHolds, walk_period
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


def test_no_long_hold_series_without_the_setting(tmp_path: Path) -> None:
    http = free_port()
    with ServerProcess(tmp_path / "data", "--http-port", str(http)) as server:
        server.wait_log('"msg": "listening"')
        with urllib.request.urlopen(f"http://127.0.0.1:{http}/metrics", timeout=WAIT) as got:
            assert b"tenure_long_holds" not in got.read()
