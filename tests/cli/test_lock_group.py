"""``tenure lock``: nothing of the command outlives the lock (issue 28).

The command runs in a process group of its own under a guard; its grandchildren
end with it, on exit, on loss and when ``tenure lock`` itself is killed (-9).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

from tests.cli.support import OnTerminal, finish, run_tenure, start_tenure, wait_for_line
from tests.cli.test_lock import waiters_of
from tests.server.wire import ServerProcess

#: A command that starts two grandchildren (one ignoring SIGTERM), says their pids and
#: its process group, then waits (or exits at once with EXIT set).
FAMILY = (
    "import os, signal, subprocess, sys, time\n"
    "quiet = dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
    "plain = subprocess.Popen(['sleep', '30'], **quiet)\n"
    "deaf = subprocess.Popen(['sleep', '31'], **quiet,"
    " preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_IGN))\n"
    "print('family', plain.pid, deaf.pid, os.getpgrp(), flush=True)\n"
    "if os.environ.get('EXIT'): sys.exit(0)\n"
    "time.sleep(20)\n"
)
#: A command that prints which of the pids in its arguments are alive.
CHECK = (
    "import sys\n"
    "def alive(pid):\n"
    "    try:\n"
    "        with open(f'/proc/{pid}/stat', 'rb') as stat:\n"
    "            return stat.read().rsplit(b')', 1)[1].split()[0] not in (b'Z', b'X')\n"
    "    except OSError:\n"
    "        return False\n"
    "print('alive:', [pid for pid in map(int, sys.argv[1:]) if alive(pid)], flush=True)\n"
)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not: it has ended, only unreaped)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except OSError:
        return False


def group_members(group: int) -> list[int]:
    """The live processes of process group ``group``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as stat:
                    fields = stat.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == group and fields[0] not in (b"Z", b"X"):
                found.append(int(entry))
    return found


def family_of(line: str) -> tuple[list[int], int]:
    """The grandchildren's pids and the command's process group from its ``family`` line."""
    plain, deaf, group = map(int, line.split()[1:])
    return [plain, deaf], group


def assert_all_end(pids: list[int], group: int, within: float = 5.0) -> None:
    """Every pid, and the whole process group, ends within ``within`` seconds; kills what
    is left either way, so that a failed test leaves nothing behind."""
    try:
        assert group != os.getpgrp(), "the command ran in tenure's (and the test's) group"
        deadline = time.monotonic() + within
        while any(map(alive, pids)) or group_members(group):
            assert time.monotonic() < deadline, (
                f"still running: {[p for p in pids if alive(p)]}, group {group_members(group)}"
            )
            time.sleep(0.02)
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def discard(proc: subprocess.Popen[str]) -> None:
    """Kill a background ``tenure`` if it still runs, and close its pipes."""
    proc.kill()
    proc.wait(timeout=10)
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


def test_what_the_command_leaves_behind_ends_with_it(url: str, node: str) -> None:
    # The deaf grandchild ignores SIGTERM: it is killed once the grace has passed.
    result = run_tenure(
        "lock", "job", "--node", node, "--create-node",
        "--grace", "0.3", "--", sys.executable, "-c", FAMILY,
        url=url, EXIT="1",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    pids, group = family_of(result.stdout.splitlines()[0])
    assert_all_end(pids, group, within=3.0)


def test_a_loss_ends_the_whole_group(tenure_server: ServerProcess) -> None:
    url = f"tenure://127.0.0.1:{tenure_server.port}"
    holder = start_tenure(
        "lock", "job", "--recovery-window", "1", "--grace", "0.3",
        "--", sys.executable, "-c", FAMILY, url=url,
    )  # fmt: skip
    try:
        pids, group = family_of(wait_for_line(holder, "family"))
        tenure_server.kill()  # the session is lost once its window passes
        status, _, err = finish(holder)
        assert status == 4, err
        # By the time tenure has exited, the group is gone: nothing runs unlocked.
        assert_all_end(pids, group, within=0.5)
    finally:
        discard(holder)


def test_kill_9_of_tenure_ends_the_command_before_the_next_holder_runs(url: str, node: str) -> None:
    holder = start_tenure(
        "lock", "job", "--node", node, "--create-node", "--recovery-window", "1",
        "--", sys.executable, "-c", FAMILY, url=url,
    )  # fmt: skip
    waiter = None
    pids: list[int] = []
    try:
        pids, group = family_of(wait_for_line(holder, "family"))
        waiter = start_tenure(
            "lock", "job", "--node", node, "--create-node", "--", sys.executable, "-c", CHECK,
            *map(str, [*pids, *group_members(group)]), url=url,
        )  # fmt: skip
        assert len(waiters_of(url, node, "job", until=1)) == 1
        holder.kill()  # kill -9: no chance to pass anything on
        holder.wait(timeout=10)
        # The next holder runs once the session's window (1 s) has passed; by then
        # nothing of the first command may run.
        status, out, err = finish(waiter)
        assert status == 0, err
        assert "alive: []" in out, out
        assert_all_end(pids, group, within=0.5)
    finally:
        discard(holder)
        if waiter is not None:
            discard(waiter)
        for pid in pids:  # whatever a failure left behind
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_a_command_at_a_terminal_may_still_read_it(tenure_executable: object) -> None:
    # Its own process group would be a background one, stopped (SIGTTIN) by a read:
    # the guard hands it the terminal, and tenure takes the terminal back after.
    read = "import sys; print('ready', flush=True); print('got', sys.stdin.readline().strip())"
    at_terminal = OnTerminal("lock", "job", "--", sys.executable, "-c", read, url="memory://")
    try:
        at_terminal.wait_for("ready")
        os.write(at_terminal.terminal, b"typed\n")
        at_terminal.wait_for("got typed")
    finally:
        status = at_terminal.close()
    assert status == 0, at_terminal.seen
