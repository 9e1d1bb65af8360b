"""Fixtures of the repo's test run, and its side of the conformance kit.

The API suite is the conformance kit, shipped in ``src/tenure/testing/conformance``
and collected by this run too (``testpaths``). With no ``--tenure-url``, the kit
runs every test once per harness of :mod:`tests.api.harness`: ``memory://``, a
``tenure serve`` subprocess, and (once the ``etcd://`` backend exists) a real etcd
member. ``TENURE_TEST_BACKENDS=a,b`` runs only the named harnesses. A harness whose
server is missing skips on a developer machine but *fails* in CI (``CI=true``): CI
must never go green by not testing. The etcd fixtures (``etcd_member``,
``etcd_cluster``) come from the plugin :mod:`tests.etcd.fixtures`.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tenure.testing.conformance.harness import use_harnesses
from tests.api.harness import ALL_HARNESSES, Harness
from tests.netproxy import NetProxy
from tests.server.wire import ServerProcess

#: etcd_member and etcd_cluster, for every test package (tests/etcd/fixtures.py); the
#: redis_* and postgres_* fixtures (tests/redis/fixtures.py, tests/postgres/fixtures.py).
pytest_plugins = ("tests.etcd.fixtures", "tests.redis.fixtures", "tests.postgres.fixtures")


def _selected() -> list[Harness]:
    wanted = os.environ.get("TENURE_TEST_BACKENDS", "").strip()
    if not wanted:
        return ALL_HARNESSES
    names = {name.strip() for name in wanted.split(",") if name.strip()}
    unknown = names - {harness.name for harness in ALL_HARNESSES}
    if unknown:
        known = sorted(harness.name for harness in ALL_HARNESSES)
        raise pytest.UsageError(
            f"TENURE_TEST_BACKENDS names unknown backends: {sorted(unknown)} (known: {known})"
        )
    return [harness for harness in ALL_HARNESSES if harness.name in names]


@pytest.fixture
def tenure_server(tmp_path: Path) -> Iterator[ServerProcess]:
    """A real ``tenure serve`` of this test alone (``--fsync off``: the disk is not tested)."""
    with ServerProcess(tmp_path / "data", "--fsync", "off") as server:
        yield server


@pytest.fixture
async def proxy(tenure_server: ServerProcess) -> AsyncIterator[NetProxy]:
    """A fault-injecting TCP proxy in front of ``tenure_server``."""
    async with NetProxy("127.0.0.1", tenure_server.port) as proxy:
        yield proxy


def pytest_configure(config: pytest.Config) -> None:
    """Hand the repo's harnesses to the kit (a ``--tenure-url`` takes precedence)."""
    use_harnesses(config, _selected())


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Kit tests are quick: a hung one fails within seconds, not at the global timeout.

    Not the differential test: its length is the number of examples it is asked for.
    """
    kit = os.path.join("tenure", "testing", "conformance", "")
    for item in items:
        if (
            kit in str(item.path)
            and item.path.name != "test_differential.py"
            and item.get_closest_marker("timeout") is None
        ):
            item.add_marker(pytest.mark.timeout(15))
