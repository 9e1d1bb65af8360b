"""Disk faults: a full disk (a small tmpfs as the data directory) and a failing fsync.

Both need a target whose state lives in ``data_dir`` (capability ``data-dir``);
the fsync fault also needs a server that honours ``LD_PRELOAD`` (``preload``).
The rule both check is the journal's: a server that cannot make a change durable
must stop (exit non-zero) rather than acknowledge it. Each fault ends with the
server restarted on its data once the disk is healthy again, after which the
durability checker finds every acknowledged write.

Mounting needs root (CI runs as root); :func:`mount_tmpfs` raises if the mount
fails, and :func:`unmount` is called in the harness's cleanup.
"""

from __future__ import annotations

import asyncio
import errno
import shutil
import subprocess
from pathlib import Path
from typing import Final

from tools.faults.history import now
from tools.faults.nemesis import Stage, restart

#: The environment variable naming the trigger file of the fsync shim.
TRIGGER_VARIABLE: Final = "TENURE_FAULTS_FSYNC_TRIGGER"
SHIM_SOURCE: Final = Path(__file__).with_name("fsync_shim.c")
#: Size of the tmpfs data directory (ample for a log between snapshots).
TMPFS_SIZE: Final = "64m"
#: How long a server may run on after a disk fault before that counts as a failure.
STOP_WAIT: Final = 20.0
FILLER: Final = "filler"


def compile_shim(out_dir: Path) -> Path:
    """Compile the fsync shim into ``out_dir``; its path. Raises if gcc fails or is missing."""
    gcc = shutil.which("gcc")
    if gcc is None:
        raise RuntimeError("gcc is missing (scripts/bootstrap installs it)")
    library = out_dir / "fsync_shim.so"
    command = [gcc, "-shared", "-fPIC", "-O2", "-o", str(library), str(SHIM_SOURCE), "-ldl"]
    subprocess.run(command, check=True, capture_output=True, timeout=120)
    return library


def mount_tmpfs(path: Path, size: str = TMPFS_SIZE) -> None:
    """Mount a tmpfs of ``size`` on ``path`` (created if missing). Raises if it fails."""
    path.mkdir(parents=True, exist_ok=True)
    command = ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(path)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        raise RuntimeError(f"cannot mount a tmpfs on {path}: {result.stderr.strip()}")


def unmount(path: Path) -> None:
    """Unmount ``path`` if it is a mount point (lazily, so a straggler cannot block it)."""
    if path.is_mount():
        subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=60)


def fill(path: Path) -> int:
    """Write a file in ``path`` until the file system is full; the bytes written."""
    written = 0
    chunk = b"\0" * (1 << 20)
    with (path / FILLER).open("wb", buffering=0) as file:
        while len(chunk) >= 512:
            try:
                written += file.write(chunk)
            except OSError as error:
                if error.errno != errno.ENOSPC:
                    raise
                chunk = chunk[: len(chunk) // 2]
    return written


async def _wait_exit(stage: Stage, seconds: float) -> int | None:
    deadline = now() + seconds
    while now() < deadline:
        code = stage.target.exit_code()
        if code is not None:
            return code
        await asyncio.sleep(0.05)
    return stage.target.exit_code()


async def _after_fault(stage: Stage, name: str, started: float) -> None:
    """Wait for the server to stop, record how, and restart it once the disk is healed."""
    code = await _wait_exit(stage, STOP_WAIT)
    stopped = code is not None
    stage.note("server-exit", fault=name, exit_code=code, stopped=stopped, after=now() - started)
    if not stopped:
        await asyncio.to_thread(stage.target.kill)


async def _full_disk(stage: Stage) -> None:
    data_dir = stage.target.data_dir
    started = stage.fault("disk-full")
    try:
        await asyncio.to_thread(fill, data_dir)
        await _after_fault(stage, "disk-full", started)
    finally:
        await asyncio.to_thread((data_dir / FILLER).unlink, missing_ok=True)


async def _failing_fsync(stage: Stage) -> None:
    # The target's environment preloads the shim with TRIGGER_VARIABLE set (the
    # harness does so for scenarios with this nemesis).
    trigger = Path(stage.target.env[TRIGGER_VARIABLE])
    started = stage.fault("fsync-eio")
    try:
        await asyncio.to_thread(trigger.touch)
        await _after_fault(stage, "fsync-eio", started)
    finally:
        await asyncio.to_thread(trigger.unlink, missing_ok=True)


async def disk(stage: Stage, until: float) -> None:
    """Every 4-8 s, a full disk or a failing fsync (in turn); heal it, restart the server."""
    faults = [_full_disk, _failing_fsync]
    turn = 0
    while now() < until:
        await asyncio.sleep(stage.rng.uniform(4.0, 8.0))
        if now() >= until:
            break
        await faults[turn % len(faults)](stage)
        turn += 1
        await restart(stage)
