"""The soak: hours of mixed load and faults on one ``tenure serve``; what it keeps, sampled.

``scripts/faults --soak HOURS``. One server with every face open (native, dflockd,
YDB, HTTP), ``--fsync always``, on a data directory of its own; one load process of
each kind of :mod:`tools.faults.soak_load` (mutexes, a semaphore pool, watches,
elections, dflockd's client, YDB's SDK), each churning sessions and connections.

Faults, one every ``fault_every`` seconds (±30 %), in turn: a load process
``kill -9``-ed and started again (its sessions are left for the server to expire),
a load process stopped (SIGSTOP) past its sessions' recovery window then resumed,
the server stopped for a few seconds then resumed; and every ``crash_every``
seconds the server ``kill -9``-ed and restarted on its data. Crashes are rare on
purpose: a restart resets what a leak would have grown, so the server's memory is
judged over each of its lives (:mod:`tools.faults.soak_report`).

Every ``sample_every`` seconds: the server's RSS, open files and threads (from
``/proc``), the data directory's log and snapshot bytes, the engine's gauges and
open connections (``/metrics``), each load kind's operations so far and each
client's latest operation (when). No reading is taken while the server is stopped:
a stopped server cannot answer ``/metrics``, and waiting for it would stretch the
pause past what it is meant to be (a 3 s pause held for the reading's 5 s timeout
is a recovery window: every client gives its sessions up, rule 6a).

After the last fault the run waits, at most ``heal_within`` seconds, for every
client to work again (:meth:`Soak._heal`): how long the load takes to come back
depends on the machine (a restart, a window for the sessions nobody resumes to
expire, a timed-out acquire asked again), whether it comes back does not. At the
end :mod:`tools.faults.soak_report` judges that each quantity stayed bounded and
every client progressed, and writes the report (a page, its plot, the samples).
Everything stops by itself: the run lasts the hours asked (and, where a slow
machine left a kind of fault without its turn, one fault of each such kind more,
and the wait for the load to heal), every wait is bounded, the processes are
stopped by PID.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Final

from prometheus_client.parser import text_string_to_metric_families
from tests.server.wire import free_port

import tenure
from tools.faults.soak_load import CLIENT_NAMES, KINDS, STEP, WINDOW, SoakConfig
from tools.faults.soak_run import Fault, Sample, SoakRun
from tools.faults.target import REPO, TenureTarget

NODE: Final = "soak"
YDB_DATABASE: Final = "/local"
#: How long a stopped load process stays stopped: past its sessions' recovery window.
CLIENT_PAUSE: Final = WINDOW + 3.0
#: How long a stopped server stays stopped (clients' sessions ride it out).
SERVER_PAUSE: Final = 3.0
#: Bound of a load process's exit after SIGTERM (it closes its clients first).
LOAD_EXIT: Final = 40.0
#: The engine's gauges sampled from /metrics.
GAUGES: Final = ("sessions", "semaphores", "holds", "waiters", "watches")
#: How long, after the last fault, every client has to work again before it is
#: judged stuck: a step's bound (a request lost with its connection), two windows
#: (sessions restored by a restart that nobody resumes, holding what others wait
#: for, and the acquire that timed out behind them), with room for a loaded machine.
HEAL_WITHIN: Final = 2 * (STEP + 2 * WINDOW)


def _proc_status(pid: int) -> tuple[int, int]:
    rss = threads = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1])
        elif line.startswith("Threads:"):
            threads = int(line.split()[1])
    return rss, threads


def _data_sizes(data_dir: Path) -> tuple[int, int, int]:
    log = snapshot = total = 0
    for entry in os.scandir(data_dir):
        if not entry.is_file(follow_symlinks=False):
            continue
        # Allocated bytes, not the apparent size: the writer preallocates segments.
        size = entry.stat(follow_symlinks=False).st_blocks * 512
        total += size
        if entry.name.startswith("wal-"):
            log += size
        elif entry.name.startswith("snapshot-"):
            snapshot = max(snapshot, size)  # the newest is the one that counts
    return log, snapshot, total


def _metrics(http_port: int) -> tuple[int, dict[str, int]]:
    url = f"http://127.0.0.1:{http_port}/metrics"
    with urllib.request.urlopen(url, timeout=5.0) as answer:
        text = answer.read().decode()
    connections, gauges = 0, {}
    for family in text_string_to_metric_families(text):
        name = family.name.removeprefix("tenure_")
        if name == "connections":
            connections = int(sum(s.value for s in family.samples))
        elif name in GAUGES:
            gauges[name] = int(family.samples[0].value)
    return connections, gauges


class Soak:
    """The server, the load processes, the faults and the samples (module docstring)."""

    def __init__(
        self,
        work_dir: Path,
        *,
        seconds: float,
        fault_every: float,
        crash_every: float,
        sample_every: float,
        heal_within: float = HEAL_WITHIN,
        seed: int = 7,
        progress: Callable[[str], None] = lambda line: print(line, flush=True),
    ) -> None:
        self.work_dir = work_dir
        self.seconds = seconds
        self.fault_every = fault_every
        self.crash_every = crash_every
        self.sample_every = sample_every
        self.heal_within = heal_within
        self.rng = random.Random(seed)
        self.progress = progress
        self.dflockd_port, self.ydb_port, self.http_port = free_port(), free_port(), free_port()
        faces = [
            *("--dflockd-port", str(self.dflockd_port), "--ydb-port", str(self.ydb_port)),
            *("--http-port", str(self.http_port)),
        ]
        self.server = TenureTarget(work_dir / "data", extra_args=faces)
        self.config = SoakConfig(
            url=self.server.url(),
            node=NODE,
            dflockd=("127.0.0.1", self.dflockd_port),
            ydb_endpoint=f"grpc://127.0.0.1:{self.ydb_port}",
            ydb_database=YDB_DATABASE,
            seed=seed,
        )
        self.config_path = work_dir / "soak-config.json"
        self.stats_dir = work_dir / "stats"
        self.loads: dict[str, subprocess.Popen[bytes]] = {}
        self.generation: dict[str, int] = dict.fromkeys(KINDS, 0)
        self.began = 0.0
        self._next_sample = 0.0
        self.run = SoakRun(
            seconds=seconds,
            settings={
                "fault_every": fault_every,
                "crash_every": crash_every,
                "sample_every": sample_every,
                "recovery_window": WINDOW,
                "heal_within": heal_within,
            },
        )

    # -- processes ---------------------------------------------------------------------

    def _start_load(self, kind: str) -> None:
        self.generation[kind] += 1
        stats = self.stats_dir / f"{kind}-{self.generation[kind]}.json"
        with (self.work_dir / f"load-{kind}.log").open("ab") as log:
            self.loads[kind] = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tools.faults.soak_load",
                    str(self.config_path),
                    kind,
                    str(stats),
                ],
                cwd=REPO,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def _stop_loads(self) -> None:
        for process in self.loads.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGCONT)
                process.terminate()
        for process in self.loads.values():
            try:
                process.wait(timeout=LOAD_EXIT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=LOAD_EXIT)

    def _create_node(self) -> None:
        async def create() -> None:
            async with asyncio.timeout(60.0), tenure.connect(self.server.url()) as client:
                await client.create_node(NODE, exist_ok=True)

        asyncio.run(create())

    # -- faults ------------------------------------------------------------------------

    def _now(self) -> float:
        return time.monotonic() - self.began

    def _fault(self, kind: str, what: str) -> None:
        self.run.faults.append(Fault(round(self._now(), 2), kind, what))
        self.progress(f"{self._now():8.0f}s fault {kind}: {what}")

    def _client_kill(self) -> None:
        kind = self.rng.choice(KINDS)
        self._fault("client-kill", kind)
        self.loads[kind].kill()
        self.loads[kind].wait(timeout=LOAD_EXIT)
        self._start_load(kind)

    def _client_pause(self) -> None:
        kind = self.rng.choice(KINDS)
        self._fault("client-pause", kind)
        pid = self.loads[kind].pid
        os.kill(pid, signal.SIGSTOP)
        try:
            self._wait(CLIENT_PAUSE)
        finally:
            os.kill(pid, signal.SIGCONT)

    def _server_pause(self) -> None:
        pid = self.server.pid
        if pid is None:
            return
        self._fault("server-pause", f"{SERVER_PAUSE:g} s")
        os.kill(pid, signal.SIGSTOP)
        try:
            self._wait(SERVER_PAUSE, sample=False)  # (no reading of a stopped server)
        finally:
            os.kill(pid, signal.SIGCONT)

    def _server_crash(self) -> None:
        self._fault("server-crash", "kill -9, restart on its data")
        self.server.restart()

    # -- the run -----------------------------------------------------------------------

    def _wait(self, seconds: float, *, sample: bool = True) -> None:
        """Sleep ``seconds``, sampling on time meanwhile (unless not to ``sample``)."""
        if not sample:
            time.sleep(seconds)
            return
        until = time.monotonic() + seconds
        while (left := until - time.monotonic()) > 0:
            if self._now() >= self._next_sample:
                self._sample()
            time.sleep(min(left, max(0.0, self._next_sample - self._now()), 1.0))

    def _counts(self) -> tuple[dict[str, int], dict[str, int], dict[str, float]]:
        ops: dict[str, int] = dict.fromkeys(KINDS, 0)
        errors: dict[str, int] = {}
        last_op: dict[str, float] = {}
        for path in self.stats_dir.glob("*.json"):
            with contextlib.suppress(OSError, ValueError):  # replaced whole; may be new
                stats = json.loads(path.read_text())
                kind = path.stem.rsplit("-", 1)[0]
                ops[kind] += stats["ops"]
                for name, n in stats["errors"].items():
                    errors[name] = errors.get(name, 0) + n
                for index, at in stats["last"].items():  # (monotonic: this machine's clock)
                    client, when = f"{kind}-{index}", round(at - self.began, 2)
                    last_op[client] = max(last_op.get(client, when), when)
        return ops, errors, last_op

    def _sample(self) -> None:
        self._next_sample += self.sample_every
        if self._next_sample <= self._now():  # a slow reading: the next is a slot on, not at once
            self._next_sample = self._now() + self.sample_every
        pid = self.server.pid
        if pid is None:
            return
        try:
            rss, threads = _proc_status(pid)
            fds = len(os.listdir(f"/proc/{pid}/fd"))
            connections, gauges = _metrics(self.http_port)
        except (OSError, ValueError):  # stopped, restarting: no reading this time
            return
        log, snapshot, total = _data_sizes(self.server.data_dir)
        ops, errors, last_op = self._counts()
        self.run.samples.append(
            Sample(
                round(self._now(), 1),
                self.server.starts,
                rss,
                fds,
                threads,
                log,
                snapshot,
                total,
                connections,
                gauges,
                ops,
                errors,
                last_op,
            )
        )
        if len(self.run.samples) % 30 == 1:
            self.progress(
                f"{self._now():8.0f}s rss {rss / 1024:.1f} MiB, {fds} files, {connections} "
                f"connections, log {log / 2**20:.1f} MiB, ops {sum(ops.values())}"
            )

    def _owed_faults(self) -> None:
        """Inject, once each, the kinds of fault the run's time did not reach.

        A slow machine (a loaded CI runner: a restart or a pause taking longer than
        planned) can spend the run's seconds before every kind had its turn; a run
        that never paused the server has not tested what it reports. So the run goes
        past its duration by at most one fault of each missing kind, each bounded.
        """
        kinds = {
            "client-kill": self._client_kill,
            "client-pause": self._client_pause,
            "server-pause": self._server_pause,
            "server-crash": self._server_crash,
        }
        owed = [kind for kind in kinds if kind not in {f.kind for f in self.run.faults}]
        for kind in owed:
            self.progress(f"{self._now():8.0f}s past the duration: {kind} had no turn yet")
            self._wait(min(self.fault_every, 1.0))  # a reading between two faults
            self._inject(kinds[kind])

    def _inject(self, fault: Callable[[], None]) -> None:
        """Run ``fault``; note when it was over (the load must work again from there)."""
        count = len(self.run.faults)
        fault()
        if len(self.run.faults) > count:  # (a pause of a server not running is no fault)
            self.run.faults[-1].ended = round(self._now(), 2)

    def _heal(self) -> None:
        """Wait, sampling, until every client has worked since the last fault was over,
        ``heal_within`` seconds at most (those still waiting then are judged stuck)."""
        if not self.run.faults:
            return
        since = self.run.faults[-1].over
        until = time.monotonic() + self.heal_within
        while True:
            last_op = self._counts()[2]
            waiting = [c for c in CLIENT_NAMES if last_op.get(c, since) <= since]
            if not waiting or (left := until - time.monotonic()) <= 0:
                break
            self._wait(min(left, 1.0))
        if waiting:
            self.progress(
                f"{self._now():8.0f}s no operation since the last fault within "
                f"{self.heal_within:g}s: {', '.join(waiting)}"
            )

    def execute(self) -> SoakRun:
        """Run the soak for its seconds; always stops what it started."""
        self.stats_dir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(json.dumps(asdict(self.config)))
        self.server.start()
        try:
            self._create_node()
            for kind in KINDS:
                self._start_load(kind)
            self.began = time.monotonic()
            self._next_sample = 0.0
            turns = [self._client_kill, self._client_pause, self._server_pause]
            next_crash = self.crash_every
            turn = 0
            while (left := self.seconds - self._now()) > 0:
                self._wait(min(left, self.fault_every * self.rng.uniform(0.7, 1.3)))
                if self._now() >= self.seconds:
                    break
                if self._now() >= next_crash:
                    self._inject(self._server_crash)
                    next_crash += self.crash_every
                else:
                    self._inject(turns[turn % len(turns)])
                    turn += 1
            self._owed_faults()
            self._heal()
            self._sample()  # the last reading, under load
        finally:
            self._stop_loads()
            self.server.stop()
        return self.run
