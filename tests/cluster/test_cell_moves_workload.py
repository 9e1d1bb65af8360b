"""lincheck over a history that spans moves: the linearizable workload's clients (three,
on registers, counters and mutexes of one node, its sessions held across the moves)
run on a service of two cells, three members each, while the node moves between the
cells four times (``tenure cells move``'s own call); the register, counter and mutex
models hold the history (the mutex's: every token granted after a move above every
token before), and each move ended with the node on its target."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

import tenure
from tenure._etcd.client import EtcdClient
from tenure.server._cluster.cell_admin import move_node
from tenure.server._cluster.directory import DirectoryKeys
from tenure.server._config.cluster_url import parse_cluster_url
from tenure.testing import lincheck
from tenure.testing.workload import (
    MODELS,
    STEPS,
    Books,
    LinClient,
    LinConfig,
    close_holds,
    create_keys,
    read_events,
)
from tests.cluster.cells import Service, cell_nodes, running_service
from tests.cluster.harness import until
from tests.cluster.test_cell_moves import name_on
from tests.etcd.cluster import EtcdCluster
from tools.faults.history import Recorder, now_ns
from tools.faults.lin_client import LoopPauses

REGISTERS = ["reg-0", "reg-1"]
COUNTERS = ["ctr-0"]
MUTEXES = ["mx-0"]
CLIENTS = 3
#: Operations of each client; the moves happen while they run.
OPERATIONS = 80
#: The cells the node moves to, in turn (it starts on ``a``).
MOVES = ["b", "a", "b", "a"]


@pytest.fixture(scope="module")
def service(
    tmp_path_factory: pytest.TempPathFactory, etcd_member: EtcdCluster
) -> Iterator[Service]:
    """One service of cells ``a`` and ``b`` for the module."""
    with running_service(tmp_path_factory.mktemp("lin-moves"), etcd_member.endpoints) as made:
        yield made


async def test_lincheck_holds_a_history_that_spans_moves(service: Service, tmp_path: Path) -> None:
    node = name_on("a", "lin-moves")
    url = service.url()
    async with tenure.connect(url) as client:
        await client.create_node(node)
        async with client.session(node) as session:
            await create_keys(session, REGISTERS + COUNTERS)
    config = LinConfig(
        index=0, doors=[url], node=node, clients=CLIENTS, out_dir=str(tmp_path),
        history=str(tmp_path / "history.jsonl"), seed=11, registers=REGISTERS,
        counters=COUNTERS, mutexes=MUTEXES, groups=[], member_ids=[], max_ops=OPERATIONS,
        window=10.0,
    )  # fmt: skip
    recorder = Recorder(tmp_path / "history.jsonl")
    books = Books(tmp_path, 0, now_ns)
    clients = [
        LinClient(config, number, books, LoopPauses(config, recorder), recorder, STEPS)
        for number in range(CLIENTS)
    ]
    stop = asyncio.Event()
    running = [asyncio.ensure_future(lin.run(stop)) for lin in clients]
    parsed = parse_cluster_url(service.cells["a"].etcd_url)
    keys = DirectoryKeys.of(parsed.prefix, parsed.name)
    conn = EtcdClient(parsed.connection)
    try:
        for target in MOVES:
            # Each move after some operations answered since the last (they span it).
            floor = await asyncio.to_thread(_answered, tmp_path) + CLIENTS * 4
            await until(partial(_reached, tmp_path, floor), f"{floor} operations answered")
            outcome = await move_node(conn, keys, node, target, timeout=60)
            assert outcome.moved, outcome
            assert node in await cell_nodes(service.cells[target])
        async with asyncio.timeout(180):  # (bounded: each stops after OPERATIONS)
            await asyncio.gather(*running)
    finally:
        stop.set()
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        await conn.close()
        books.close()
        recorder.close()
    checked = _checked(tmp_path)
    assert checked > CLIENTS * OPERATIONS // 2  # (most operations answered, moves and all)


def _answered(out_dir: Path) -> int:
    """The operations answered so far, of every model's file."""
    return sum(
        sum(text.count(f'"type":"{kind}"') for kind in ("ok", "fail"))
        for text in (path.read_text(encoding="utf-8") for path in out_dir.glob("w*-*.jsonl"))
    )


async def _reached(out_dir: Path, floor: int) -> bool:
    return await asyncio.to_thread(_answered, out_dir) >= floor


def _checked(out_dir: Path) -> int:
    """The operations answered of each model's history, each held to its model.

    Raises:
        AssertionError: a history is not linearizable (its witness).
    """
    checked = 0
    for model in ("register", "counter", "mutex"):
        events = close_holds(model, read_events(sorted(out_dir.glob(f"w*-{model}.jsonl"))))
        header = MODELS[model]
        lines = ([header] if header else []) + events
        history = lincheck.from_events(enumerate(lines, start=1), model)
        result = lincheck.check(history, model)
        assert result.ok, result.explain()
        checked += sum(1 for e in events if e["type"] in ("ok", "fail"))  # (answered)
    return checked
