"""A stopped ``tenure serve`` ignores a signal sent late, until it exits.

A docs block's ``tenure serve --shards 4`` stopped with exit 241 under a CPU hog
(ci10): its test stops the process group with SIGTERM, so each shard got the signal
twice, once from the group's kill and once passed on by the command, which the busy
machine had not run for a while; a shard that had already stopped had its handler
removed, so the second SIGTERM's default ended it (-15), and the command reported
that as a failure. Now the command's server ignores SIGTERM, SIGINT and SIGHUP from
the moment it has stopped until the process exits.

The program below is the command's own path (``serve_main``, which ``tenure serve``
runs); once it has returned, it sends itself each signal, then says it is alive.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from .wire import START_WAIT, WAIT, free_port

PROGRAM = """
import os, signal, sys
from tenure.cli.server import serve_main

status = serve_main(sys.argv[1:])
for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    os.kill(os.getpid(), signum)
print("alive after the late signals, status", status, flush=True)
"""


def test_a_stopped_server_outlives_a_late_signal(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    args = ["--port", str(free_port()), "--data-dir", str(tmp_path / "data")]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", PROGRAM, *args, "--log-format", "json"],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + START_WAIT
        while '"msg": "listening"' not in log.read_text(errors="replace"):
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(WAIT) == 0, log.read_text()
        assert "alive after the late signals, status 0" in log.read_text()
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
