"""Power loss: the data directory on a layer that keeps writes until they are durable.

The server preloads ``power_shim.c`` (compiled with gcc at run time, like the
fsync shim): every write to a file of the data directory stays in the server's
own memory until an fsync or fdatasync of that file, and a creation or rename
there is journalled (outside the directory) until the directory is fsynced. So
``kill -9`` of the server is a power cut for its data: the pending writes die
with the process, and :func:`undo_unsynced` then undoes every creation and rename
the directory never made durable. The shim's header says exactly what is and is
not modelled; ``TORN_VARIABLE`` and ``CUT_IN_SYNC_VARIABLE`` add torn tails,
``WRITEBACK_VARIABLE`` the kernel's writeback of ``--fsync off``.

The nemesis cuts the power every 1.5-4 s and restarts the server at once on what
the "disk" kept. The checker's rules judge the run (``--fsync always``: nothing
acknowledged is lost, no token repeats or goes back); :func:`losses` measures what
was lost, so that ``batch`` and ``off`` are held to what docs/operations.md
promises instead (:func:`allowance`).
"""

from __future__ import annotations

import asyncio
import bisect
import os
import shutil
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from tools.faults.history import History, now
from tools.faults.nemesis import Stage, restart

SHIM_SOURCE: Final = Path(__file__).with_name("power_shim.c")
#: The data directory whose writes the shim keeps.
DIR_VARIABLE: Final = "TENURE_POWER_DIR"
#: The file listing creations and renames not made durable by a directory fsync.
JOURNAL_VARIABLE: Final = "TENURE_POWER_JOURNAL"
#: Probability, per write, that a random subset of the pending pages reaches the disk.
TORN_VARIABLE: Final = "TENURE_POWER_TORN"
#: Seconds after which pending writes are written back (not synced), as the kernel does.
WRITEBACK_VARIABLE: Final = "TENURE_POWER_WRITEBACK"
#: Probability, per sync of a file with pending writes, that the power goes during it.
CUT_IN_SYNC_VARIABLE: Final = "TENURE_POWER_CUT_IN_SYNC"
#: The cut-in-sync probability the scenario uses: a commit is a sync, dozens a
#: second, so this cuts about once every few seconds at the worst moment.
CUT_IN_SYNC: Final = 0.002
#: The torn-tail probability the scenario uses: often enough that most cuts find
#: some pending pages already on disk.
TORN: Final = 0.3
#: Linux's dirty_expire_centisecs (30 s) plus one period of its flusher (5 s): how
#: old dirty pages can get before the kernel writes them back by itself.
KERNEL_WRITEBACK: Final = 35.0
#: How long scheduling on two shared cores may delay the server's batch fsync
#: beyond its interval (the syncer is a timer of the event loop).
SCHEDULING_SLACK: Final = 1.0


def compile_shim(out_dir: Path) -> Path:
    """Compile the power shim into ``out_dir``; its path. Raises if gcc fails or is missing."""
    gcc = shutil.which("gcc")
    if gcc is None:
        raise RuntimeError("gcc is missing (scripts/bootstrap installs it)")
    library = out_dir / "power_shim.so"
    command = [gcc, "-shared", "-fPIC", "-O2", "-o", str(library), str(SHIM_SOURCE)]
    subprocess.run([*command, "-ldl", "-lpthread"], check=True, capture_output=True, timeout=120)
    return library


def shim_env(
    library: Path,
    data_dir: Path,
    journal: Path,
    *,
    torn: float = 0.0,
    writeback: float | None = None,
) -> dict[str, str]:
    """The server's environment for the shim: ``LD_PRELOAD`` and its variables.

    All but the cut in a sync (:data:`CUT_IN_SYNC_VARIABLE`), which the harness adds
    once its setup is done (:func:`tools.faults.harness.run_scenario`).
    """
    env = {
        "LD_PRELOAD": str(library),
        DIR_VARIABLE: str(data_dir.resolve()),
        JOURNAL_VARIABLE: str(journal),
    }
    if torn:
        env[TORN_VARIABLE] = str(torn)
    if writeback is not None:
        env[WRITEBACK_VARIABLE] = str(writeback)
    return env


def undo_unsynced(journal: Path) -> int:
    """Undo, newest first, the creations and renames the journal still lists; how many.

    Run after the cut (the server dead): what its directory never made durable is
    gone, in the worst way possible (a created file vanishes, a renamed one is back
    under its old name, the file it replaced is back).
    """
    if not journal.exists():
        return 0
    lines = [line.split("\t") for line in journal.read_text().splitlines() if line]
    for entry in reversed(lines):
        if entry[0] == "C":
            Path(entry[1]).unlink(missing_ok=True)
        elif entry[0] == "R":
            old, new, kept = Path(entry[1]), Path(entry[2]), entry[3] == "1"
            if new.exists():
                os.replace(new, old)
            backup = Path(f"{new}.power-prev")
            if kept and backup.exists():
                os.replace(backup, new)
    journal.unlink()
    return len(lines)


#: Attempts at a start that the shim's cut in a sync may itself cut (each a cut).
START_ATTEMPTS: Final = 5


async def _cut(stage: Stage, journal: Path, fault: str) -> None:
    """Power off (kill -9, undo what the directory never synced), note ``fault``, power on.

    A start may itself be cut by the shim (a sync of the start's own writes): that
    is one more cut (``power-cut-in-sync``), and the start is tried again, at most
    :data:`START_ATTEMPTS` times; a start that fails otherwise is ``restart-failed``.
    """
    for _ in range(START_ATTEMPTS):
        await asyncio.to_thread(stage.target.kill)
        undone = await asyncio.to_thread(undo_unsynced, journal)
        stage.fault(fault, undone=undone)
        try:
            await asyncio.to_thread(stage.target.start)
        except (RuntimeError, OSError) as error:
            if stage.target.exit_code() == -signal.SIGKILL:
                fault = "power-cut-in-sync"
                continue
            stage.note("restart-failed", error=str(error))
            return
        stage.note("restart", pid=stage.target.pid)
        return
    await restart(stage)  # a last attempt, noted as any restart


async def power(stage: Stage, until: float) -> None:
    """Cut the power every 1.5-4 s: ``kill -9``, undo what was not durable, restart.

    With the shim's cut in a sync (:data:`CUT_IN_SYNC_VARIABLE`) the server may also
    die by itself, by SIGKILL, mid-sync: noticed within 0.1 s, noted as the fault
    ``power-cut-in-sync``, and handled as any cut. The last cut, at ``until``,
    turns that off, so that the heal phase and the stop run on a server that only
    buffers (and the harness's restarts need no undo).
    """
    journal = Path(stage.target.env[JOURNAL_VARIABLE])
    while now() < until:
        deadline = min(until, now() + stage.rng.uniform(1.5, 4.0))
        fault = "power-cut"
        while now() < deadline:
            await asyncio.sleep(0.1)
            if stage.target.exit_code() == -signal.SIGKILL:
                fault = "power-cut-in-sync"
                break
        if fault == "power-cut" and now() >= until:
            break
        await _cut(stage, journal, fault)
    if stage.target.env.pop(CUT_IN_SYNC_VARIABLE, None) is not None:
        await _cut(stage, journal, "power-cut")


def allowance(fsync: str, batch_interval: float = 0.05) -> float:
    """Seconds of acknowledged changes before a cut that ``fsync`` may lose.

    docs/operations.md: ``always`` loses nothing; ``batch`` "may lose the last
    interval of acknowledged changes" (plus :data:`SCHEDULING_SLACK`); ``off`` "may
    lose seconds": the kernel's writeback age (:data:`KERNEL_WRITEBACK`), which the
    scenario runs the shim with.
    """
    if fsync == "always":
        return 0.0
    if fsync == "batch":
        return batch_interval + SCHEDULING_SLACK
    return KERNEL_WRITEBACK + SCHEDULING_SLACK


@dataclass
class Losses:
    """What the cuts took: acknowledged grants and register updates a restart forgot."""

    cuts: int = 0
    #: Acknowledged grants (acquires that returned a token) and register updates.
    grants: int = 0
    acknowledged: int = 0
    #: Acknowledged grants whose token was handed out again after a cut.
    lost_grants: int = 0
    #: Acknowledged updates read back lower after a cut.
    lost: int = 0
    #: Per lost grant or update, seconds from its acknowledgement to the cut that lost it.
    ages: list[float] = field(default_factory=list)

    @property
    def oldest(self) -> float:
        """The oldest loss (seconds before its cut; 0 if nothing was lost)."""
        return max(self.ages, default=0.0)


def losses(history: History) -> Losses:
    """Measure the loss, of grants and of register updates.

    Grants: tokens come from one counter of the node and are never handed out
    twice, so a token acknowledged to two acquires means the restart forgot the
    first grant (and rolled the counter back). A grant acknowledged before a cut
    may also be acknowledged after it, when the answer was lost with the
    connection and the resumed session learns its lease: the same acquire, not
    a loss.

    Updates: for each register, the first read after each cut. An update
    acknowledged before the cut whose value is above what that read returned was
    lost by the cut (registers only grow). Reads are the observer's, about one a
    second per register: an update lost and overwritten by its client's next one
    before that read is not seen (the grants are the sharper measure).

    Each loss's age is the time from its acknowledgement to the cut that lost it.
    """
    cuts = sorted(
        note.t
        for note in history.notes_of("fault")
        if note.fields.get("fault") in ("power-cut", "power-cut-in-sync")
    )
    result = Losses(cuts=len(cuts))
    granted = sorted(
        (op.t1, op.token, op.process, op.t0)
        for op in history.of_kind("acquire")
        if op.outcome == "ok" and op.token is not None and op.t1 is not None
    )
    result.grants = len(granted)
    first: dict[int, tuple[float, str, float]] = {}
    for t1, token, process, t0 in granted:
        earlier = first.setdefault(token, (t1, process, t0))
        if earlier != (t1, process, t0):
            index = bisect.bisect_left(cuts, earlier[0])
            if index < len(cuts):
                result.lost_grants += 1
                result.ages.append(cuts[index] - earlier[0])
    updates: dict[str, list[tuple[float, int]]] = {}
    for op in history.of_kind("update"):
        if op.outcome == "ok" and op.t1 is not None:
            updates.setdefault(op.key or "", []).append((op.t1, int(op.value)))
            result.acknowledged += 1
    reads: dict[str, list[tuple[float, int]]] = {}
    for op in history.of_kind("read"):
        if op.outcome == "ok":  # a register read as missing lost everything
            value = 0 if op.value is None else int(op.value)
            reads.setdefault(op.key or "", []).append((op.t0, value))
    lost: set[tuple[str, float]] = set()
    for name, acked in updates.items():
        acked.sort()
        seen = sorted(reads.get(name, []))
        starts = [t for t, _ in seen]
        for cut in cuts:
            index = bisect.bisect_left(starts, cut)
            if index == len(seen):
                continue
            value = seen[index][1]
            for t1, written in acked:
                if t1 < cut and written > value and (name, t1) not in lost:
                    lost.add((name, t1))
                    result.lost += 1
                    result.ages.append(cut - t1)
    return result
