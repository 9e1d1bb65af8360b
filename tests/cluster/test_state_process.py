"""How a cluster leader starts the process that makes its snapshots and backups
(issue 51: at a million holds no step of a snapshot may keep the leader's loop for
more than 50 ms)."""

from __future__ import annotations

import re
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tenure.server._cluster.state_process import spawn

#: strace, told to write the calls that start a process or a thread to a file.
STRACE = ("strace", "-f", "-e", "trace=fork,vfork,clone,clone3", "-o")
#: A leader's loop (uvloop, as ``tenure serve`` runs) spawning a state process told
#: something it cannot do; it prints the exit code and the reason.
SPAWNING = textwrap.dedent(
    """
    import asyncio, uvloop
    from tenure.server._cluster.state_process import spawn

    async def main():
        process = await spawn({"act": "snapshot", "cluster": "not a url"})
        out, err = await process.communicate()
        print(process.returncode, err.decode().strip().splitlines()[-1])

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(main())
    """
)


def test_the_state_process_is_started_without_copying_the_leaders_memory(
    tmp_path: Path,
) -> None:
    """A fork copies the parent's page tables while its loop waits (67 ms for a parent
    of 1.2 GB, uvloop's spawn): the process is started by a vfork (or a clone sharing
    the parent's memory) that execs at once, and still reports as before."""
    if shutil.which("strace") is None:
        pytest.skip("no strace on this machine")
    traced = tmp_path / "trace"
    done = subprocess.run(
        [*STRACE, str(traced), sys.executable, "-c", SPAWNING],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if not traced.exists() or "Operation not permitted" in done.stderr:
        pytest.skip(f"strace cannot trace here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    code, reason = done.stdout.strip().split(" ", 1)
    assert code == "1"
    assert reason.startswith("the cluster's snapshot failed:")
    calls = [line for line in traced.read_text().splitlines() if re.search(r"fork\(|clone", line)]
    starts = [line for line in calls if "CLONE_THREAD" not in line]  # (threads share memory)
    assert starts, calls  # (the process was started: by one of these calls)
    copying = [line for line in starts if "vfork(" not in line and "CLONE_VM" not in line]
    assert not copying, copying


async def test_a_spawned_process_killed_reports_its_signal() -> None:
    """A snapshot given up (the leader steps down) kills its process: its exit is heard,
    and its pipes end."""
    with socket.create_server(("127.0.0.1", 0)) as silent:  # (accepts, never answers)
        port = silent.getsockname()[1]
        process = await spawn({"act": "snapshot", "cluster": f"etcd://127.0.0.1:{port}/x"})
        assert process.returncode is None
        process.kill()
        out, _ = await process.communicate()
    assert out == b""
    assert process.returncode == -signal.SIGKILL
    assert await process.wait() == -signal.SIGKILL
