"""The soak (tools/faults/soak.py): its rule of boundedness, and a short run end to end.

The long run (``scripts/faults --soak 2``) is in docs/reliability.md; here the rule
is held to what it must catch (a leak, slow or reset by restarts; a client that
stopped working) and let pass (a flat line, a sawtooth), and a run of seconds checks
that every load kind works against a real server through every fault kind, and that
the report is written; another, that a pool whose tokens are never given back is
named however the machine runs.
"""

from __future__ import annotations

import math
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from tools.faults import soak as soak_module
from tools.faults import soak_report
from tools.faults.soak import NODE, Soak
from tools.faults.soak_load import CLIENT_NAMES, KINDS
from tools.faults.soak_run import Fault, Sample, SoakRun
from tools.faults.target import REPO

pytestmark = pytest.mark.timeout(180)

MIB = 1024  # RSS is in KiB


def _run(rss: list[float], lives: list[int] | None = None, every: float = 10.0) -> SoakRun:
    lives = lives or [1] * len(rss)
    samples = [
        Sample(
            t=n * every,
            life=life,
            rss_kib=int(value),
            fds=40,
            threads=13,
            log_bytes=2**20,
            snapshot_bytes=4096,
            data_bytes=2**20,
            connections=20,
            gauges={"sessions": 30},
            ops=dict.fromkeys(KINDS, n * 10),
            last_op=dict.fromkeys(CLIENT_NAMES, n * every),
        )
        for n, (value, life) in enumerate(zip(rss, lives, strict=True))
    ]
    return SoakRun(seconds=len(rss) * every, settings={"sample_every": every}, samples=samples)


def _rss_checks(run: SoakRun) -> list[soak_report.Check]:
    return [c for c in soak_report.judge(run) if c.quantity == "rss_kib"]


def test_a_flat_line_and_a_sawtooth_are_bounded() -> None:
    hour = 360  # samples of 10 s
    flat = _run([80 * MIB] * hour)
    saw = _run([80 * MIB + (n % 60) * 0.3 * MIB for n in range(hour)])
    for run in (flat, saw):
        checks = soak_report.judge(run)
        assert checks
        assert all(c.ok for c in checks), [c for c in checks if not c.ok]
        assert soak_report.stalled(run) == []


def test_a_slow_leak_is_not_bounded() -> None:
    # 20 MiB an hour on 80 MiB: past +10 % and 4 MiB between the thirds of 2 hours.
    leak = _run([80 * MIB + n * (20 * MIB / 360) for n in range(720)])
    [check] = _rss_checks(leak)
    assert not check.ok
    assert math.isclose(check.per_hour, 20 * MIB, rel_tol=0.01)


def test_a_leak_that_each_restart_resets_is_caught_per_life() -> None:
    # Three lives of 40 min, each growing 30 MiB from 80: every life peaks alike,
    # so only the per-life rule sees it.
    per_life = 240
    rss = [80 * MIB + (n % per_life) * (30 * MIB / per_life) for n in range(3 * per_life)]
    lives = [1 + n // per_life for n in range(3 * per_life)]
    checks = _rss_checks(_run(rss, lives))
    assert [c.stretch for c in checks] == ["life 1", "life 2", "life 3"]
    assert not any(c.ok for c in checks)


def test_a_client_that_stopped_is_named() -> None:
    run = _run([80 * MIB] * 90)
    for sample in run.samples[60:]:
        sample.ops["ydb"] = run.samples[59].ops["ydb"]
        sample.last_op["ydb-1"] = run.samples[59].t
    assert soak_report.stalled(run) == ["ydb-1"]


def test_a_client_idle_since_the_last_fault_is_named() -> None:
    # It worked in the last third (from 593 s on) but not after the server's crash,
    # which was over at 712 s: what the crash did to it is what is judged.
    run = _run([80 * MIB] * 90)
    run.faults = [Fault(700.0, "server-crash", "kill -9, restart on its data", ended=712.0)]
    for sample in run.samples[65:]:
        sample.ops["semaphores"] = run.samples[64].ops["semaphores"]
        for n in range(4):
            sample.last_op[f"semaphores-{n}"] = run.samples[64].t
    assert soak_report.progress_since(run) == 712.0
    assert soak_report.stalled(run) == [f"semaphores-{n}" for n in range(4)]


def test_a_server_pause_takes_no_reading_so_lasts_its_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A reading asks the stopped server's /metrics, which waits its 5 s timeout: a
    # 3 s pause held that long was a recovery window, every client gave its sessions
    # up, and the crash after it restored them with the pool's tokens, for another
    # window (the short soak's semaphores, flat to the end).
    run = Soak(tmp_path, seconds=1.0, fault_every=1.0, crash_every=60.0, sample_every=0.01)
    events: list[str] = []
    run.server = types.SimpleNamespace(pid=4242)  # type: ignore[assignment]
    fake_os = types.SimpleNamespace(kill=lambda pid, sig: events.append(f"{sig.name} {pid}"))
    monkeypatch.setattr(soak_module, "os", fake_os)
    monkeypatch.setattr(soak_module, "SERVER_PAUSE", 0.2)
    monkeypatch.setattr(run, "_sample", lambda: events.append("reading"))
    run.began = time.monotonic()  # (a reading is due from the start)
    run._server_pause()
    assert events == ["SIGSTOP 4242", "SIGCONT 4242"]
    [fault] = run.run.faults
    assert fault.kind == "server-pause"


def test_a_short_soak_runs_every_load_and_fault_and_writes_its_report(tmp_path: Path) -> None:
    # The time gives two turns; the server's pause and crash come after it, as owed
    # (the rule that keeps a loaded machine's short run testing every fault), and the
    # run then waits for every client to work again after the crash: a loaded machine
    # slows that (a restart, sessions nobody resumes holding the pool for a window),
    # and the judgement is then of what came back, not of how fast.
    soak = Soak(tmp_path / "work", seconds=8.0, fault_every=3.0, crash_every=60.0, sample_every=1.0)
    run = soak.execute()
    assert [f.kind for f in run.faults] == [
        "client-kill",
        "client-pause",
        "server-pause",
        "server-crash",
    ]
    assert all(f.t >= 8.0 for f in run.faults[2:])
    assert soak.server.exit_code() is not None  # stopped
    assert {f.kind for f in run.faults} == {
        "client-kill",
        "client-pause",
        "server-pause",
        "server-crash",
    }
    assert {s.life for s in run.samples} == {1, 2}
    last = run.samples[-1]
    assert all(s.rss_kib > 0 and s.fds > 0 and s.threads > 0 for s in run.samples)
    assert last.log_bytes > 0
    assert last.gauges["sessions"] > 0
    assert last.connections > 0
    assert all(last.ops[kind] > 0 for kind in KINDS), last.ops
    assert all(f.ended is not None and f.ended >= f.t for f in run.faults)
    assert soak_report.stalled(run) == [], (run.faults, last.last_op, last.ops)
    page = tmp_path / "soak.md"
    soak_report.write(run, tmp_path, "today", "abc1234", page_path=page)
    text = page.read_text()
    assert "**Verdict: bounded.**" in text
    assert "![the soak's samples](soak.png)" in text
    assert (tmp_path / "soak.png").read_bytes().startswith(b"\x89PNG")
    again = SoakRun.load(tmp_path / "soak.json")
    assert again.samples == run.samples
    assert again.faults == run.faults


#: Takes the pool's 3 tokens in a session of a 600 s window, then dies without a
#: word: the server keeps them for the window, a restart gives it a fresh one.
_LEAK = """
import asyncio, os, signal, sys
import tenure

async def leak(url, node):
    client = await tenure.connect(url)
    session = await client.session(node, recovery_window=600.0, description="leak")
    await session.semaphore("pool").create(3, exist_ok=True)
    await session.semaphore("pool").acquire(3)
    print("held", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)

asyncio.run(leak(*sys.argv[1:]))
"""


class _LeakedPool(Soak):
    """A soak whose semaphores' pool is full from the start, for good."""

    def _create_node(self) -> None:
        super()._create_node()
        leak = subprocess.run(
            [sys.executable, "-c", _LEAK, self.server.url(), NODE],
            cwd=REPO,
            capture_output=True,
            timeout=60,
            check=False,
        )
        assert (leak.returncode, leak.stdout) == (-signal.SIGKILL, b"held\n"), leak


def test_a_pool_whose_tokens_leaked_is_named(tmp_path: Path) -> None:
    # Every semaphores client waits on the pool, times out, asks again: it works
    # on, and makes no progress. The run gives it its time to heal, then names it.
    lines: list[str] = []
    leaked = _LeakedPool(
        tmp_path / "work",
        seconds=8.0,
        fault_every=3.0,
        crash_every=60.0,
        sample_every=1.0,
        heal_within=15.0,
        progress=lines.append,
    )
    run = leaked.execute()
    last = run.samples[-1]
    assert last.ops["semaphores"] == 0, last.ops
    clients = [f"semaphores-{n}" for n in range(4)]
    assert set(clients) <= set(soak_report.stalled(run))
    [waited] = [line for line in lines if "no operation since the last fault" in line]
    assert "within 15s" in waited  # it was given its time first
    assert all(client in waited for client in clients), waited
