"""The linearizable workload's stale reads on a real cluster: a client of every door
reads the registers from the standbys (``stale-read-register``), each read recorded
as lincheck's stale read (its ``max_staleness``, its client's ``session`` on every
register operation, and on its answer the door that answered), and lincheck's
register model holds the history; a client of one door draws no stale read
(tenure.testing.workload.LinConfig.reads_standbys)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import tenure
from tenure.testing import lincheck
from tenure.testing.workload import (
    STALE_READ,
    STEPS,
    Books,
    LinClient,
    LinConfig,
    create_keys,
    model_file,
)
from tests.cluster.harness import TenureCluster
from tools.faults.history import Recorder, now_ns
from tools.faults.lin_client import LoopPauses

NODE = "stale-workload"
REGISTERS = ["reg-0", "reg-1"]
#: Operations of the client (a write or a stale read each).
OPERATIONS = 60


def _config(tmp_path: Path, door: str) -> LinConfig:
    return LinConfig(
        index=0, doors=[door], node=NODE, clients=1, out_dir=str(tmp_path),
        history=str(tmp_path / "history.jsonl"), seed=3, registers=REGISTERS, counters=[],
        mutexes=[], groups=[], member_ids=[], max_staleness=0.5, max_ops=OPERATIONS,
    )  # fmt: skip


async def test_a_client_of_every_door_reads_the_registers_from_the_standbys(
    steady_cluster: TenureCluster, tmp_path: Path
) -> None:
    url = steady_cluster.url()
    async with tenure.connect(url) as client:
        await client.create_node(NODE, exist_ok=True)
        async with client.session(NODE) as session:
            await create_keys(session, REGISTERS)
    config = _config(tmp_path, url)
    assert config.reads_standbys(0)
    recorder = Recorder(tmp_path / "history.jsonl")
    books = Books(tmp_path, 0, now_ns)
    steps = {name: STEPS[name] for name in ("write-register", "read-register", STALE_READ)}
    lin = LinClient(config, 0, books, LoopPauses(config, recorder), recorder, steps)
    assert STALE_READ in lin.steps
    try:
        async with asyncio.timeout(120):  # (bounded: it stops after OPERATIONS)
            await lin.run(asyncio.Event())
    finally:
        books.close()
        recorder.close()
    lines = model_file(tmp_path, 0, "register").read_text().splitlines()
    events: list[dict[str, Any]] = [e for e in map(json.loads, lines) if "type" in e]
    invokes = [e for e in events if e["type"] == "invoke"]
    stale = [e for e in invokes if "max_staleness" in e]
    assert stale, invokes
    assert all(e["max_staleness"] == 0.5 for e in stale)
    assert all(e["session"] == "w0c0" for e in invokes)  # every register operation's
    answered = [e["answered_by"] for e in events if e["type"] == "ok" and "answered_by" in e]
    standbys = {server.address for server in steady_cluster.standbys()}
    assert len(answered) == len(stale), answered  # (no read's answer was lost here)
    assert set(answered) <= standbys | {"leader"}, answered
    assert standbys & set(answered), answered  # the standbys answered some
    result = lincheck.check(lincheck.read_jsonl(lines), "register")
    assert result.verdict == lincheck.LINEARIZABLE, result.explain()
    assert {op.max_staleness for op in result.by_key["reg-0"] + result.by_key["reg-1"]} >= {0.5}


def test_a_client_of_one_door_reads_nothing_stale(tmp_path: Path) -> None:
    one = _config(tmp_path, "tenure://127.0.0.1:1")
    several = _config(tmp_path, "tenure://127.0.0.1:1,127.0.0.1:2")
    assert not one.reads_standbys(0)
    assert several.reads_standbys(0)
    several.max_staleness = None
    assert not several.reads_standbys(0)
