"""``tenure serve`` with its output on a pseudo-terminal, as an operator at a shell runs it."""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from .wire import WAIT


def serve_on_terminal(
    data_dir: Path, *flags: str, stop_after: str | None = None
) -> tuple[int, list[str]]:
    """Run ``tenure serve`` with stdout and stderr on a terminal until it exits; once
    ``stop_after`` is in its output, it is sent SIGTERM. Returns its exit status and
    the lines it wrote. Every wait is bounded by WAIT.
    """
    master, terminal = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tenure", "serve", "--data-dir", str(data_dir), *flags],
        stdin=subprocess.DEVNULL,
        stdout=terminal,
        stderr=terminal,
    )
    os.close(terminal)  # (the child's copy is the only one: its exit ends the reading)
    out, stopped = b"", False
    deadline = time.monotonic() + WAIT
    try:
        while True:
            left = deadline - time.monotonic()
            assert left > 0, f"tenure serve did not finish within {WAIT}s: {out!r}"
            ready, _, _ = select.select([master], [], [], left)
            if not ready:
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: nobody has the terminal open any more
                break
            if not chunk:
                break
            out += chunk
            if stop_after is not None and not stopped and stop_after.encode() in out:
                proc.send_signal(signal.SIGTERM)
                stopped = True
        code = proc.wait(timeout=WAIT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=WAIT)
        os.close(master)
    return code, out.decode(errors="replace").splitlines()
