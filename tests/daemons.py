"""Server processes the tests start (redis-server, postgres): spawn, stop, kill, track.

Each server runs in a session of its own (a Ctrl-C of the run does not reach it);
a stop or a kill reaches the processes it forked too (PostgreSQL's backends, a
Redis rewrite child), so that none outlives the test. A :class:`Registry` tracks
every server started through it; :meth:`Registry.kill_all` SIGKILLs what is left
(the fixtures call it when the run ends, each registry also at the interpreter's
exit).

Every wait is bounded (:data:`STOP_WAIT`); a process that outlives SIGTERM (or
SIGINT) by that long is SIGKILLed.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final, NamedTuple

__all__ = ["POLL", "STOP_WAIT", "Process", "Registry", "log_tail", "process_tree"]

#: How long a server may take to exit after its stop signal before SIGKILL, in seconds.
STOP_WAIT: Final = 10.0
#: Pause between two looks at a server that is starting or exiting, in seconds.
POLL: Final = 0.05


def _stat(pid: int) -> tuple[str, int, int] | None:
    """``(state, ppid, start time)`` of process ``pid`` from /proc, None when gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        # "pid (comm) state ppid ... starttime ...": comm may hold spaces and parentheses.
        fields = stat[stat.rindex(")") + 2 :].split()
        return fields[0], int(fields[1]), int(fields[19])
    except (OSError, ValueError, IndexError):
        return None


class Process(NamedTuple):
    """One process, told apart from a later one of the same PID by its start time."""

    pid: int
    start_time: int

    def alive(self) -> bool:
        """Whether it still runs (a zombie does not: it holds no port and no file)."""
        stat = _stat(self.pid)
        return stat is not None and stat[0] != "Z" and stat[2] == self.start_time

    def kill(self) -> None:
        """SIGKILL it, if it is still this process."""
        if self.alive():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(self.pid, signal.SIGKILL)


def process_tree(pid: int) -> set[Process]:
    """Process ``pid`` and its live (not zombie) descendants, as of now.

    PostgreSQL's backends each call setsid(), so no process group holds them; and
    once the postmaster is killed they are reparented, out of our reach: the tree
    is read before a signal, and each process named by PID and start time (a PID
    may be reused by the time we look again).
    """
    children: dict[int, list[int]] = {}
    started: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := _stat(int(entry))) is not None and stat[0] != "Z":
            children.setdefault(stat[1], []).append(int(entry))
            started[int(entry)] = stat[2]
    tree: set[Process] = set()
    todo = [pid] if pid in started else []
    while todo:
        current = todo.pop()
        tree.add(Process(current, started[current]))
        todo += children.get(current, [])
    return tree


def log_tail(path: Path, size: int = 3000) -> str:
    """The last ``size`` characters of a server's log ("" when unreadable)."""
    with contextlib.suppress(OSError):
        return path.read_text(errors="replace")[-size:]
    return ""


class Registry:
    """The server processes of one kind started by this run."""

    def __init__(self, kind: str) -> None:
        """``kind`` names them in messages (``"redis-server"``)."""
        self.kind = kind
        self._live: dict[int, subprocess.Popen[bytes]] = {}
        self._lock = threading.Lock()
        atexit.register(self.kill_all)

    def live_pids(self) -> set[int]:
        """PIDs of the servers started here and not yet ended."""
        with self._lock:
            return set(self._live)

    def spawn(
        self,
        argv: Sequence[str],
        *,
        log_path: Path,
        cwd: Path,
        env: Mapping[str, str] | None = None,
        user: int | None = None,
        group: int | None = None,
    ) -> subprocess.Popen[bytes]:
        """Start ``argv`` in a new session, its output appended to ``log_path``.

        ``user``/``group``: the uid/gid to run as (PostgreSQL refuses root); the
        process is then the server itself, not a ``runuser`` in front of it, so its
        PID is the one to signal.
        """
        with log_path.open("ab") as log:
            log.write(f"== {' '.join(argv)}\n".encode())
            log.flush()
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                env=None if env is None else dict(env),
                start_new_session=True,
                user=user,
                group=group,
                extra_groups=[] if user is not None else None,
            )
        with self._lock:
            self._live[proc.pid] = proc
        return proc

    def end(self, proc: subprocess.Popen[bytes], signum: int) -> None:
        """Send ``signum`` to the server, wait until it and its descendants are gone.

        SIGKILL goes to every process of the tree at once (a crash: nothing runs
        on); any other signal to the server only, which shuts down in order, with
        SIGKILL to all after :data:`STOP_WAIT`. No-op on an ended process.
        """
        if signum == signal.SIGKILL and proc.poll() is None:
            # Stopped first, so that it forks nothing between the tree's reading and
            # the kill: PostgreSQL's postmaster forks a child per connection (also to
            # refuse one during recovery), and a child forked after the reading was
            # missed, outlived it with the shared memory attached, and the restart
            # refused ("pre-existing shared memory block is still in use").
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGSTOP)
        tree = process_tree(proc.pid) if proc.poll() is None else set()
        if signum == signal.SIGKILL:
            for process in tree:
                process.kill()
        elif proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signum)
        try:
            proc.wait(timeout=STOP_WAIT)
        except subprocess.TimeoutExpired:
            for process in tree | process_tree(proc.pid):
                process.kill()
            proc.wait(timeout=STOP_WAIT)
        self._end_tree(tree)
        with self._lock:
            self._live.pop(proc.pid, None)

    @staticmethod
    def _end_tree(tree: set[Process]) -> None:
        """SIGKILL what is left of ``tree``, wait (bounded) until none of it is alive."""
        deadline = time.monotonic() + STOP_WAIT
        while left := {process for process in tree if process.alive()}:
            for process in left:
                process.kill()
            if time.monotonic() > deadline:
                raise AssertionError(f"processes {sorted(left)} alive {STOP_WAIT}s after SIGKILL")
            time.sleep(POLL)

    def kill_all(self) -> set[int]:
        """SIGKILL every server started here and not ended (and its tree); their PIDs."""
        with self._lock:
            procs = list(self._live.values())
        for proc in procs:
            self.end(proc, signal.SIGKILL)
        return {proc.pid for proc in procs}
