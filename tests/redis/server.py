"""A real ``redis-server`` on loopback, for the tests: start, kill -9, restart, stop.

:class:`RedisServer` runs Debian's ``redis-server`` (``$TENURE_REDIS``, else
``redis-server`` on PATH) with a generated configuration: a free port of 127.0.0.1,
its data in the given directory, the append-only file on and fsynced on every
write (``appendfsync always``: a write Redis acknowledged survives a kill -9), no
RDB snapshots. It waits until the server answers PING (``-LOADING`` while it
replays its AOF after a restart is not an answer yet).

Processes are tracked by :data:`REGISTRY` (see :mod:`tests.daemons`): stopped by
PID, SIGTERM then SIGKILL after a bounded wait, and killed at the run's end when a
test left one. The waiting methods are synchronous; each has an ``a``-prefixed
twin that runs it in a worker thread, for async tests whose loop must keep running.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from tests.daemons import POLL, Registry
from tests.server.wire import free_port
from tests.servers import ServerProcess, SharedServer

__all__ = [
    "HOST",
    "REGISTRY",
    "SHARED",
    "WAIT",
    "RedisError",
    "RedisServer",
    "close_shared_redis",
    "kill_all",
    "live_pids",
    "ping",
    "redis_binary",
    "redis_unavailable",
    "shared_redis",
]

HOST: Final = "127.0.0.1"
#: Bound of a start (including the replay of the AOF), in seconds.
WAIT: Final = 20.0
#: How many times a first start picks a new port when its port was taken meanwhile.
_PORT_ATTEMPTS: Final = 3
_APPENDFSYNC: Final = frozenset({"always", "everysec", "no"})

#: Every redis-server started by the tests.
REGISTRY: Final = Registry("redis-server")


class RedisError(AssertionError):
    """The server did not start or answer in time (its log is in the message)."""


def redis_binary() -> str | None:
    """The server to run: ``$TENURE_REDIS``, else ``redis-server`` on PATH (or /usr/bin)."""
    override = os.environ.get("TENURE_REDIS", "").strip()
    if override:
        return override if os.access(override, os.X_OK) else None
    return shutil.which("redis-server") or shutil.which("redis-server", path="/usr/bin:/usr/sbin")


def redis_unavailable() -> str | None:
    """Why no Redis server can be started here (to skip, or fail in CI), or None."""
    if redis_binary() is None:
        return "redis-server is not installed (scripts/bootstrap test installs Debian's)"
    return None


def ping(port: int, timeout: float = 1.0) -> bool:
    """Whether the server on ``port`` answers PING with PONG (not ``-LOADING``)."""
    try:
        with socket.create_connection((HOST, port), timeout=timeout) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def live_pids() -> set[int]:
    """PIDs of the redis-server processes started here and not yet ended."""
    return REGISTRY.live_pids()


def kill_all() -> set[int]:
    """SIGKILL every redis-server started here and still running; their PIDs."""
    return REGISTRY.kill_all()


class RedisServer(ServerProcess):
    """One ``redis-server`` on a port and a directory of its own; see the module.

    Use it as a context (``with RedisServer(tmp_path) as server:``) or call
    :meth:`open` and, always, :meth:`close`. Port and directory stay the same across
    :meth:`kill`/:meth:`stop` and :meth:`start`, so a restart finds its data.
    """

    def __init__(
        self, root: Path, *, appendfsync: str = "always", extra: Sequence[str] = ()
    ) -> None:
        """``root``: data, configuration and log. ``extra``: more configuration lines."""
        if appendfsync not in _APPENDFSYNC:
            raise ValueError(f"appendfsync is one of {sorted(_APPENDFSYNC)}, not {appendfsync!r}")
        binary = redis_binary()
        if binary is None:
            raise RedisError(redis_unavailable())
        self._binary = binary
        self.root = root
        self.appendfsync = appendfsync
        self.extra = tuple(extra)
        self.data_dir = root / "data"
        self.config_path = root / "redis.conf"
        self.log_path = root / "redis.log"
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._closed = False

    # -- what clients see -------------------------------------------------------------

    def url(self, db: int = 0) -> str:
        """``redis://127.0.0.1:PORT/db``."""
        return f"redis://{HOST}:{self.port}/{db}"

    # -- lifecycle --------------------------------------------------------------------

    def open(self) -> RedisServer:
        """Pick a free port, write the configuration, start, wait for PING.

        A port taken by someone else between choosing and binding it gives a new
        port and a new try (a few at most).
        """
        self.data_dir.mkdir(parents=True, exist_ok=True)
        for attempt in range(_PORT_ATTEMPTS):
            self.port = free_port()
            self._write_config()
            try:
                self.start()
                return self
            except RedisError as error:
                if "Address already in use" not in str(error) or attempt == _PORT_ATTEMPTS - 1:
                    self.close()
                    raise
        raise AssertionError("unreachable")

    def _write_config(self) -> None:
        lines = [
            f"bind {HOST}",
            f"port {self.port}",
            # Bound to loopback only; no password, so protected mode has nothing to add.
            "protected-mode no",
            f"dir {self.data_dir}",
            "appendonly yes",
            f"appendfsync {self.appendfsync}",
            'save ""',
            "daemonize no",
            'logfile ""',
            *self.extra,
        ]
        self.config_path.write_text("\n".join(lines) + "\n")

    def start(self, *, wait: bool = True) -> None:
        """Start the (stopped) server on its port and directory; ``wait`` for PING."""
        if self._closed:
            raise RedisError("the server was closed")
        if self.running:
            raise RedisError(f"redis-server on port {self.port} is already running")
        self._proc = REGISTRY.spawn(
            [self._binary, str(self.config_path)], log_path=self.log_path, cwd=self.root
        )
        if wait:
            self.wait_ready()

    def wait_ready(self, timeout: float = WAIT) -> None:
        """Wait until the server answers PING (bounded by ``timeout``)."""
        deadline = time.monotonic() + timeout
        while not ping(self.port):
            if not self.running:
                raise RedisError(f"redis-server exited:\n{self.output()}")
            if time.monotonic() > deadline:
                raise RedisError(f"redis-server not answering within {timeout}s:\n{self.output()}")
            time.sleep(POLL)

    def kill(self) -> None:
        """SIGKILL and reap: a crash (what ``appendfsync always`` acknowledged stays)."""
        if self._proc is not None:
            REGISTRY.end(self._proc, signal.SIGKILL)

    def stop(self) -> None:
        """SIGTERM (SIGKILL after a bounded wait) and reap: an orderly shutdown."""
        if self._proc is not None:
            REGISTRY.end(self._proc, signal.SIGTERM)

    def close(self) -> None:
        """Stop the server; the directory (data and log) stays, for the caller to remove."""
        self._closed = True
        self.stop()

    def __repr__(self) -> str:
        state = f"pid {self.pid}" if self.running else "stopped"
        return f"<RedisServer {HOST}:{self.port} {state}>"


# -- the run's shared server -----------------------------------------------------------

#: The server this test run shares (:func:`shared_redis`).
SHARED: Final = SharedServer(RedisServer, prefix="tenure-redis-")


def shared_redis() -> RedisServer:
    """The server this test run shares (fixture ``redis_server``); tests keep to own keys.

    Started on first use, in a temporary directory; one that died meanwhile is
    started again on its data. Closed by :func:`close_shared_redis` at the run's end.
    """
    return SHARED.get()


def close_shared_redis() -> None:
    """Stop the shared server and remove its directory (a later use starts afresh)."""
    SHARED.close()
