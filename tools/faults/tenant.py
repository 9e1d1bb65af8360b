"""The hostile-tenant scenario's setup and nemesis (issue 37: no client can hurt another).

:func:`prepare` gives the target the scenario's tokens (:mod:`tools.faults.tokens`)
before it starts; :func:`fill` makes the large state once it serves: 10,000 nodes
of others (which ``mallory`` cannot see), ``mallory``'s own node of 20,000
semaphores, and the semaphores it queues on in its working node; and for issue 47's
abuses, a node of 60 groups of 1,000 members (held by a detached session of the
admin's) and the tenant's 2,000 deep rate-limiter resources (made by ``bulk``,
:func:`tools.faults.abuses_surfaces.fill_limiters`). The honest
clients are the suite's workers (:mod:`tools.faults.worker`) with the ``honest``
token, a short recovery window, and a probe: each client reads its register's
description every ``probe_every`` seconds and records how long the answer took
(``probe`` operations).

:func:`tenant` is the nemesis: it alternates *quiet* phases (:data:`QUIET` s; the
honest clients alone) and *hostile* phases, in which every abuse of
:mod:`tools.faults.abuses` (those of issue 47 included: detached prefix watches,
claims, deep YDB rate-limiter resources listed, long deadlock cycles, the dashboard's
view of a node of big groups) runs at once for :data:`HOSTILE` s, each bounded by its
own count too, then undoes what it made (in a process of its own, niced:
:mod:`tools.faults.hostile`). Each phase is noted (``phase``: which, its start and
end) and each abuse's answers (``abuse``: done, refused by quota, failed);
alternating spreads both kinds of phase over the same run, so that a machine that
gets busier or quieter meanwhile (other jobs on its two cores) weighs on both alike
(:mod:`tools.faults.check_tenant` compares their latencies). The server's resident
memory is sampled all along (``server-memory``: the peak, from the kernel's
``VmHWM``, and the resident size when the first hostile phase began), and its
``/metrics`` is read at the end for the quotas' own refusal counts
(``quota-metrics``: ``tenure_quota_refusals_total{quota,token}``, where the server
has it).

The bystander (issue 47): from before the first hostile phase to the end, one more
honest client holds the mutex :data:`BYSTANDER_LOCK` of the workload's node, its
session's recovery window :data:`BYSTANDER_WINDOW` (the issue's ``tenure lock
--recovery-window 3``): a stall of the server that long loses it. It notes
``bystander`` at the end (``kept``, and the loss if not):
:mod:`tools.faults.check_tenant` fails the run if it lost its lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import random
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Final, cast

from tests.server.wire import free_port

import tenure
from tenure.errors import AlreadyExistsError, TenureError
from tools.faults.abuse_kit import Tenant
from tools.faults.abuses_surfaces import fill_groups, fill_limiters
from tools.faults.history import now
from tools.faults.hostile import TENANT
from tools.faults.nemesis import Stage, sleep_until
from tools.faults.target import REPO, TOKENS, Target, TenureTarget, with_token
from tools.faults.tokens import (
    ADMIN,
    BIG_NODE,
    BIG_SEMAPHORES,
    CYCLE_NODE,
    GROUPS_NODE,
    HONEST,
    HONEST_NODE,
    JOBS_NODE,
    LIMITS_NODE,
    MAX_NODES,
    OTHER_NODES,
    OTHER_PREFIX,
    QUEUES,
    Tenancy,
    write_auth_file,
)

#: Seconds of a quiet phase, and of a hostile one (each abuse stops by then, then
#: undoes what it made).
QUIET: Final = 3.0
HOSTILE: Final = 5.0
#: Hostile phases a run has at least: the evidence its checks ask for
#: (tests/faults/test_scenarios.py). A run slowed down (a loaded machine: a phase's
#: process starting late) goes on past its duration for them, each phase bounded.
MIN_HOSTILE_PHASES: Final = 2
#: How long a hostile phase's process may run past :data:`HOSTILE` (its start, the
#: undoing of what it made) before it is killed and the run fails.
PHASE_GRACE: Final = 60.0
_PR_SET_PDEATHSIG: Final = 1
#: Seconds between two samples of the server's resident memory.
SAMPLE_EVERY: Final = 0.5
#: Requests at once while the large state is made, and the bound of making it all
#: (60,000 group members of issue 47 included: 13 s on an idle machine).
FILL_CONCURRENCY: Final = 64
FILL_TIMEOUT: Final = 240.0
#: The bystander's process label, its lock, and its session's recovery window
#: (module docstring).
BYSTANDER: Final = "bystander"
BYSTANDER_LOCK: Final = "bystander-lock"
BYSTANDER_WINDOW: Final = 3.0
_REFUSALS: Final = re.compile(
    r'^tenure_quota_refusals_total\{(?=[^}]*quota="([^"]*)")(?=[^}]*token="([^"]*)")[^}]*\}'
    r"\s+([0-9.e+]+)$",
    re.MULTILINE,
)


def prepare(target: Target, work_dir: Path) -> Tenancy:
    """Give ``target`` the scenario's auth file, ``--max-nodes`` and the YDB face's
    ``--ydb-port`` (before it starts)."""
    if TOKENS not in target.capabilities:
        raise TypeError(f"target {target.name} takes no auth file")
    server = cast(TenureTarget, target)
    server.use_tokens(write_auth_file(work_dir / "auth.toml"), ADMIN.secret)
    ydb_port = free_port()
    server.extra_args += ["--max-nodes", str(MAX_NODES), "--ydb-port", str(ydb_port)]
    assert server.http_port is not None
    host, port = server.address
    return Tenancy(url=f"tenure://{host}:{port}", http_port=server.http_port, ydb_port=ydb_port)


async def fill(tenancy: Tenancy) -> None:
    """Make the large state with the admin token (and ``bulk``'s resources: module
    docstring); bounded."""
    gate = asyncio.Semaphore(FILL_CONCURRENCY)

    async def node(client: tenure.Client, name: str) -> None:
        async with gate:
            with contextlib.suppress(AlreadyExistsError):
                await client.create_node(name)

    async def semaphore(session: tenure.Session, name: str) -> None:
        async with gate:
            await session.semaphore(name).create(1, exist_ok=True)

    async with asyncio.timeout(FILL_TIMEOUT):
        async with tenure.connect(with_token(tenancy.url, ADMIN.secret)) as client:
            names = [f"{OTHER_PREFIX}{i:05d}" for i in range(OTHER_NODES)]
            names += [JOBS_NODE, BIG_NODE, LIMITS_NODE, CYCLE_NODE, GROUPS_NODE]
            await asyncio.gather(*(node(client, name) for name in names))
            async with client.session(BIG_NODE) as session:
                await asyncio.gather(
                    *(semaphore(session, f"s{i:06d}") for i in range(BIG_SEMAPHORES))
                )
            async with client.session(JOBS_NODE) as session:
                await asyncio.gather(*(semaphore(session, f"queue-{i}") for i in range(QUEUES)))
        tenant = Tenant(tenancy.url, random.Random(0))
        await fill_groups(tenant, ADMIN.secret)
        await fill_limiters(tenant)


def _memory(pid: int | None) -> tuple[int, int]:
    """The resident size and its peak (VmRSS, VmHWM) of ``pid`` in KiB; 0s if gone."""
    rss = peak = 0
    if pid is None:
        return rss, peak
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
            elif line.startswith("VmHWM:"):
                peak = int(line.split()[1])
    return rss, peak


def quota_refusals(metrics: str) -> dict[str, int]:
    """``tenure_quota_refusals_total`` of a /metrics text: ``"quota token"`` -> count."""
    return {
        f"{quota} {token}": int(float(count))
        for quota, token, count in _REFUSALS.findall(metrics)
        if float(count) > 0
    }


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10.0) as answer:
        return cast(bytes, answer.read()).decode()


def _die_with_parent() -> None:
    """In the child: SIGTERM when the thread that started it dies (a killed harness)."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


async def _hostile(stage: Stage, tenancy: Tenancy, phase: int) -> None:
    """One hostile phase: :mod:`tools.faults.hostile`'s process, waited for (bounded)."""
    history = stage.recorder.path.parent
    args = [
        *(tenancy.url, str(stage.rng.getrandbits(32)), str(phase), str(HOSTILE)),
        str(history / f"tenant-{phase}.jsonl"),
        *(str(tenancy.http_port), str(tenancy.ydb_port)),
    ]
    with (history.parent / "tenant.log").open("ab") as log:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tools.faults.hostile", *args,
            cwd=REPO, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent,
        )  # fmt: skip
    try:
        async with asyncio.timeout(HOSTILE + PHASE_GRACE):
            code = await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    if code != 0:
        raise RuntimeError(f"the hostile phase {phase} exited {code} (see tenant.log)")


async def _bystander(stage: Stage, tenancy: Tenancy, done: asyncio.Event) -> None:
    """The bystander (module docstring): its lock held until ``done``, then noted."""
    kept, error = False, "never held"
    try:
        async with tenure.connect(with_token(tenancy.url, HONEST.secret)) as client:
            session = await client.session(HONEST_NODE, recovery_window=BYSTANDER_WINDOW)
            lock = await session.mutex(BYSTANDER_LOCK).lock()
            stage.recorder.note(BYSTANDER, "bystander-held", window=BYSTANDER_WINDOW)
            await done.wait()
            reason = lock.lost_reason
            kept, error = reason is None, repr(reason)
            with contextlib.suppress(TenureError, OSError, TimeoutError):
                async with asyncio.timeout(10.0):
                    await lock.release()
                    await session.close()
    except (TenureError, OSError, TimeoutError) as failure:
        error = repr(failure)
    stage.recorder.note(BYSTANDER, "bystander", kept=kept, error=None if kept else error)


async def tenant(stage: Stage, until: float) -> None:
    """The nemesis (module docstring): quiet and hostile phases in turn until ``until``.

    Ends with a quiet phase; a hostile phase starts only if it ends before ``until``.
    """
    tenancy = stage.tenancy
    if tenancy is None:
        raise RuntimeError("the tenant nemesis needs the scenario's tokens (tenant.prepare)")
    done = asyncio.Event()
    baseline = [0]

    async def sample() -> None:
        rss = peak = 0
        while not done.is_set():
            rss, peak = _memory(stage.target.pid)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(SAMPLE_EVERY):
                    await done.wait()
        stage.recorder.note(
            TENANT, "server-memory", peak_kib=max(peak, _memory(stage.target.pid)[1]),
            before_kib=baseline[0], rss_kib=rss,
        )  # fmt: skip

    sampler = asyncio.create_task(sample())
    bystander = asyncio.create_task(_bystander(stage, tenancy, done))
    phase = 0
    try:
        while True:
            start = now()
            owed = phase < MIN_HOSTILE_PHASES  # (then the duration does not end it)
            await sleep_until(start + QUIET if owed else min(until, start + QUIET))
            stage.recorder.note(TENANT, "phase", phase="quiet", start=start, end=now())
            if not owed and now() + HOSTILE > until:
                break
            if not baseline[0]:
                baseline[0] = _memory(stage.target.pid)[0]
            stage.fault("hostile-tenant", phase=phase)
            await _hostile(stage, tenancy, phase)
            phase += 1
    finally:
        done.set()
        await sampler
        await bystander
    try:
        metrics = await asyncio.to_thread(_scrape, tenancy.http_port)
    except OSError as error:
        stage.recorder.note(TENANT, "quota-metrics", error=repr(error))
        return
    stage.recorder.note(
        TENANT, "quota-metrics", refusals=quota_refusals(metrics),
        served="tenure_quota_refusals_total" in metrics,
    )  # fmt: skip
