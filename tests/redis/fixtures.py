"""The Redis fixtures, a pytest plugin that ``tests/conftest.py`` loads for every test.

* ``redis_server``: the run's shared server (started once, on first use; tests keep
  to keys of their own, or a database number of their own, and never stop it).
* ``redis_fresh``: a server of this test alone, to kill, stop and restart at will;
  closed at the test's end whatever happened (its log stays in ``tmp_path``).

Where ``redis-server`` is not installed both skip, saying so, on a developer machine
and *fail* in CI (``CI=true``): CI must never go green by not testing. When the run
ends, the shared server is stopped, and a redis-server still alive then (a test
that started one and never closed it) is killed and fails the run.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.redis.server import (
    SHARED,
    RedisServer,
    kill_all,
    redis_unavailable,
    shared_redis,
)
from tests.servers import finish_run, require

__all__ = ["redis_fresh", "redis_server", "require_redis"]


def require_redis() -> None:
    """Skip the test when redis-server is missing here; fail it instead under ``CI=true``."""
    require(redis_unavailable(), "Redis")


@pytest.fixture(scope="session")
def redis_server() -> RedisServer:
    """The run's shared Redis server (``.url(db)``, ``.port``)."""
    require_redis()
    return shared_redis()


@pytest.fixture
def redis_fresh(tmp_path: Path) -> Iterator[RedisServer]:
    """A Redis server of this test alone (``appendfsync always``), answering PING."""
    require_redis()
    with RedisServer(tmp_path / "redis") as server:
        yield server


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Stop the shared server; kill any other redis-server still running, and say so."""
    finish_run(session, SHARED, kill_all, "redis-server")
