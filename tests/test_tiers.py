"""The tiers of tests/tiers.py: the table names real paths, a test's markers follow
it, and the unit tier's guard refuses a process and reports it."""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from xdist.remote import Producer
from xdist.scheduler import LoadGroupScheduling

from tests import tiers
from tests.api.harness import MemoryHarness, TenureHarness
from tests.xdist_groups import TierGroupScheduling

ROOT = Path(__file__).resolve().parent.parent
SERVICE = ("service",)


def test_every_entry_of_the_table_exists() -> None:
    # A renamed file or test would leave its entry behind and its tests in the default.
    missing = []
    for entry in tiers.TIERS:
        path, _, name = entry.partition("::")
        name = name.partition("[")[0]  # a parametrized test's id: the function's name
        if not (ROOT / path).exists() or (name and f"def {name}(" not in (ROOT / path).read_text()):
            missing.append(entry)
    assert missing == []


@pytest.mark.parametrize(
    ("nodeid", "markers"),
    [
        ("tests/core/test_engine_model.py::TestEngineModel::runTest", ()),
        ("tests/core/test_purity.py::test_x", ("service",)),
        ("tests/server/durability/test_storage.py::test_x[1]", ()),
        ("tests/server/durability/test_journal.py::test_a_failed_child_keeps_the_log", SERVICE),
        ("tests/server/test_serve.py::test_x", SERVICE),
        ("tests/backends/redis/test_redis_new_thing.py::test_x", SERVICE),  # not in the table
        ("tests/newdir/test_x.py::test_x", SERVICE),
        ("tests/faults/test_checkers.py::test_x", ("faults", "service")),
        ("tests/faults/test_scenarios.py::test_x[tenure-crash]", ("faults", "service", "slow")),
        ("tests/dashboard/test_dashboard_browser.py::test_x", ("browser", "service")),
        ("tests/core_extra/test_x.py::test_x", SERVICE),  # a prefix of a name is not its directory
    ],
)
def test_a_test_gets_the_markers_of_the_longest_entry_that_holds_it(
    nodeid: str, markers: tuple[str, ...]
) -> None:
    assert tiers.markers_of(nodeid, {}) == markers


def test_the_longest_holder_is_that_of_the_definition_for_every_entry_and_its_neighbours() -> None:
    # markers_of looks a node id's cuts up in the table (every collected test asks it);
    # the definition is _holds over the whole table, longest first. For each entry:
    # itself, below it at each cut, a name that merely starts with it, and its parent.
    def by_definition(nodeid: str) -> str | None:
        holders = [entry for entry in tiers.TIERS if tiers._holds(entry, nodeid)]
        return max(holders, key=len) if holders else None

    nodeids = ["tests", "src", "tests_x/test_x.py::t", "a:::b", "tests/x.py::t[a/b::c[d]"]
    for entry in tiers.TIERS:
        nodeids += [entry, entry.rpartition("/")[0], entry + "x", entry + "_x/t.py::t"]
        nodeids += [entry + cut + "t" for cut in ("/", "::", "[")]
        nodeids += [entry + "::t[p/q::r]", entry + "[p]::t"]
    for nodeid in nodeids:
        assert tiers._longest_holder(nodeid) == by_definition(nodeid), nodeid


def test_a_server_parameter_makes_a_unit_path_service() -> None:
    kit = "src/tenure/testing/conformance/test_mutex.py::test_x[memory]"
    assert tiers.markers_of(kit, {"backend": MemoryHarness()}) == ()
    assert tiers.markers_of(kit, {"backend": TenureHarness()}) == ("service",)
    sync = "tests/sync/test_mutex.py::test_x[memory]"
    assert tiers.markers_of(sync, {"shared_url": "memory"}) == ()
    assert tiers.markers_of(sync, {"shared_url": "tenure"}) == ("service",)


def test_the_guard_refuses_a_process_and_keeps_the_refusal() -> None:
    # This test is itself unit tier: the guard of its own run is the one under test.
    node = "tests/test_tiers.py::inner"
    with tiers.guarding(node):
        with pytest.raises(tiers.UnitTierError, match="may not start a process"):
            subprocess.run([sys.executable, "-c", "pass"], check=True)
        with pytest.raises(tiers.UnitTierError):
            asyncio.run(asyncio.create_subprocess_exec("true"))
    refused = tiers.take_refusals(node)
    assert [what.split()[0] for what in refused] == ["subprocess.Popen", "subprocess.Popen"]
    assert tiers.take_refusals(node) == []  # taken once


@pytest.mark.parametrize(
    ("path", "holds"),
    [
        ("tests", True),
        ("tests/core", True),
        ("tests/core/test_purity.py", False),
        ("tests/backends", True),  # test_ledger.py, test_turns.py...
        ("tests/backends/postgres", False),
        ("tests/backends/etcd", True),  # test_etcd_wiring.py
        ("tests/backends/etcd/test_etcd_backend.py", False),
        ("tests/etcd_client", True),  # test_keepalive.py, test_url.py...
        ("tests/etcd_client/test_client.py", False),
        ("tests/backends/redis", True),  # test_redis_url.py
        ("tests/backends/redis/test_redis_backend.py", False),
        ("tests/faults", True),  # a test of test_cli.py
        ("tests/faults/test_scenarios.py", False),
        ("tests/cli", True),  # test_usage.py
        ("tests/cli/test_lock.py", False),
        ("src", True),
        ("src/tenure/testing/conformance/test_mutex.py", True),
    ],
)
def test_unit_tier_runs_collect_only_what_may_hold_the_unit_tier(path: str, holds: bool) -> None:
    assert tiers.may_hold_unit_tier(path) is holds


def test_the_fault_suite_and_the_costly_files_keep_to_one_worker() -> None:
    faults = ("faults", "service", "slow")
    scenarios = "tests/faults/test_scenarios.py::test_scenario_keeps_every_promise"
    assert tiers.xdist_group_of(f"{scenarios}[tenure-crash]", faults) == "faults"
    assert tiers.xdist_group_of(f"{scenarios}[tenure-cluster-failover]", faults) == (
        "faults: other targets"
    )
    assert tiers.xdist_group_of(f"{scenarios}[postgres-crash]", faults) == "faults: other targets"
    mutant = "tests/faults/test_mutants.py::test_a_dropped_push_is_caught_as_a_hang"
    assert tiers.xdist_group_of(mutant, faults) == "faults"
    kit = "tests/test_conformance_kit.py"
    assert tiers.xdist_group_of(f"{kit}::test_x", SERVICE) == kit
    assert tiers.xdist_group_of("tests/server/test_serve.py::test_x", SERVICE) is None
    assert all((ROOT / path).is_file() for path in tiers.ONE_WORKER)


#: The scheduler's log, as the controller gives it without --debug.
QUIET = Producer("test", enabled=False)


class Worker:
    """What the scheduler asks of an xdist worker: tests to run (by index in its
    collection), then to stop."""

    def __init__(self, name: str) -> None:
        self.gateway = SimpleNamespace(id=name)  # (named when collections differ)
        self.sent: list[int] = []
        self.shutting_down = False

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent += indices

    def shutdown(self) -> None:
        self.shutting_down = True


def run_scheduler(
    scheduler: Any, collection: list[str], rng: random.Random, *, pruned: bool = True
) -> list[Worker]:
    """Two workers through ``scheduler``: each finishes its tests in order, the one to
    go next drawn by ``rng``; if ``pruned``, checked after each test that a worker's
    workload holds no unit all of whose tests ran (what keeps the controller's work
    linear)."""
    workers = [Worker("gw0"), Worker("gw1")]
    for worker in workers:
        scheduler.add_node(worker)
    for worker in workers:
        scheduler.add_node_collection(worker, collection)
    scheduler.schedule()
    done = {id(worker): 0 for worker in workers}
    for _ in range(10 * len(collection)):
        busy = [worker for worker in workers if done[id(worker)] < len(worker.sent)]
        if not busy:
            break
        worker = rng.choice(busy)
        scheduler.mark_test_complete(worker, worker.sent[done[id(worker)]])
        done[id(worker)] += 1
        if pruned:
            for unit in scheduler.assigned_work[worker].values():
                assert not all(unit.values())
    assert scheduler.tests_finished
    assert not scheduler.has_pending
    return workers


def test_the_scheduler_hands_out_each_test_once_and_each_group_whole(
    pytestconfig: pytest.Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The controller's side of `-n 2 --dist loadgroup`, with stand-ins for the workers.
    monkeypatch.setattr(pytestconfig.option, "tx", ["2*popen"])
    group = "tests/core/test_engine_listing_index.py"
    assert group in tiers.ONE_WORKER
    collection = [f"tests/core/test_a.py::test_{i}" for i in range(150)]
    collection[40:40] = [f"{group}::test_{i}" for i in range(12)]
    collection += [f"tests/sync/test_b.py::test_{i}[memory]" for i in range(50)]
    workers = run_scheduler(TierGroupScheduling(pytestconfig, QUIET), collection, random.Random(5))
    sent = [collection[index] for worker in workers for index in worker.sent]
    assert sorted(sent) == sorted(collection)  # each test once
    holders = [w for w in workers if any(collection[i].startswith(group) for i in w.sent)]
    assert len(holders) == 1  # the group on one worker
    assert all(worker.sent for worker in workers)  # and both had work

    # The same run on xdist's own bookkeeping (every unit kept to the end) hands out
    # the same tests to the same workers.
    class Kept(TierGroupScheduling):
        mark_test_complete = LoadGroupScheduling.mark_test_complete

    kept = run_scheduler(Kept(pytestconfig, QUIET), collection, random.Random(5), pruned=False)
    assert [worker.sent for worker in kept] == [worker.sent for worker in workers]
