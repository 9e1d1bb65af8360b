"""postgres:// behind a real pgbouncer in transaction pooling, where LISTEN does not work.

pgbouncer (Debian's package, installed by scripts/bootstrap) runs as the
``postgres`` user on a free loopback port in front of the shared PostgreSQL,
``pool_mode = transaction``; it is stopped by PID at the test's end. Where it is
missing the test skips, and fails under ``CI=true``.
"""

from __future__ import annotations

import asyncio
import os
import pwd
import shutil
import signal
import socket
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

import tenure
from tenure.backends import Capability
from tenure.backends._base import prefix_watch
from tenure.errors import UnsupportedError
from tenure.testing.conformance.harness import in_ci
from tests.daemons import Registry
from tests.postgres.server import PostgresServer
from tests.server.wire import free_port

#: The pgbouncer processes this run started (killed at exit if a test left one).
PGBOUNCERS: Final = Registry("pgbouncer")
#: Bound of pgbouncer's start, in seconds.
START_WAIT: Final = 10.0


def _binary() -> str | None:
    return shutil.which("pgbouncer") or (
        "/usr/sbin/pgbouncer" if os.access("/usr/sbin/pgbouncer", os.X_OK) else None
    )


@pytest.fixture
def pgbouncer_url(postgres_server: PostgresServer) -> Iterator[str]:
    """A postgres:// URL through a transaction-pooling pgbouncer to the shared server."""
    binary = _binary()
    if binary is None:
        reason = "pgbouncer is not installed (apt-get install pgbouncer)"
        if in_ci():
            pytest.fail(f"{reason} (CI=true: a missing pgbouncer is a failure, never a skip)")
        pytest.skip(reason)
    home = Path(tempfile.mkdtemp(prefix="tenure-pgbouncer-"))
    port = free_port()
    (home / "users.txt").write_text('"tenure" ""\n')
    (home / "pgbouncer.ini").write_text(
        "[databases]\n"
        f"tenure = host=127.0.0.1 port={postgres_server.port} dbname=tenure user=tenure "
        f"password={postgres_server.password}\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        f"auth_type = trust\nauth_file = {home / 'users.txt'}\n"
        "pool_mode = transaction\ndefault_pool_size = 10\nmax_client_conn = 100\n"
    )
    user = group = None
    if os.geteuid() == 0:  # pgbouncer refuses to run as root
        entry = pwd.getpwnam("postgres")
        user, group = entry.pw_uid, entry.pw_gid
        for path in (home, *home.iterdir()):
            os.chown(path, entry.pw_uid, entry.pw_gid)
    proc = PGBOUNCERS.spawn(
        [binary, str(home / "pgbouncer.ini")],
        log_path=home / "pgbouncer.log",
        cwd=home,
        user=user,
        group=group,
    )
    try:
        deadline = time.monotonic() + START_WAIT
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                log = (home / "pgbouncer.log").read_text(errors="replace")
                assert proc.poll() is None, f"pgbouncer exited: {log}"
                assert time.monotonic() < deadline, f"pgbouncer did not listen: {log}"
                time.sleep(0.05)
        yield (
            f"postgres://tenure:{postgres_server.password}@127.0.0.1:{port}/tenure"
            f"?schema=t_{uuid.uuid4().hex[:12]}&pool_size=2"
            "&listen_probe_timeout=0.5&recheck_interval=0.2"
        )
    finally:
        PGBOUNCERS.end(proc, signal.SIGTERM)
        shutil.rmtree(home, ignore_errors=True)


async def test_behind_pgbouncer_watch_is_refused_and_the_rest_works(pgbouncer_url: str) -> None:
    async with tenure.connect(pgbouncer_url) as one, tenure.connect(pgbouncer_url) as two:
        assert Capability.WATCH not in one.capabilities  # the probe's NOTIFY never came
        assert Capability.PREFIX_WATCH not in one.capabilities
        assert Capability.FENCING_TOKENS in one.capabilities
        await one.create_node("n")
        first = await one.session("n")
        second = await two.session("n")
        with pytest.raises(UnsupportedError, match="pgbouncer"):
            await anext(first.semaphore("m").watch())
        with pytest.raises(UnsupportedError, match="PREFIX_WATCH"):
            one.cache("n", prefix="config/")
        with pytest.raises(UnsupportedError, match="pgbouncer"):
            await prefix_watch(first._backend_session()).watch_prefix(
                "config/", data=True, owners=False, waiters=False
            )
        lock = await first.mutex("m").lock()
        waiter = asyncio.ensure_future(second.mutex("m").lock())
        await asyncio.sleep(0.3)
        assert not waiter.done()
        await lock.release()
        granted = await asyncio.wait_for(waiter, 3)  # its bounded re-check found it
        assert granted.token > lock.token
        await granted.release()
        pool = first.semaphore("pool")
        await pool.create(limit=2, data=b"x")
        async with pool.acquire(count=2, data=b"me", timeout=1.0) as lease:
            described = await pool.describe(owners=True)
            assert [(o.session_id, o.token) for o in described.owners] == [(first.id, lease.token)]


async def test_behind_pgbouncer_a_waiting_set_is_found_granted_by_its_recheck(
    pgbouncer_url: str,
) -> None:
    async with tenure.connect(pgbouncer_url) as one, tenure.connect(pgbouncer_url) as two:
        assert Capability.ALL_OR_NONE in one.capabilities
        await one.create_node("n")
        first = await one.session("n")
        second = await two.session("n")
        lock = await first.mutex("b").lock()
        locking = asyncio.ensure_future(second.lock_all(["a", "b"], timeout=5))
        await asyncio.sleep(0.3)
        assert not locking.done()
        await lock.release()
        held = await asyncio.wait_for(locking, 3)  # no notification: the re-check
        assert held.tokens["b"] > lock.token
        await held.release()
