"""Real ``celery worker`` and ``celery beat`` processes for the Celery tests.

Each runs ``python -m celery -A tests.contrib.celery_app ...`` in a process group of
its own (a prefork worker's children are in it too), logging to a file, with the
environment that points it at the test's Redis database and ``tenure serve``. It is
stopped by its group's id: SIGTERM (a warm shutdown) and SIGKILL after a bounded
wait, or SIGKILL at once (a crash). Every wait is bounded (:data:`PATIENCE`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final, TypeVar

__all__ = ["PATIENCE", "CeleryProcess", "celery_processes", "until"]

ROOT: Final = Path(__file__).resolve().parents[2]
#: Bound of every wait on a process or on what it does, in seconds.
PATIENCE: Final = 30.0
#: Pause between two looks, in seconds.
POLL: Final = 0.05

T = TypeVar("T")


def until(check: Callable[[], T | None], what: str, patience: float = PATIENCE) -> T:
    """Poll ``check()`` until it returns something true, and return that; fail naming
    ``what`` after ``patience`` seconds."""
    deadline = time.monotonic() + patience
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened within {patience} s: {what}")
        time.sleep(POLL)


class CeleryProcess:
    """``python -m celery -A tests.contrib.celery_app ARGS``, its log in ``log_path``."""

    def __init__(self, name: str, args: list[str], env: dict[str, str], directory: Path) -> None:
        self.name = name
        self.log_path = directory / f"{name}.log"
        self._out = (directory / f"{name}.out").open("wb")
        environ = {**os.environ, **env}
        environ["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(ROOT / "src"), str(ROOT), environ.get("PYTHONPATH")])
        )
        argv = [sys.executable, "-m", "celery", "-A", "tests.contrib.celery_app", *args]
        argv += ["--loglevel", "INFO", "--logfile", str(self.log_path)]
        self.proc = subprocess.Popen(
            argv,
            cwd=directory,
            env=environ,
            stdin=subprocess.DEVNULL,
            stdout=self._out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    @classmethod
    def worker(
        cls, name: str, pool: str, queue: str, env: dict[str, str], directory: Path
    ) -> CeleryProcess:
        """A worker of ``pool`` (``prefork``: two children) consuming ``queue``."""
        args = ["worker", "--pool", pool, "--queues", queue, "--hostname", f"{name}@%h"]
        args += ["--without-gossip", "--without-mingle", "--without-heartbeat"]
        if pool == "prefork":
            args += ["--concurrency", "2"]
        return cls(name, args, env, directory)

    @classmethod
    def beat(cls, name: str, env: dict[str, str], directory: Path) -> CeleryProcess:
        """A ``celery beat`` with its own schedule file and pid file."""
        args = ["beat", "--schedule", str(directory / f"{name}.schedule")]
        args += ["--pidfile", str(directory / f"{name}.pid")]
        return cls(name, args, env, directory)

    def log(self) -> str:
        """What it logged so far (its log file and its stdout/stderr)."""
        if not self._out.closed:
            self._out.flush()
        parts = [self.log_path, Path(self._out.name)]
        return "\n".join(path.read_text(errors="replace") for path in parts if path.exists())

    def wait_log(self, text: str) -> None:
        """Until ``text`` is in its log (failing, with the log, if it exits first)."""

        def logged() -> bool:
            assert self.proc.poll() is None, f"{self.name} exited:\n{self.log()}"
            return text in self.log()

        until(logged, f"{self.name} logs {text!r}")

    def wait_ready(self) -> CeleryProcess:
        """Until a worker says it is ready."""
        self.wait_log(" ready.")
        return self

    @property
    def running(self) -> bool:
        """Whether its main process is alive."""
        return self.proc.poll() is None

    def stop(self) -> int:
        """SIGTERM its group (a warm shutdown), SIGKILL after PATIENCE; its exit status."""
        self._signal_group(signal.SIGTERM)
        try:
            return self.proc.wait(PATIENCE)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.proc.wait(PATIENCE)

    def kill(self) -> None:
        """SIGKILL its whole group: a crash of the worker and its children."""
        self._signal_group(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(PATIENCE)

    def _signal_group(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signum)


@contextlib.contextmanager
def celery_processes() -> Iterator[list[CeleryProcess]]:
    """A list to put started processes in; each is killed (its group) at the end."""
    started: list[CeleryProcess] = []
    try:
        yield started
    finally:
        for process in started:
            process.kill()
            process._out.close()
