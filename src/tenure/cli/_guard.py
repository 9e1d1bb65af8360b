"""The guard: the process between ``tenure lock`` (or ``elect``) and its command.

``tenure`` starts it as ``python -I -S _guard.py FD GRACE TERMINAL -- CMD...`` in a
process group of its own; it runs CMD in that group and exits with CMD's status
(128 + N for a signal N). It exists so that nothing of the command outlives
``tenure``, however ``tenure`` ends:

- FD is the read end of a pipe whose only write end ``tenure`` holds: end of file
  means ``tenure`` has gone, even by ``kill -9`` (the kernel closes its files), and
  the guard kills the whole group (SIGKILL), itself included, at once.
- CMD gets ``PR_SET_PDEATHSIG`` (SIGKILL) on Linux: if the guard itself is killed,
  the kernel kills CMD.
- The guard is a child subreaper: what CMD leaves behind is reparented to it (not
  to init), so it can reap it and tell when the group is empty.
- When CMD ends, what is left of the group gets SIGTERM, then SIGKILL once GRACE
  seconds have passed: a command's background processes end with it.

SIGINT, SIGTERM and SIGHUP do nothing to the guard (``tenure`` sends them to the
whole group: CMD gets them, the guard stays to report CMD's status). TERMINAL
``1`` makes the group the terminal's foreground group first (``tenure`` ran in
it), so that CMD may read the terminal and a ^C reaches CMD once.

This file runs as a script, not as part of the package: only the standard library,
so that it starts in a few milliseconds.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence

#: prctl(2) options (linux/prctl.h).
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
#: How often the group is looked at while it is given time to end, in seconds.
POLL = 0.01
#: The signals tenure passes on to the group, which the guard itself outlives.
PASSED_ON = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _prctl() -> Callable[[int, int], int] | None:
    """prctl(2) from libc, or None where there is none (not Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    call = libc.prctl
    call.argtypes = [ctypes.c_int, ctypes.c_ulong]
    call.restype = ctypes.c_int

    def prctl(option: int, value: int) -> int:
        result: int = call(option, value)
        return result

    return prctl


def die_with_parent(prctl: Callable[[int, int], int] | None, parent: int) -> Callable[[], None]:
    """A ``preexec_fn``: the child gets SIGKILL when ``parent`` (the guard) dies."""

    def preexec() -> None:
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the guard died before the line above took effect
            os._exit(1)

    return preexec


def members() -> list[int]:
    """The live processes of this process group but the guard (Linux: read from /proc)."""
    me, group = os.getpid(), os.getpgrp()
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                # "pid (comm) state ppid pgrp ...": comm may hold anything, even ") ".
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        if int(fields[2]) == group and fields[0] not in (b"Z", b"X"):
            found.append(int(entry))
    return found


def reap() -> None:
    """Reap whatever children (and adopted orphans) have ended, without waiting."""
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] != 0:
            pass


def end_the_rest(grace: float) -> None:
    """SIGTERM what is left of the group, and SIGKILL what is still there after ``grace``."""
    reap()
    if not members():
        return
    os.killpg(0, signal.SIGTERM)  # the guard's own handler ignores it
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        reap()
        if not members():
            return
        time.sleep(POLL)
    # One by one, not killpg: the guard must live to report the command's status. A
    # killed process forks no more, so this ends.
    while left := members():
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(POLL)
        reap()


def watch_parent(fd: int) -> None:
    """Block until ``tenure`` has gone (end of file on ``fd``), then kill the group."""
    while True:
        try:
            if not os.read(fd, 64):
                break
        except InterruptedError:  # pragma: no cover - retried by Python already
            continue
        except OSError:
            break
    os.killpg(0, signal.SIGKILL)


def take_terminal() -> None:
    """Make this process group the terminal's foreground group (stdin's terminal)."""
    old = signal.signal(signal.SIGTTOU, signal.SIG_IGN)  # a background group may not, else
    try:
        with contextlib.suppress(OSError):
            os.tcsetpgrp(0, os.getpgrp())
    finally:
        signal.signal(signal.SIGTTOU, old)


def main(argv: Sequence[str]) -> int:
    """Run the command after ``--`` as described above; its exit status."""
    fd, grace, terminal = int(argv[0]), float(argv[1]), argv[2] == "1"
    command = list(argv[4:])
    for signum in PASSED_ON:
        # A handler, not SIG_IGN: handlers are reset by exec, so the command gets the
        # default dispositions.
        signal.signal(signum, lambda *_: None)
    prctl = _prctl()
    if prctl is not None:
        prctl(PR_SET_CHILD_SUBREAPER, 1)
    if terminal:
        take_terminal()
    try:
        child = subprocess.Popen(command, preexec_fn=die_with_parent(prctl, os.getpid()))
    except FileNotFoundError:
        print(f"tenure: {command[0]}: command not found", file=sys.stderr, flush=True)
        return 127
    except OSError as error:
        print(
            f"tenure: {command[0]}: cannot execute: {error.strerror or error}",
            file=sys.stderr,
            flush=True,
        )
        return 126
    # Started after the command: PR_SET_PDEATHSIG follows the thread that forked.
    threading.Thread(target=watch_parent, args=(fd,), daemon=True).start()
    returncode = child.wait()
    end_the_rest(grace)
    return 128 - returncode if returncode < 0 else returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
