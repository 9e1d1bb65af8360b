"""The PostgreSQL harness itself, against a real server: logs in, survives kill -9, stops."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import psycopg
import pytest

from tests.daemons import process_tree
from tests.postgres.fixtures import require_postgres
from tests.postgres.server import PostgresServer, live_pids


def is_postgres(pid: int) -> bool:
    """Whether ``pid`` is a live postgres process now (not a zombie, not someone else)."""
    try:
        return b"postgres" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def test_the_shared_server_takes_the_tenure_role_by_url_and_dsn(
    postgres_server: PostgresServer,
) -> None:
    url = postgres_server.url(application_name="harness")
    assert url.startswith(f"postgres://tenure:{postgres_server.password}@127.0.0.1:")
    assert url.endswith(f":{postgres_server.port}/tenure?application_name=harness")
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT current_user, current_database(), current_setting('application_name'),"
            " current_setting('fsync'), current_setting('synchronous_commit')"
        ).fetchone()
        assert row == ("tenure", "tenure", "harness", "on", "on")
    with psycopg.connect(postgres_server.dsn) as conn:
        assert conn.execute("SELECT current_user").fetchone() == ("tenure",)


def test_a_wrong_password_is_refused(postgres_server: PostgresServer) -> None:
    url = postgres_server.url().replace(postgres_server.password, "wrong", 1)
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(url, connect_timeout=5)


def test_a_database_of_its_own(postgres_server: PostgresServer, postgres_database: str) -> None:
    with psycopg.connect(postgres_database) as conn:
        conn.execute("CREATE TABLE mine (x int)")
        name = conn.execute("SELECT current_database()").fetchone()
        assert name is not None
        assert name[0] != "tenure"
        assert postgres_database.endswith(f"/{name[0]}")


def test_a_committed_row_survives_kill_9_and_restart(tmp_path: Path) -> None:
    require_postgres()
    # A password that needs quoting in the URL and in the SQL that sets it.
    with PostgresServer(tmp_path / "pg", password="p@ss/w:rd%'x ?#") as server:
        pid, port = server.pid, server.port
        assert pid is not None
        with psycopg.connect(server.url()) as conn:
            conn.execute("CREATE TABLE ledger (n int)")
            conn.execute("INSERT INTO ledger VALUES (1), (2)")
            conn.commit()
            tree = process_tree(pid)
            assert len(tree) > 2  # postmaster, our backend, its helpers
        server.kill()
        assert not server.running
        assert not any(process.alive() for process in tree)  # the backends died with it
        assert pid not in live_pids()
        server.start()  # crash recovery from the WAL
        assert server.port == port
        with psycopg.connect(server.url()) as conn:
            rows = conn.execute("SELECT n FROM ledger ORDER BY n").fetchall()
            assert rows == [(1,), (2,)]
        # The whole log: under load the tail is the many "starting up" refusals of the
        # readiness polls that came after it.
        assert "database system was interrupted" in server.log_path.read_text()


async def test_stop_leaves_no_process(postgres_fresh: PostgresServer) -> None:
    server = postgres_fresh
    pid = server.pid
    assert pid is not None
    assert is_postgres(pid)
    assert pid in live_pids()
    conn = await psycopg.AsyncConnection.connect(server.url())
    try:
        await conn.execute("SELECT 1")
        tree = process_tree(pid)
        assert len(tree) > 2  # postmaster, our backend, its helpers
        await server.astop()  # a fast shutdown: connected clients do not hold it up
    finally:
        await conn.close()
    assert not server.running
    assert pid not in live_pids()
    assert not any(process.alive() for process in tree)
    assert not is_postgres(pid)
    argv = [str(server.bindir / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(server.port)]
    finished = await asyncio.to_thread(subprocess.run, argv, check=False, timeout=10)
    assert finished.returncode == 2  # no response


def test_extra_settings_reach_the_server(tmp_path: Path) -> None:
    require_postgres()
    with (
        PostgresServer(tmp_path / "pg", extra_conf={"work_mem": "5MB"}) as server,
        psycopg.connect(server.url()) as conn,
    ):
        assert conn.execute("SHOW work_mem").fetchone() == ("5MB",)
    assert server.pid is None
