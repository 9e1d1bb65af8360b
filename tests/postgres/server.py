"""A real PostgreSQL server on loopback, for the tests: start, kill -9, restart, stop.

:class:`PostgresServer` runs PostgreSQL 15's ``initdb`` and ``postgres`` (from
``$TENURE_PG_BIN``, else ``/usr/lib/postgresql/15/bin``, else ``pg_config
--bindir``) on a free port of 127.0.0.1, durable as shipped (``fsync=on``,
``synchronous_commit=on``: a commit acknowledged survives a kill -9) with small
memory settings. Clients log in over TCP as the role ``tenure`` with a password
(``scram-sha-256``), into the database ``tenure`` that role owns, so that
``postgres://tenure:PW@127.0.0.1:PORT/tenure`` URLs are what the backend parses.
The superuser ``postgres`` is trusted on the server's Unix socket only (setup).

PostgreSQL refuses to run as root: then the server runs as the ``postgres`` user,
its data in a directory of its own under the system's temporary directory (a
pytest ``tmp_path`` sits in a root-only directory), removed at :meth:`close`; its
log stays in ``root``. Processes are tracked by :data:`REGISTRY` (see
:mod:`tests.daemons`); a kill takes the backends with the postmaster, like the
crash of the machine it stands for.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Final
from urllib.parse import quote, urlencode

from tests.daemons import POLL, Registry
from tests.postgres.binaries import pg_bindir, postgres_unavailable, server_user
from tests.server.wire import free_port
from tests.servers import ServerProcess, SharedServer

__all__ = [
    "DATABASE",
    "HOST",
    "REGISTRY",
    "SHARED",
    "ROLE",
    "WAIT",
    "PostgresError",
    "PostgresServer",
    "close_shared_postgres",
    "kill_all",
    "live_pids",
    "pg_bindir",
    "postgres_unavailable",
    "shared_postgres",
]

HOST: Final = "127.0.0.1"
#: The role clients log in as, and the database it owns.
ROLE: Final = "tenure"
DATABASE: Final = "tenure"
#: Bound of a start (including crash recovery after a kill), in seconds.
WAIT: Final = 30.0
#: Bound of one setup command (initdb, psql), in seconds.
_COMMAND_WAIT: Final = 120.0
#: How many times a first start picks a new port when its port was taken meanwhile.
_PORT_ATTEMPTS: Final = 3
#: Small and durable: the tests run many servers on a shared machine.
_BASE_CONF: Final = {
    "listen_addresses": HOST,
    "fsync": "on",
    "synchronous_commit": "on",
    "full_page_writes": "on",
    "shared_buffers": "16MB",
    "max_connections": "100",
    "huge_pages": "off",
    "logging_collector": "off",
    "log_min_messages": "warning",
}

#: Every postmaster started by the tests.
REGISTRY: Final = Registry("postgres")


class PostgresError(AssertionError):
    """The server did not initialise, start or accept connections in time (log in message)."""


def live_pids() -> set[int]:
    """PIDs of the postmasters started here and not yet ended."""
    return REGISTRY.live_pids()


def kill_all() -> set[int]:
    """SIGKILL every PostgreSQL server started here and still running; their PIDs."""
    return REGISTRY.kill_all()


def _conninfo_value(value: str) -> str:
    """``value`` quoted for a libpq ``key=value`` string."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


class PostgresServer(ServerProcess):
    """One PostgreSQL server of its own data directory and port; see the module.

    Use it as a context (``with PostgresServer(tmp_path) as server:``) or call
    :meth:`open` and, always, :meth:`close`. Port and data stay the same across
    :meth:`kill`/:meth:`stop` and :meth:`start`: a start after a kill is a crash
    recovery.
    """

    def __init__(
        self,
        root: Path,
        *,
        extra_conf: Mapping[str, str] | None = None,
        password: str | None = None,
    ) -> None:
        """``root``: the log (and, unless root runs us, the data).

        ``extra_conf``: more server settings (``-c key=value``), over the defaults.
        ``password``: the ``tenure`` role's (random when not given; any characters,
        the URL quotes them).
        """
        bindir = pg_bindir()
        reason = postgres_unavailable()
        if bindir is None or reason is not None:
            raise PostgresError(reason)
        #: Where initdb, postgres, psql and pg_isready are.
        self.bindir = bindir
        self.root = root
        self.conf = {**_BASE_CONF, **(extra_conf or {})}
        self.password = password if password is not None else secrets.token_hex(12)
        self.log_path = root / "postgres.log"
        self._user = server_user()
        self._own_dir: Path | None = None
        self.home = root / "pg"  # replaced at open() when the server runs as another user
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._closed = False

    @property
    def data_dir(self) -> Path:
        """The cluster's data directory (``PGDATA``)."""
        return self.home / "data"

    @property
    def socket_dir(self) -> Path:
        """Where the server's Unix socket is (the superuser's setup connection)."""
        return self.home / "socket"

    # -- what clients see -------------------------------------------------------------

    def url(self, db: str = DATABASE, **query: str) -> str:
        """``postgres://tenure:PW@127.0.0.1:PORT/db?query`` (user and password quoted)."""
        auth = f"{quote(ROLE, safe='')}:{quote(self.password, safe='')}"
        tail = f"?{urlencode(query)}" if query else ""
        return f"postgres://{auth}@{HOST}:{self.port}/{quote(db, safe='')}{tail}"

    @property
    def dsn(self) -> str:
        """The same as :meth:`url`, as a libpq ``key=value`` string."""
        parts = {"host": HOST, "port": str(self.port), "user": ROLE}
        parts |= {"password": self.password, "dbname": DATABASE}
        return " ".join(f"{key}={_conninfo_value(value)}" for key, value in parts.items())

    # -- lifecycle --------------------------------------------------------------------

    def open(self) -> PostgresServer:
        """initdb, start on a free port, create the ``tenure`` role and database.

        A port taken by someone else between choosing and binding it gives a new
        port and a new try (a few at most).
        """
        self.root.mkdir(parents=True, exist_ok=True)
        try:
            self._initdb()
            for attempt in range(_PORT_ATTEMPTS):
                self.port = free_port()
                try:
                    self.start()
                    break
                except PostgresError as error:
                    if "already in use" not in str(error) or attempt == _PORT_ATTEMPTS - 1:
                        raise
            quoted = self.password.replace("'", "''")  # an SQL string literal
            self.psql(
                f"CREATE ROLE {ROLE} LOGIN PASSWORD '{quoted}'",
                f"CREATE DATABASE {DATABASE} OWNER {ROLE}",
            )
        except BaseException:
            self.close()
            raise
        return self

    def _initdb(self) -> None:
        if self._user is not None:
            # Our tmp_path is root's alone: the server's files live where it may go.
            self._own_dir = Path(tempfile.mkdtemp(prefix="tenure-pg-"))
            self.home = self._own_dir
        self.home.mkdir(parents=True, exist_ok=True)
        self.socket_dir.mkdir(mode=0o700, exist_ok=True)
        pwfile = self.home / "superuser-password"
        pwfile.write_text(secrets.token_hex(12) + "\n")
        if self._user is not None:
            for path in (self.home, self.socket_dir, pwfile):
                os.chown(path, self._user.pw_uid, self._user.pw_gid)
        argv = [str(self.bindir / "initdb"), "-D", str(self.data_dir), "-U", "postgres"]
        argv += ["--auth-local=trust", "--auth-host=scram-sha-256", f"--pwfile={pwfile}"]
        argv += ["--encoding=UTF8", "--no-locale", "--no-sync"]
        proc = REGISTRY.spawn(
            argv, log_path=self.log_path, cwd=self.home, env=self._env(), **self._as_user()
        )
        try:
            code = proc.wait(timeout=_COMMAND_WAIT)
        finally:
            REGISTRY.end(proc, signal.SIGKILL)
        pwfile.unlink()
        if code != 0:
            raise PostgresError(f"initdb failed ({code}):\n{self.output()}")

    def _as_user(self) -> dict[str, int]:
        if self._user is None:
            return {}
        return {"user": self._user.pw_uid, "group": self._user.pw_gid}

    def _env(self) -> dict[str, str]:
        # Only our command line configures the server: no PG* variable of the caller's.
        env = {key: value for key, value in os.environ.items() if not key.startswith("PG")}
        if self._user is not None:
            env |= {"HOME": self._user.pw_dir, "USER": "postgres", "LOGNAME": "postgres"}
        return env

    def start(self, *, wait: bool = True) -> None:
        """Start the (stopped) server on its data and port; ``wait`` until it accepts."""
        if self._closed:
            raise PostgresError("the server was closed")
        if self.running:
            raise PostgresError(f"postgres on port {self.port} is already running")
        argv = [str(self.bindir / "postgres"), "-D", str(self.data_dir), "-p", str(self.port)]
        argv += ["-k", str(self.socket_dir)]
        for key, value in self.conf.items():
            argv += ["-c", f"{key}={value}"]
        self._proc = REGISTRY.spawn(
            argv, log_path=self.log_path, cwd=self.home, env=self._env(), **self._as_user()
        )
        if wait:
            self.wait_ready()

    def _isready(self) -> bool:
        argv = [str(self.bindir / "pg_isready"), "-q", "-h", HOST, "-p", str(self.port)]
        argv += ["-U", ROLE, "-d", "postgres", "-t", "2"]
        result = subprocess.run(argv, env=self._env(), capture_output=True, timeout=10, check=False)
        return result.returncode == 0

    def wait_ready(self, timeout: float = WAIT) -> None:
        """Wait until the server accepts connections (crash recovery done), bounded."""
        deadline = time.monotonic() + timeout
        while not self._isready():
            if not self.running:
                raise PostgresError(f"postgres exited:\n{self.output()}")
            if time.monotonic() > deadline:
                raise PostgresError(f"postgres not ready within {timeout}s:\n{self.output()}")
            time.sleep(POLL)

    def psql(self, *commands: str, db: str = "postgres") -> str:
        """Run SQL commands as the superuser over the Unix socket; their output.

        Each command runs on its own (``CREATE DATABASE`` cannot be in a transaction).
        """
        argv = [str(self.bindir / "psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"]
        argv += ["-h", str(self.socket_dir), "-p", str(self.port), "-U", "postgres", "-d", db]
        for command in commands:
            argv += ["-c", command]
        result = subprocess.run(
            argv,
            env=self._env(),
            capture_output=True,
            text=True,
            timeout=_COMMAND_WAIT,
            check=False,
        )
        if result.returncode != 0:
            raise PostgresError(f"psql {list(commands)} failed: {result.stderr.strip()}")
        return result.stdout

    def create_database(self, name: str) -> str:
        """A new empty database ``name`` owned by ``tenure``; its URL."""
        if not name.replace("_", "").isalnum() or not name.isascii():
            raise ValueError(f"a database name here is letters, digits and '_', not {name!r}")
        self.psql(f"CREATE DATABASE {name} OWNER {ROLE}")
        return self.url(name)

    def drop_database(self, name: str) -> None:
        """Drop database ``name``, disconnecting whoever is still in it."""
        if not name.replace("_", "").isalnum() or not name.isascii():
            raise ValueError(f"a database name here is letters, digits and '_', not {name!r}")
        self.psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def kill(self) -> None:
        """SIGKILL the postmaster and its backends, reap: a crash (commits survive)."""
        if self._proc is not None:
            REGISTRY.end(self._proc, signal.SIGKILL)

    def stop(self) -> None:
        """Fast shutdown (SIGINT: clients disconnected, checkpoint), SIGKILL fallback."""
        if self._proc is not None:
            REGISTRY.end(self._proc, signal.SIGINT)

    def close(self) -> None:
        """Stop the server; remove its data when it lives outside ``root`` (log stays)."""
        self._closed = True
        self.stop()
        if self._own_dir is not None:
            shutil.rmtree(self._own_dir, ignore_errors=True)

    def __repr__(self) -> str:
        state = f"pid {self.pid}" if self.running else "stopped"
        return f"<PostgresServer {HOST}:{self.port} {state}>"


# -- the run's shared server -----------------------------------------------------------

#: The server this test run shares (:func:`shared_postgres`).
SHARED: Final = SharedServer(PostgresServer, prefix="tenure-pglog-")


def shared_postgres() -> PostgresServer:
    """The server this test run shares (fixture ``postgres_server``).

    Tests keep to tables (or schemas, or a database from ``postgres_database``) of
    their own. Started on first use; one that died meanwhile is started again on its
    data. Closed by :func:`close_shared_postgres` at the run's end.
    """
    return SHARED.get()


def close_shared_postgres() -> None:
    """Stop the shared server and remove its directories (a later use starts afresh)."""
    SHARED.close()
