"""What the test servers the tests start (Redis, PostgreSQL) share.

* :class:`ServerProcess`: a server's process (``pid``, ``running``, ``output``), its
  use as a context, and ``aopen``, ``astart``, ``akill``, ``astop``: the blocking
  controls run in a worker thread so that async tests do not block their loop.
* :class:`SharedServer`: the one server a test run shares, started on first use
  in a temporary directory, started again on its data if it died, closed at the
  run's end.
* :func:`require` and :func:`finish_run`: what the fixture plugins do when a
  server is missing (skip here, fail under ``CI=true``) and when the run ends
  (stop the shared server, kill and report any stray one: :func:`report_strays`,
  which under pytest-xdist goes through the controller).
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import tempfile
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, Generic, Self, TypeVar

import pytest

from tenure.testing.conformance.harness import in_ci
from tests.daemons import log_tail

__all__ = [
    "STRAYS",
    "ServerProcess",
    "SharedServer",
    "fail_on_relayed_strays",
    "finish_run",
    "relay_strays",
    "report_strays",
    "require",
]


class ServerProcess(ABC):
    """A server run as one process (``_proc``, logging to ``log_path``): its blocking
    controls, and the same for async tests (in a worker thread)."""

    _proc: subprocess.Popen[bytes] | None
    log_path: Path

    @abstractmethod
    def open(self) -> Self:
        """Create the server's files and start it."""

    @abstractmethod
    def start(self, *, wait: bool = True) -> None:
        """Start the server on its data (wait until it serves, if ``wait``)."""

    @abstractmethod
    def kill(self) -> None:
        """SIGKILL the server: a crash."""

    @abstractmethod
    def stop(self) -> None:
        """Stop the server in order."""

    @abstractmethod
    def close(self) -> None:
        """Stop the server for good."""

    @property
    def pid(self) -> int | None:
        """The running server's PID, or None when stopped."""
        return self._proc.pid if self.running and self._proc is not None else None

    @property
    def running(self) -> bool:
        """Whether its process is alive (it may not serve yet)."""
        return self._proc is not None and self._proc.poll() is None

    def output(self) -> str:
        """The end of what the server logged, over all its runs."""
        return log_tail(self.log_path)

    def __enter__(self) -> Self:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def aopen(self) -> Self:
        """:meth:`open` without blocking the event loop."""
        return await asyncio.to_thread(self.open)

    async def astart(self, *, wait: bool = True) -> None:
        """:meth:`start` without blocking the event loop."""
        await asyncio.to_thread(self.start, wait=wait)

    async def akill(self) -> None:
        """:meth:`kill` without blocking the event loop."""
        await asyncio.to_thread(self.kill)

    async def astop(self) -> None:
        """:meth:`stop` without blocking the event loop."""
        await asyncio.to_thread(self.stop)


ServerT = TypeVar("ServerT", bound=ServerProcess)


class SharedServer(Generic[ServerT]):
    """The server a test run shares: made by ``make(root)`` in a temporary ``root``."""

    def __init__(self, make: Callable[[Path], ServerT], prefix: str) -> None:
        self._make = make
        self._prefix = prefix
        self._server: ServerT | None = None
        self._root: Path | None = None
        self._lock = threading.Lock()

    def get(self) -> ServerT:
        """The shared server: started on first use, started again if it died."""
        with self._lock:
            if self._server is None:
                self._root = Path(tempfile.mkdtemp(prefix=self._prefix))
                try:
                    self._server = self._make(self._root).open()
                except BaseException:
                    shutil.rmtree(self._root, ignore_errors=True)
                    self._root = None
                    raise
            elif not self._server.running:
                self._server.start()
            return self._server

    def close(self) -> None:
        """Stop the shared server and remove its directory (a later use starts afresh)."""
        with self._lock:
            server, root, self._server, self._root = self._server, self._root, None, None
        if server is not None:
            server.close()
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)


def require(unavailable: str | None, what: str) -> None:
    """Skip the test when the server is missing (``unavailable`` says why); fail it
    instead under ``CI=true``."""
    if unavailable is not None:
        if in_ci():
            pytest.fail(f"{unavailable} (CI=true: a missing {what} is a failure, never a skip)")
        pytest.skip(unavailable)


def finish_run(
    session: pytest.Session,
    shared: SharedServer[ServerT],
    kill_all: Callable[[], set[int]],
    what: str,
) -> None:
    """Stop the shared server; kill any other ``what`` process still running, say so
    and fail the run."""
    shared.close()
    report_strays(session, what, kill_all())


#: Where a pytest-xdist worker leaves its stray reports for the controller.
STRAYS: Final = "tenure_strays"
_RELAYED = pytest.StashKey[list[str]]()


def report_strays(session: pytest.Session, what: str, strays: set[int]) -> None:
    """Say which ``what`` processes a test left running (``strays``, now killed) and
    fail the run; nothing when there are none.

    A pytest-xdist worker's exit status does not become the run's: a worker hands
    its report to the controller (:func:`relay_strays`), which fails the run
    (:func:`fail_on_relayed_strays`).
    """
    if not strays:
        return
    line = f"{what} processes left running by a test, killed: {sorted(strays)}"
    workeroutput: dict[str, Any] | None = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput.setdefault(STRAYS, []).append(line)
    else:
        _fail(session, [line])


def relay_strays(config: pytest.Config, workeroutput: dict[str, Any]) -> None:
    """On the xdist controller, as a worker ends: keep what it reported."""
    config.stash.setdefault(_RELAYED, []).extend(workeroutput.get(STRAYS, []))


def fail_on_relayed_strays(session: pytest.Session) -> None:
    """On the xdist controller, at the run's end: say what the workers reported and
    fail the run (nothing when they reported nothing)."""
    lines = session.config.stash.get(_RELAYED, [])
    if lines:
        _fail(session, lines)


def _fail(session: pytest.Session, lines: list[str]) -> None:
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        for line in lines:
            reporter.write_line(line)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
