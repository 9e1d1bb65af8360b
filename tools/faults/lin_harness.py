"""One run of the ``linearizable`` scenario, from start to verdict.

:func:`run_linearizable` starts the target, makes the node and the registers (each a
persistent semaphore of data ``0``), gives every worker a fault proxy per address of
the target (where it runs in network namespaces, a namespace of its own instead:
:func:`tools.faults.lin_cuts.worker_path`) and starts the workers
(:mod:`tools.faults.lin_worker`: clients through every door, some watching, one
worker pausing now and then past the window; on a cluster, the clients of every door
reading the registers from its standbys too, :data:`MAX_STALENESS` stale at most;
through dflockd's and YDB's faces too,
where the target serves them: YDB's through one proxy its discovery advertises, tied to
every worker's: :mod:`tools.faults.lin_ydb`); waits
until every client has had an answer; lets the nemesis run (:mod:`tools.faults.lin_nemesis`)
for the given time; heals everything and waits until every client has had an answer
again (bounded by the liveness bound), and until each model's clients have had
:data:`MIN_OPERATIONS` answers, and on a cluster its standbys as many stale reads
(:data:`STANDBY_READS`; bounded too: a busy machine does fewer in the same
time, and a run of too few operations proves little); stops everything it started
(by PID, also when something failed) and checks:

* the suite's rules over its own history (the harness's, the nemesis's and the
  workers' notes: a restart that failed, a server that died, no leader, a client
  whose loop died...: :func:`tools.faults.checker.check`);
* each model's lincheck history (:func:`tools.faults.check_lin_workload.check_workload`)
  and the workload's liveness (:func:`~tools.faults.check_lin_workload.check_progress`).

Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import subprocess
from pathlib import Path
from typing import Final, cast

from tests.netproxy import NetProxy

import tenure
from tenure.testing.workload import MODELS, NATIVE_SEMAPHORES, LinConfig, create_keys
from tools.faults.check_lin_workload import check_progress, check_workload
from tools.faults.checker import check
from tools.faults.harness import HARNESS, NODE, Outcome, create_node, heal, spawn, stop_workers
from tools.faults.history import Recorder, load, now
from tools.faults.lin_cuts import worker_path
from tools.faults.nemesis import Stage, sleep_until
from tools.faults.observer import Observer
from tools.faults.proxies import ProxyGroup
from tools.faults.scenarios import NEMESES, Scenario, liveness_bound
from tools.faults.target import DFLOCKD, REPLICATED, YDB, Target, TenureTarget

#: The keys of each model.
REGISTERS: Final = [f"reg-{n}" for n in range(3)]
COUNTERS: Final = [f"cnt-{n}" for n in range(2)]
MUTEXES: Final = [f"mtx-{n}" for n in range(3)]
GROUPS: Final = [f"grp-{n}" for n in range(2)]
MEMBER_IDS: Final = [f"id-{n}" for n in range(4)]
#: The elections (the native semaphores are the workload's NATIVE_SEMAPHORES).
ELECTIONS: Final = ["elc-0"]
#: The name the clients claim for slots (tenure.testing.workload._claim_steps).
CLAIMS: Final = ["clm-0"]
#: The mutexes taken through dflockd's face (tenure.testing.workload._dflockd), where served.
DFLOCKD_KEYS: Final = [f"dfl-{n}" for n in range(2)]
#: Workers whose first client watches: a register, or (the one named) every register
#: through a prefix cache.
WATCHING_WORKERS: Final = 2
PREFIX_WATCHING_WORKER: Final = 1
#: Seconds between two pauses of the first worker's loop past the window.
PAUSE_EVERY: Final = 8.0
#: The answers each model's clients are let run to after the heal, at least (and
#: what a run must have checked to count as evidence: tests/faults/test_scenarios.py).
MIN_OPERATIONS: Final = 100
#: The most seconds past the heal's own wait that a run waits for them.
EVIDENCE_WAIT: Final = 60.0
#: On a cluster (``replicated``), the staleness the stale reads of the registers allow
#: (:meth:`~tenure.testing.workload.LinConfig.reads_standbys`), in seconds.
MAX_STALENESS: Final = 0.5
#: What :class:`_Answers` counts the stale reads a standby answered under (each names
#: the door that answered: its ``answered_by``; ``leader`` when none could).
STANDBY_READS: Final = "standby-reads"


async def _create_keys(url: str) -> None:
    async with asyncio.timeout(30.0):
        async with tenure.connect(url) as client, await client.session(NODE) as session:
            await create_keys(session, REGISTERS)


class _Answers:
    """Reads the workers' lincheck files as they grow: when each client last had an
    answer (an ``ok`` or ``fail`` of one of its processes)."""

    def __init__(self, lin_dir: Path) -> None:
        self.lin_dir = lin_dir
        self._offsets: dict[Path, int] = {}
        self.last: dict[str, float] = {}
        #: Answers (``ok`` or ``fail``) by model, from each file's name (``w3-register``).
        self.answered: dict[str, int] = {}

    def refresh(self) -> None:
        for path in self.lin_dir.glob("w*-*.jsonl"):
            offset = self._offsets.get(path, 0)
            with path.open("rb") as file:
                file.seek(offset)
                data = file.read()
            complete = data.rfind(b"\n") + 1
            self._offsets[path] = offset + complete
            model = path.stem.partition("-")[2]
            for line in data[:complete].splitlines():
                with contextlib.suppress(ValueError):
                    event = json.loads(line)
                    if event.get("type") in ("ok", "fail") and "/" not in event["process"]:
                        label = str(event["process"]).split(".")[0]
                        self.last[label] = max(self.last.get(label, 0.0), event["time"] / 1e9)
                        self.answered[model] = self.answered.get(model, 0) + 1
                        if event.get("answered_by") not in (None, "leader", "unknown"):
                            self.answered[STANDBY_READS] = self.answered.get(STANDBY_READS, 0) + 1

    async def wait_enough(self, models: list[str], count: int, until: float) -> bool:
        """Wait (until ``until`` at most) for each of ``models`` to have had ``count``
        answers; whether they all had."""
        while True:
            self.refresh()
            if all(self.answered.get(model, 0) >= count for model in models):
                return True
            if now() >= until:
                return False
            await asyncio.sleep(0.2)

    async def wait(self, labels: list[str], since: float, until: float) -> bool:
        """Wait (until ``until`` at most) for every client of ``labels`` to have had an
        answer since ``since``; whether they all had."""
        while True:
            self.refresh()
            if all(self.last.get(label, 0.0) >= since for label in labels):
                return True
            if now() >= until:
                return False
            await asyncio.sleep(0.2)


async def run_linearizable(
    scenario: Scenario,
    target: Target,
    work_dir: Path,
    *,
    seconds: float,
    seed: int = 1,
    bound: float | None = None,
) -> Outcome:
    """Run the ``linearizable`` ``scenario`` against ``target`` (module docstring)."""
    bound = liveness_bound(scenario, target) if bound is None else bound
    history_dir, lin_dir = work_dir / "history", work_dir / "lin"
    history_dir.mkdir(parents=True, exist_ok=True)
    lin_dir.mkdir(parents=True, exist_ok=True)
    rec = Recorder(history_dir / "harness.jsonl")
    workers: dict[int, subprocess.Popen[bytes]] = {}
    proxies: dict[int, ProxyGroup] = {}
    answers = _Answers(lin_dir)
    healed = stopped = 0.0
    labels: list[str] = []
    ydb: NetProxy | None = None
    try:
        if YDB in target.capabilities:
            ydb = NetProxy("127.0.0.1", 0)  # (its upstream port is known once asked for)
            await ydb.start()
            ydb.upstream_port = cast(TenureTarget, target).serve_ydb((ydb.host, ydb.port))
        await asyncio.to_thread(target.start)
        await create_node(target.url())
        await _create_keys(target.url())
        for index in range(scenario.workers):
            way = await worker_path(target, index)
            if way.proxies is not None:
                proxies[index] = way.proxies
                if ydb is not None:
                    way.proxies.proxies[0].tie(ydb)
            doors = [target.url([address]) for address in way.addresses]
            if len(doors) > 1:
                doors.append(target.url(way.addresses))
            config = LinConfig(
                index=index, doors=doors, node=NODE, clients=scenario.clients,
                out_dir=str(lin_dir), history=str(history_dir / f"w{index}.jsonl"),
                seed=seed * 1000 + index, registers=REGISTERS, counters=COUNTERS,
                mutexes=MUTEXES, groups=GROUPS, member_ids=MEMBER_IDS,
                semaphores=NATIVE_SEMAPHORES, elections=ELECTIONS, claims=CLAIMS,
                window=scenario.window,
                hold=scenario.hold, pause_every=PAUSE_EVERY if index == 0 else 0.0,
                watchers=1 if index < WATCHING_WORKERS else 0,
                prefix_watchers=1 if index == PREFIX_WATCHING_WORKER else 0,
                max_staleness=MAX_STALENESS if REPLICATED in target.capabilities else None,
            )  # fmt: skip
            if DFLOCKD in target.capabilities:
                config.dflockd = [f"{host}:{port}" for host, port in way.addresses]
                config.dflockd_keys = DFLOCKD_KEYS
            if ydb is not None:
                config.ydb = f"grpc://{ydb.host}:{ydb.port}"
            labels += config.labels()[config.watchers :]
            path = work_dir / f"w{index}.json"
            config.dump(path)
            args = ["-m", "tools.faults.lin_worker", str(path)]
            log = work_dir / f"w{index}.log"
            workers[index] = spawn(args, log, dict(os.environ), way.prefix)
        stage = Stage(
            target, rec, random.Random(seed), scenario.window, 0.0,
            Observer(target.url(), NODE, [], [], rec), proxies=proxies, workers=workers,
        )  # fmt: skip
        rec.note(
            HARNESS, "params", scenario=scenario.name, target=target.name,
            liveness_bound=bound, seconds=seconds, window=scenario.window,
        )  # fmt: skip
        await answers.wait(labels, since=now(), until=now() + bound)
        rec.note(HARNESS, "faults-start")
        until = now() + seconds
        await asyncio.gather(*(NEMESES[name](stage, until) for name in scenario.nemeses))
        await sleep_until(until)
        await heal(stage)
        healed = now()
        rec.note(HARNESS, "heal", t=healed)
        await answers.wait(labels, since=healed, until=healed + bound + 5.0)
        answering = [model for model in MODELS if answers.answered.get(model)]
        if REPLICATED in target.capabilities:
            answering.append(STANDBY_READS)
        await answers.wait_enough(answering, MIN_OPERATIONS, until=now() + EVIDENCE_WAIT)
    finally:
        stopped = now()
        rec.note(HARNESS, "stop")
        await stop_workers(workers)
        for proxy in proxies.values():
            await proxy.aclose()
        if ydb is not None:
            await ydb.aclose()
        await asyncio.to_thread(target.stop)
        rec.close()
    verdict = check(load(sorted(history_dir.glob("*.jsonl"))))
    models, stats = check_workload(lin_dir, work_dir / "lincheck")
    progress, answered = check_progress(lin_dir, healed, stopped, bound, labels)
    verdict.violations = sorted(verdict.violations + models + progress, key=lambda v: v.t)
    verdict.stats["linearizability"] = stats
    verdict.stats["answered"] = answered
    return Outcome(scenario.name, seconds, verdict, work_dir)
