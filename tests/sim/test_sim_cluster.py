"""The simulation's cluster target (tenure.testing.sim, ``--target cluster``): three
``tenure serve --cluster`` members over the simulated etcd, in this process.

A seed gives one history; a member cut from etcd alone loses the lead to another and
never believes it leads alongside it; the leader's snapshot process runs in-process;
the network carries the model's messages through its cuts in order; a disconnect
fails what was under way. (The cluster's mutants, in child interpreters:
test_sim_cli.py.)"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import math
import random
from collections.abc import Coroutine
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import pytest

import tenure
from tenure.errors import TenureError
from tenure.server._cluster.lease import MemberLease
from tenure.testing.sim import SimLoop
from tenure.testing.sim._chance import seeded
from tenure.testing.sim._cli import EXIT_BAD_INPUT, main
from tenure.testing.sim._cluster import LEASE_TTL, SimCluster
from tenure.testing.sim._run import SimOptions, end_every_task, run_seed
from tenure.testing.sim.etcd._stubs import ETCD_HOST

T = TypeVar("T")

SHORT = SimOptions(5, target="cluster", minutes=0.5, clients=4)


def run_on_a_loop(loop: SimLoop, main: Coroutine[Any, Any, T]) -> T:
    """``main`` on ``loop``; then what is left is ended (a crashed process's tasks
    closed, the others cancelled) and the loop closed. What a task or callback raised
    unhandled fails the test (a crashed process's tasks left pending are expected)."""
    unhandled: list[str] = []

    def handle(_: object, context: dict[str, Any]) -> None:
        message = str(context.get("message", ""))
        if not message.startswith("Task was destroyed but it is pending"):
            unhandled.append(f"{message}: {context.get('exception')!r}")

    loop.set_exception_handler(handle)
    with seeded(loop.seed):  # (the collector off, and what crashed processes froze let go)
        try:
            return loop.run_until_complete(main)
        finally:
            loop.run_until_complete(end_every_task(loop))
            loop.close()
            loop.processes.forget_the_dead()
            assert not unhandled, unhandled


@pytest.mark.slow  # (several cluster runs: 3 to 7 s)
def test_a_cluster_seed_gives_one_history_and_every_rule_holds(tmp_path: Path) -> None:
    first = run_seed(SHORT, tmp_path / "first")
    second = run_seed(SHORT, tmp_path / "second")
    assert first.ok, first.verdicts.violations
    assert first.digest == second.digest
    assert sum(first.verdicts.operations.values()) > 100  # (it did something)
    assert set(first.faults) == set(SHORT.chosen_faults())


@pytest.mark.slow  # (several cluster runs: 3 to 7 s)
def test_the_leaders_snapshots_are_made_by_its_state_process_in_process(
    tmp_path: Path,
) -> None:
    # 8 clients for a minute append some thousands of records: past the members'
    # snapshot_every (2,000) at least once (half a minute did, before the workload's
    # hand-offs, whose offers wait up to a second, made its clients slower).
    options = SimOptions(2, target="cluster", minutes=1, clients=8, faults=())
    result = run_seed(options, tmp_path)
    assert result.ok, result.verdicts.violations
    log = (tmp_path / "server.log").read_text()
    assert "snapshot in use" in log
    assert "a cluster snapshot failed" not in log


def test_a_member_cut_from_etcd_alone_loses_the_lead_and_no_two_lead_at_once() -> None:
    loop = SimLoop(7, host="harness")
    seen: list[list[str]] = []

    async def watch(cluster: SimCluster, seconds: float) -> None:
        for _ in range(int(seconds / 0.05)):
            seen.append(cluster.leaders())
            await asyncio.sleep(0.05)

    async def main_() -> tuple[str, list[str], list[str]]:
        cluster = SimCluster(loop, random.Random(7))
        cluster.start()
        await watch(cluster, 10)
        (first,) = cluster.leaders()
        loop.network.cut(first, ETCD_HOST)  # (clients still reach it: etcd does not)
        await watch(cluster, 4 * LEASE_TTL)
        during = cluster.leaders()
        loop.network.heal(first, ETCD_HOST)
        await watch(cluster, 4 * LEASE_TTL)
        after = cluster.leaders()
        cluster.close()
        return first, during, after

    first, during, after = run_on_a_loop(loop, main_())
    assert during
    assert first not in during
    assert len(after) == 1
    assert all(len(leaders) <= 1 for leaders in seen), [s for s in seen if len(s) > 1]


def test_the_network_holds_a_services_messages_at_a_cut_and_keeps_each_lanes_order() -> None:
    loop = SimLoop(3)
    arrived: list[tuple[str, float]] = []

    class Lane:  # (a stream: held weakly by the network)
        pass

    async def main_() -> None:
        network, lane = loop.network, Lane()

        def send(label: str, delay: float) -> None:
            network.carry("a", "b", lane, loop.now() + delay, arrive, label)

        def arrive(label: str) -> None:
            arrived.append((label, loop.now()))

        send("first", 0.010)
        send("second", 0.001)  # (sent later, meant to arrive sooner: after "first")
        await asyncio.sleep(1)
        network.cut("a", "b", both=False)
        send("held", 0.001)
        network.carry("b", "a", None, loop.now() + 0.001, arrive, "back")  # (not cut)
        await asyncio.sleep(1)
        network.slow("a", "b", 0.5)
        network.heal("a", "b")  # (heals the slow link as well)
        send("after", 0.0)
        await asyncio.sleep(1)

    run_on_a_loop(loop, main_())
    labels = [label for label, _ in arrived]
    assert labels == ["first", "second", "back", "held", "after"]
    times = dict(arrived)
    assert times["second"] >= times["first"]
    assert 2.0 <= times["held"] < 2.01  # (at the heal, after the network's latency)
    assert times["after"] >= times["held"]


@pytest.mark.parametrize(
    "argv",
    [
        ["--target", "cluster", "--fsync", "off"],
        ["--target", "cluster", "--faults", "power"],
        ["--target", "cluster", "--mutant", "torn-record"],
        ["--target", "server", "--faults", "cut-etcd"],
        ["--target", "server", "--mutant", "unfenced-append"],
    ],
)
def test_what_a_target_does_not_have_exits_2(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == EXIT_BAD_INPUT
    assert "error" in capsys.readouterr().err


def _read_after_the_leader_is_cut_from_etcd(seed: int) -> tuple[bytes | str, bytes]:
    """A client pinned to the leader writes ``0``; the leader is cut from etcd (its
    clients still reach it); once a successor could lead, a client of the other members
    writes ``1``; then the pinned client reads, through its session on the old leader.
    What it read (or the error it got, by name), and what the other wrote."""
    loop = SimLoop(seed, host="harness")
    read: list[bytes | str] = []

    async def main_() -> bytes:
        cluster = SimCluster(loop, random.Random(seed))
        cluster.start()
        async with asyncio.timeout(60):
            while not cluster.leaders():  # noqa: ASYNC110 (simulated time: a few turns)
                await asyncio.sleep(0.05)
        (leader,) = cluster.leaders()
        others = ",".join(f"{host}:7390" for host in cluster.hosts if host != leader)
        ready, cut_off, written = asyncio.Event(), asyncio.Event(), asyncio.Event()

        async def pinned() -> None:
            async with tenure.connect(f"tenure://{leader}:7390") as client:
                await client.create_node("n")
                session = await client.session("n")
                await session.semaphore("r").create(limit=1, data=b"0")
                ready.set()
                await written.wait()
                try:
                    async with asyncio.timeout(30):
                        read.append((await session.semaphore("r").describe()).data)
                except (TenureError, TimeoutError) as error:
                    read.append(type(error).__name__)
                with contextlib.suppress(TenureError):  # (its server may have let it go)
                    await session.close()

        async def other() -> bytes:
            await cut_off.wait()
            async with (
                tenure.connect(f"tenure://{others}") as client,
                await client.session("n") as session,
            ):
                await session.semaphore("r").update(b"1")
                found = await session.semaphore("r").describe()
            written.set()
            return found.data

        a = loop.processes.spawn(loop.processes.new("ca"), pinned())
        b = loop.processes.spawn(loop.processes.new("cb"), other())
        await ready.wait()
        loop.network.cut(leader, ETCD_HOST)
        await asyncio.sleep(3 * LEASE_TTL)  # (its lease has run out in etcd: a successor)
        cut_off.set()
        wrote = await b
        await a
        cluster.close()
        return wrote

    wrote = run_on_a_loop(loop, main_())
    return read[0], wrote


def test_a_leader_cut_from_etcd_answers_no_read_its_successor_has_moved_past() -> None:
    """A leader that lost etcd stops serving once its lease could have ended there
    (docs/cluster.md): its client's read fails or reaches the successor, never the
    value the successor's write replaced (etcd-io/etcd #20418's stale read)."""
    read, wrote = _read_after_the_leader_is_cut_from_etcd(11)
    assert wrote == b"1"
    assert read != b"0"


def test_the_same_read_is_stale_when_the_leader_ignores_its_lease(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The check above can fail: a leader that serves on until etcd says its lease is
    gone (its deadline ignored) answers the read from the state its successor moved
    past."""
    monkeypatch.setattr(
        MemberLease, "deadline", lambda self: -math.inf if self.lost.is_set() else math.inf
    )
    read, wrote = _read_after_the_leader_is_cut_from_etcd(11)
    assert wrote == b"1"
    assert read == b"0"


def test_the_cluster_target_without_the_etcd_extra_exits_2_and_names_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real_import = importlib.import_module

    def without_etcd(name: str, package: str | None = None) -> ModuleType:
        if name == "tenure.testing.sim._cluster":
            raise ModuleNotFoundError("No module named 'grpc'", name="grpc")
        return real_import(name, package)

    monkeypatch.setattr(importlib, "import_module", without_etcd)
    assert main(["--target", "cluster"]) == EXIT_BAD_INPUT
    assert "pip install 'tenure[etcd]'" in capsys.readouterr().err
