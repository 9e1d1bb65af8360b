"""The PostgreSQL fixtures, a pytest plugin that ``tests/conftest.py`` loads for every test.

* ``postgres_server``: the run's shared server (started once, on first use; tests
  keep to tables or schemas of their own and never stop it).
* ``postgres_database``: the URL of a new empty database on the shared server,
  dropped after the test (for tests that want a database to themselves).
* ``postgres_fresh``: a server of this test alone, to kill, stop and restart at will;
  closed at the test's end whatever happened (its log stays in ``tmp_path``).

Where PostgreSQL is not installed all skip, saying so, on a developer machine and
*fail* in CI (``CI=true``): CI must never go green by not testing. When the run
ends, the shared server is stopped, and a postgres still alive then (a test that
started one and never closed it) is killed and fails the run.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.postgres.server import (
    SHARED,
    PostgresServer,
    kill_all,
    postgres_unavailable,
    shared_postgres,
)
from tests.servers import finish_run, require

__all__ = ["postgres_database", "postgres_fresh", "postgres_server", "require_postgres"]


def require_postgres() -> None:
    """Skip the test when PostgreSQL is missing here; fail it instead under ``CI=true``."""
    require(postgres_unavailable(), "PostgreSQL")


@pytest.fixture(scope="session")
def postgres_server() -> PostgresServer:
    """The run's shared PostgreSQL server (``.url()``, ``.dsn``, ``.port``)."""
    require_postgres()
    return shared_postgres()


@pytest.fixture
def postgres_database(postgres_server: PostgresServer) -> Iterator[str]:
    """The URL of a new database of this test alone on the shared server, dropped after."""
    name = f"t_{uuid.uuid4().hex[:16]}"
    url = postgres_server.create_database(name)
    try:
        yield url
    finally:
        postgres_server.drop_database(name)


@pytest.fixture
def postgres_fresh(tmp_path: Path) -> Iterator[PostgresServer]:
    """A PostgreSQL server of this test alone, accepting connections."""
    require_postgres()
    with PostgresServer(tmp_path / "postgres") as server:
        yield server


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Stop the shared server; kill any other postgres still running, and say so."""
    finish_run(session, SHARED, kill_all, "postgres")
