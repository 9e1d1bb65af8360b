"""One fault run from start to verdict: processes up, faults, heal, stop, check.

:func:`run_scenario` starts the fenced resource, the target's server, a fault
proxy per worker (proxied scenarios), the worker processes and the observer;
waits until every client has taken a lock; lets the scenario's nemeses run for
the given time; heals everything (server up, network whole, processes resumed,
clocks true) and notes the heal; waits until every client has taken one more
lock or the liveness bound has passed; reads every register once more; stops
everything it started (by PID, also when something failed) and checks the
history. Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import random
import signal
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import tenure
from tenure.errors import AlreadyExistsError
from tools.faults.checker import Verdict, check
from tools.faults.disk import TRIGGER_VARIABLE, compile_shim, mount_tmpfs, unmount
from tools.faults.failover import note_deaths
from tools.faults.fence import FenceServer
from tools.faults.history import Recorder, load, now
from tools.faults.nemesis import Stage, restart, set_clock, sleep_until
from tools.faults.netns import net_of
from tools.faults.observer import Observer
from tools.faults.power import CUT_IN_SYNC_VARIABLE, KERNEL_WRITEBACK, shim_env
from tools.faults.power import compile_shim as compile_power_shim
from tools.faults.progress import Progress
from tools.faults.proxies import ProxyGroup
from tools.faults.scenarios import NEMESES, Scenario, liveness_bound
from tools.faults.target import (
    IDLE_TIMEOUT,
    REPLICATED,
    Address,
    Target,
    as_replicated,
    with_token,
)
from tools.faults.tenant import fill, prepare
from tools.faults.tokens import HONEST
from tools.faults.worker import WorkerConfig, register_of

NODE: Final = "faults"
HARNESS: Final = "harness"
REPO: Final = Path(__file__).resolve().parents[2]
_PR_SET_PDEATHSIG: Final = 1
#: Bound of a worker's exit after SIGTERM (its own stop grace and close included).
WORKER_EXIT: Final = 25.0


@dataclass
class Outcome:
    """What a run found."""

    scenario: str
    seconds: float
    verdict: Verdict
    work_dir: Path


def faketime_library() -> Path | None:
    """libfaketime's path, if it is installed."""
    found = sorted(Path("/usr/lib").glob("*/faketime/libfaketime.so.1"))
    found += sorted(Path("/usr/lib/faketime").glob("libfaketime.so.1"))
    return found[0] if found else None


async def create_node(url: str) -> None:
    """Create the run's node (:data:`NODE`) at ``url`` (bounded; there already is fine)."""
    async with asyncio.timeout(30.0):
        async with tenure.connect(url) as client:
            with contextlib.suppress(AlreadyExistsError):
                await client.create_node(NODE)


def _worker_env(scenario: Scenario, index: int, clock_file: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    if clock_file is None:
        return env
    library = faketime_library()
    if library is None:
        raise RuntimeError("libfaketime is missing (scripts/bootstrap installs faketime)")
    env.update(
        LD_PRELOAD=str(library), FAKETIME_TIMESTAMP_FILE=str(clock_file), FAKETIME_NO_CACHE="1"
    )
    if scenario.clocks[index] == "wall":
        env["FAKETIME_DONT_FAKE_MONOTONIC"] = "1"
    return env


def _die_with_parent() -> None:
    """In the child: SIGTERM when the thread that started it dies (a killed harness)."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def spawn(
    args: list[str], log_path: Path, env: dict[str, str], prefix: Sequence[str] = ()
) -> subprocess.Popen[bytes]:
    """Start ``python ARGS`` in the repository (under ``prefix``, which execs it in
    place: ``ip netns exec NAME``), its output to ``log_path``; it gets SIGTERM when
    the thread that started it dies."""
    # Started from the event loop's thread, which lives as long as the run: if the
    # harness is killed, the workers stop by themselves instead of running on.
    with log_path.open("ab") as log:
        return subprocess.Popen(
            [*prefix, sys.executable, *args],
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            preexec_fn=_die_with_parent,
        )


async def heal(stage: Stage) -> None:
    """Undo whatever a nemesis left (they heal themselves; this is the safety net).

    On a replicated target a server found dead that no fault killed is noted first
    (``server-died``, a rule), whichever scenario ran.
    """
    if REPLICATED in stage.target.capabilities:
        note_deaths(stage, as_replicated(stage.target))
    set_clock(stage, "+0")
    net = net_of(stage.target)
    if net is not None:
        await asyncio.to_thread(net.heal)
    for proxy in stage.proxies.values():
        proxy.delay = 0.0
        proxy.lose_downstream(False)
        proxy.refuse(False)
        proxy.resume()
    for proc in stage.workers.values():
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
    if stage.target.exit_code() is not None or stage.target.pid is None:
        await restart(stage)


def rotated(addresses: list[Address], index: int) -> list[Address]:
    """``addresses`` starting at the ``index``-th (modulo): workers spread over members."""
    shift = index % len(addresses)
    return addresses[shift:] + addresses[:shift]


async def stop_workers(workers: dict[int, subprocess.Popen[bytes]]) -> None:
    """Resume and SIGTERM every worker, then reap each (killed past :data:`WORKER_EXIT`)."""
    for proc in workers.values():
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.send_signal(signal.SIGTERM)

    def reap(proc: subprocess.Popen[bytes]) -> None:
        try:
            proc.wait(timeout=WORKER_EXIT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=WORKER_EXIT)

    await asyncio.gather(*(asyncio.to_thread(reap, proc) for proc in workers.values()))


async def run_scenario(
    scenario: Scenario,
    target: Target,
    work_dir: Path,
    *,
    seconds: float,
    seed: int = 1,
    bound: float | None = None,
    worker_launcher: tuple[str, ...] = ("-m", "tools.faults.worker"),
) -> Outcome:
    """Run ``scenario`` against ``target`` for ``seconds`` of faults (module docstring)."""
    bound = liveness_bound(scenario, target) if bound is None else bound
    history_dir = work_dir / "history"
    history_dir.mkdir(parents=True, exist_ok=True)
    rec = Recorder(history_dir / "harness.jsonl")
    rng = random.Random(seed)
    fence = FenceServer(rec)
    workers: dict[int, subprocess.Popen[bytes]] = {}
    proxies: dict[int, ProxyGroup] = {}
    stop_observer = asyncio.Event()
    observer_task: asyncio.Task[None] | None = None
    mounted = False
    try:
        await fence.start()
        if scenario.tmpfs:
            mount_tmpfs(target.data_dir)
            mounted = True
        if scenario.fsync_shim:
            target.env["LD_PRELOAD"] = str(await asyncio.to_thread(compile_shim, work_dir))
            target.env[TRIGGER_VARIABLE] = str(work_dir / "fsync-trigger")
        if scenario.power_shim:
            library = await asyncio.to_thread(compile_power_shim, work_dir)
            journal = work_dir / "power-journal"
            env = shim_env(
                library,
                target.data_dir,
                journal,
                torn=scenario.torn,
                writeback=KERNEL_WRITEBACK,
            )
            target.env.update(env)
        # The hostile-tenant scenario: tokens, and the large state they cannot see.
        tenancy = prepare(target, work_dir) if scenario.tokens else None
        await asyncio.to_thread(target.start)
        await create_node(target.url())
        if tenancy is not None:
            await fill(tenancy)
        if scenario.power_shim and scenario.cut_in_sync:
            # The shim's cut in a sync from the first restart on: the first life's
            # start and the node's creation are the setup, which no cut may fail (a
            # first start the shim cut failed the whole run, once in CI).
            target.env[CUT_IN_SYNC_VARIABLE] = str(scenario.cut_in_sync)
        keys = [f"m{k}" for k in range(scenario.keys)]
        labels: list[str] = []
        clock_files: dict[int, Path] = {}
        for index in range(scenario.workers):
            # Every address of the target (a cluster's members), each worker in its own
            # rotation, so that the clients spread over the members they start on.
            addresses = rotated(target.addresses, index)
            if scenario.proxied:
                proxies[index] = group = ProxyGroup(addresses)
                await group.start()
                addresses = group.addresses
            clock_file = None
            if index in scenario.clocks:
                clock_file = clock_files[index] = work_dir / f"clock-{index}.txt"
                clock_file.write_text("+0\n")
                rec.note(HARNESS, "role", worker=index, clock=scenario.clocks[index])
            url = target.url(addresses)
            if tenancy is not None:  # the honest clients' own token, not the admin's
                url = with_token(url.split("?")[0], HONEST.secret)
            config = WorkerConfig(
                index=index,
                url=url,
                node=NODE,
                keys=keys,
                clients=scenario.clients,
                window=scenario.window,
                hold=scenario.hold,
                history=str(history_dir / f"w{index}.jsonl"),
                fence_port=fence.port,
                seed=seed * 1000 + index,
                probe_every=scenario.probe_every,
            )
            labels += config.labels()
            path = work_dir / f"w{index}.json"
            config.dump(path)
            env = _worker_env(scenario, index, clock_file)
            workers[index] = spawn([*worker_launcher, str(path)], work_dir / f"w{index}.log", env)
        registers = [register_of(label) for label in labels]
        observer = Observer(target.url(), NODE, keys, registers, rec)
        observer_task = asyncio.create_task(observer.run(stop_observer))
        progress = Progress(history_dir)
        # A target without an idle timeout has nothing for the pause nemesis to wait for.
        idle_timeout = scenario.idle_timeout if IDLE_TIMEOUT in target.capabilities else 0.0
        stage = Stage(
            target, rec, rng, scenario.window, idle_timeout, observer,
            proxies=proxies, workers=workers, clock_files=clock_files,
            monotonic_clocks=frozenset(i for i, c in scenario.clocks.items() if c != "wall"),
            pausable=[i for i in range(scenario.workers) if i not in clock_files],
            owner_of=progress.worker_of, in_body=progress.in_body, tenancy=tenancy,
        )  # fmt: skip
        rec.note(
            HARNESS, "params",
            scenario=scenario.name, target=target.name, liveness_bound=bound, seconds=seconds,
            tokens=scenario.tokens, window=scenario.window,
        )  # fmt: skip
        await progress.wait(labels, since=now(), grants=1, until=now() + bound)
        rec.note(HARNESS, "faults-start")
        until = now() + seconds
        await asyncio.gather(*(NEMESES[name](stage, until) for name in scenario.nemeses))
        await sleep_until(until)  # a scenario without nemeses is a quiet run of that length
        await heal(stage)
        healed = now()
        rec.note(HARNESS, "heal", t=healed)
        await progress.wait(labels, since=healed, grants=1, until=healed + bound + 5.0)
        await observer.read_registers()
    finally:
        rec.note(HARNESS, "stop")
        await stop_workers(workers)
        stop_observer.set()
        if observer_task is not None:
            with contextlib.suppress(Exception):
                await observer_task
        for proxy in proxies.values():
            await proxy.aclose()
        await fence.aclose()
        await asyncio.to_thread(target.stop)
        if mounted:
            unmount(target.data_dir)
        rec.close()
    verdict = check(load(sorted(history_dir.glob("*.jsonl"))), work_dir / "lincheck")
    return Outcome(scenario.name, seconds, verdict, work_dir)
