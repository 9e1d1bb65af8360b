"""Worker processes of the orchestrator: spawned, spoken to, read, and always ended.

A workload that must measure a server while its clients hold still (hold,
sessions, watch) runs those clients in workers: ``python -m MODULE worker ...``,
each printing JSON lines (events) on stdout and waiting for a word on stdin
between steps. A thread reads each worker's lines, so every wait is bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any


def say(**event: object) -> None:
    """In a worker: one JSON line (an event) to the orchestrator."""
    print(json.dumps(event), flush=True)


async def next_word() -> str:
    """In a worker: the orchestrator's next word on stdin (EOF counts as "end"), read
    in a thread so that the worker's loop goes on meanwhile."""
    line = await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    return line.strip() or "end"


#: The repository's root: ``-m bench...`` needs it on the worker's sys.path.
REPO = Path(__file__).resolve().parents[2]


class Worker:
    """A worker process, its JSON lines read by a thread (so every wait is bounded)."""

    def __init__(self, module: str, argv: list[str], log: Path) -> None:
        self._log = log.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module, "worker", *argv],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
        )
        self.log_path = log
        self._lines: queue.Queue[str] = queue.Queue()
        assert self.proc.stdout is not None
        threading.Thread(target=self._pump, args=(self.proc.stdout,), daemon=True).start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            self._lines.put(line)
        self._lines.put("")  # EOF

    def expect(self, event: str, timeout: float) -> dict[str, Any]:
        """The worker's next event, which must be ``event``, within ``timeout`` seconds."""
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise RuntimeError(f"worker: no {event!r} within {timeout:g}s") from None
        if not line:
            tail = self.log_path.read_text(errors="replace").strip().splitlines()
            raise RuntimeError(f"worker exited before {event!r}: {tail[-1] if tail else '?'}")
        data: dict[str, Any] = json.loads(line)
        if data.get("event") != event:
            raise RuntimeError(f"worker: expected {event!r}, got {data}")
        return data

    def send(self, word: str) -> None:
        """A word on the worker's stdin (ignored if it has exited)."""
        assert self.proc.stdin is not None
        with contextlib.suppress(OSError):
            self.proc.stdin.write(word + "\n")
            self.proc.stdin.flush()

    def finish(self, timeout: float = 40.0) -> None:
        """Tell it to end, wait (bounded), kill it if it does not."""
        self.send("end")
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
        self._close()

    def kill(self) -> None:
        """SIGKILL this worker (by its own pid) and reap it."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self._close()

    def _close(self) -> None:
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        self._log.close()
