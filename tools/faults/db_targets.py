"""``redis://`` and ``postgres://`` as fault-suite targets: one real server each.

:class:`RedisTarget` is a ``redis-server`` with ``appendonly yes`` and
``appendfsync always`` (:class:`tests.redis.server.RedisServer`), the setting
under which the backend declares DURABLE; :class:`PostgresTarget` a PostgreSQL 15
with ``fsync`` and ``synchronous_commit`` on (:class:`tests.postgres.server.PostgresServer`).
For the :class:`~tools.faults.target.Target` interface both are one process:
:meth:`ServerTarget.kill` is ``kill -9`` of it (PostgreSQL's postmaster and its
backends with it), :meth:`ServerTarget.restart` starts it again on the same data
and port (Redis replays its append-only file, PostgreSQL recovers from its WAL).

What they do not have, so the scenarios needing it are not run against them:
``data-dir`` and ``preload`` (the disk scenario: the servers' data directories
are made by their test helpers, and what a full disk or a failing fsync does to
them is their own tested business, not tenure's), ``idle-timeout`` (neither
closes an idle client connection: a silent client's session simply runs out on
the server's clock), and ``members`` (one server; neither backend declares
REPLICATED).
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Sequence
from pathlib import Path
from typing import Final, Protocol

from tools.faults.target import Address

#: A call in flight when the server dies: the client notices the dead connection at
#: once (a reset), but a call sent into the restart waits for the server to accept
#: again; PostgreSQL's crash recovery of a small WAL takes about a second.
RESTART_MARGIN: Final = 5.0


class _Server(Protocol):
    """What both test servers (tests/redis/server.py, tests/postgres/server.py) offer."""

    port: int

    @property
    def pid(self) -> int | None: ...

    @property
    def running(self) -> bool: ...

    def open(self) -> object: ...

    def start(self, *, wait: bool = True) -> None: ...

    def kill(self) -> None: ...

    def stop(self) -> None: ...

    def close(self) -> None: ...


class ServerTarget:
    """One database server as a :class:`~tools.faults.target.Target` (module doc)."""

    capabilities: frozenset[str] = frozenset()

    def __init__(self, name: str, data_dir: Path, server: _Server) -> None:
        self.name = name
        #: The server's root (its data, configuration and log).
        self.data_dir = data_dir
        #: Unused: the servers are started by their test helpers, never preloaded.
        self.env: dict[str, str] = {}
        self.server = server
        self._opened = False
        self._last_code: int | None = None

    # -- what clients see ---------------------------------------------------------------

    @property
    def address(self) -> Address:
        """See :class:`~tools.faults.target.Target`."""
        return ("127.0.0.1", self.server.port)

    @property
    def addresses(self) -> list[Address]:
        """See :class:`~tools.faults.target.Target`: the one server."""
        return [self.address]

    def url(self, addresses: Sequence[Address] | None = None) -> str:
        """See :class:`~tools.faults.target.Target` (one address: the first given)."""
        raise NotImplementedError  # each subclass knows its scheme and its database

    def liveness_margin(self, window: float) -> float:
        """See :class:`~tools.faults.target.Target`: a restart's recovery (:data:`RESTART_MARGIN`).

        Expiry is judged by the server's clock, which keeps running while it is
        down: a session whose window passed meanwhile is expired by the first call
        after the restart, as on ``tenure serve``; nothing renews it.
        """
        return RESTART_MARGIN

    @property
    def pid(self) -> int | None:
        """See :class:`~tools.faults.target.Target`."""
        return self.server.pid

    def exit_code(self) -> int | None:
        """See :class:`~tools.faults.target.Target`: -9 after a kill, None while it runs."""
        return None if self.server.running else self._last_code

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> None:
        """Start the server (fresh data the first time) and wait until it serves."""
        try:
            if not self._opened:
                self._opened = True
                self.server.open()
            else:
                self.server.start()
        except AssertionError as error:  # RedisError, PostgresError: a start that failed
            raise RuntimeError(str(error)) from None
        self._last_code = None

    def kill(self) -> None:
        """``kill -9`` of the server (resumed first: a stopped process dies only then)."""
        pid = self.server.pid
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
            self.server.kill()
            self._last_code = -signal.SIGKILL

    def restart(self) -> None:
        """The server killed, then started again on its data (see :meth:`start`)."""
        self.kill()
        self.start()

    def stop(self) -> int | None:
        """Stop the server gracefully: 0, or None if it had to be killed or never ran."""
        if not self._opened or not self.server.running:
            return None
        self.server.stop()
        self._last_code = 0
        return 0

    def close(self) -> None:
        """Kill the server; its directory (data and log) stays for the run to remove."""
        self.kill()
        self.server.close()


class RedisTarget(ServerTarget):
    """``redis://``: one ``redis-server``, appendonly with ``appendfsync always``."""

    def __init__(self, data_dir: Path) -> None:
        from tests.redis.server import RedisServer  # needs redis-server: imported when made

        data_dir.mkdir(parents=True, exist_ok=True)
        super().__init__("redis", data_dir, RedisServer(data_dir, appendfsync="always"))

    def url(self, addresses: Sequence[Address] | None = None) -> str:
        """``redis://host:port/0`` (one address: the first given)."""
        host, port = addresses[0] if addresses else self.address
        return f"redis://{host}:{port}/0"


#: The server's connection slots and each client's URL options, sized as
#: docs/backends.md tells operators to: ``max_connections`` less the reserved >=
#: clients x (``pool_size`` + 1) + what partitions strand until reclaimed (up to that
#: again per partition within ``idle_session_timeout``). Here 12 clients x 5, and a
#: partition every few seconds against a 10 s reclaim: 60 + 3 x 60 < 297. (With the
#: defaults, 12 x 11 connections already pass the 97 a stock server lets in.)
POSTGRES_CONF: Final = {"max_connections": "300"}
POSTGRES_URL_OPTIONS: Final = {
    "pool_size": "4",
    "idle_session_timeout": "10",
    "server_keepalives_idle": "10",
}


class PostgresTarget(ServerTarget):
    """``postgres://``: one PostgreSQL 15 server, ``fsync`` and ``synchronous_commit`` on."""

    def __init__(self, data_dir: Path) -> None:
        from tests.postgres.server import PostgresServer

        data_dir.mkdir(parents=True, exist_ok=True)
        self._postgres = PostgresServer(data_dir, extra_conf=POSTGRES_CONF)
        super().__init__("postgres", data_dir, self._postgres)

    def url(self, addresses: Sequence[Address] | None = None) -> str:
        """The server's URL with its role and password, at ``addresses[0]`` if given."""
        url = self._postgres.url(**POSTGRES_URL_OPTIONS)
        if not addresses:
            return url
        host, port = addresses[0]
        return url.replace(f"@127.0.0.1:{self._postgres.port}/", f"@{host}:{port}/", 1)
