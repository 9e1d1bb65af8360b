"""The repo's harnesses for the conformance kit: ``memory://``, a third party's
``dict://`` (the core alone), a ``tenure serve``, etcd, Redis, PostgreSQL.

The kit (:mod:`tenure.testing.conformance`) reaches a backend through a harness;
with no ``--tenure-url``, the repo's run hands it :data:`ALL_HARNESSES` (see
``tests/conftest.py``). The server harnesses are repo-only: one starts ``tenure
serve`` with the test helpers of ``tests/server``, the other a real etcd member
with those of ``tests/etcd``.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from tenure.testing.conformance.harness import Harness, MemoryHarness, UrlHarness, in_ci, unique

__all__ = [
    "ALL_HARNESSES",
    "DictHarness",
    "EtcdHarness",
    "Harness",
    "PostgresHarness",
    "MemoryHarness",
    "RedisHarness",
    "TenureClusterHarness",
    "TenureHarness",
    "in_ci",
    "unique",
]


#: The names a kit server's statistics keep (``--contention-names``'s most).
KIT_CONTENTION_NAMES = 10_000


class DictHarness(Harness):
    """``dict://NAME``: the third party's backend of ``tests/dict_backend``, which
    implements only the core, reached through its entry point (``tests/conftest.py``
    puts its metadata on ``sys.path``). In this process, on its real clock: what needs
    a FakeClock, a dropped connection or another process skips, as for any URL; what
    needs an ability skips naming its capability."""

    name = "dict"

    def url(self, state: str) -> str:
        return f"dict://{state}"


class TenureHarness(UrlHarness):
    """``tenure://``: one real ``tenure serve`` subprocess for the whole run.

    Tests share the server; each works in its own fresh node, so they do not meet.
    Time is the server's real clock (no FakeClock), so tests that need ``clock``
    skip here; tests/backends/test_remote_*.py cover expiry and disconnects in real
    time, through a TCP proxy.
    """

    def __init__(self) -> None:
        super().__init__("tenure://")
        self._tmp: Path | None = None
        self._server: Any = None

    def start(self) -> None:
        from tests.server.wire import ServerProcess  # a test helper: imported when used

        self._tmp = Path(tempfile.mkdtemp(prefix="tenure-api-"))
        # fsync off: the suite tests the API, not the disk (tests/server covers it).
        # Every contended name kept: the whole kit runs against this one server, and a
        # test's name must not be pushed out of the statistics by earlier tests' names
        # (the sketch's pushing out is tests/core/test_engine_top.py's).
        server = ServerProcess(
            self._tmp / "data", "--fsync", "off", "--contention-names", str(KIT_CONTENTION_NAMES)
        )
        self._server = server.__enter__()

    def stop(self) -> None:
        if self._server is not None:
            self._server.kill()
            self._server = None
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)

    def url(self, state: str) -> str:
        assert self._server is not None, "the harness was not started"
        return f"tenure://127.0.0.1:{self._server.port}"


class TenureClusterHarness(UrlHarness):
    """``tenure://s1,s2,s3``: a real cluster of three ``tenure serve --cluster`` over the
    run's etcd member, started once for the run; every URL lists the three doors.

    The kit's tests run against whichever member leads, through a client that finds
    it: the same API over a replicated server (tests/cluster kills leaders).
    """

    def __init__(self) -> None:
        super().__init__("tenure://")
        self.name = "tenure-cluster"
        self._tmp: Path | None = None
        self._cluster: Any = None

    def unavailable(self) -> str | None:
        from tests.etcd.cluster import etcd_unavailable  # a test helper: imported when used

        return etcd_unavailable()

    def start(self) -> None:
        from tests.cluster.harness import TenureCluster
        from tests.etcd.cluster import shared_member

        self._tmp = Path(tempfile.mkdtemp(prefix="tenure-api-cluster-"))
        extra = ("--contention-names", str(KIT_CONTENTION_NAMES))  # (as TenureHarness's)
        cluster = TenureCluster(self._tmp, shared_member().endpoints, extra=extra)
        self._cluster = cluster.open()

    def stop(self) -> None:
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)

    def url(self, state: str) -> str:
        assert self._cluster is not None, "the harness was not started"
        return str(self._cluster.url())


class EtcdHarness(Harness):
    """``etcd://``: the run's one etcd member (``tests/etcd``), a key prefix per test.

    Every URL names the shared member and a prefix of its own state,
    ``etcd://127.0.0.1:PORT?prefix=/tenure-test/<state>/``: the kit's state names
    are unique, so tests never meet, and nothing needs cleaning (the member and its
    data directory go when the run ends). Time is etcd's real clock, and the kit
    cannot cut connections here: tests that need either skip, as on ``tenure://``.
    """

    name = "etcd"
    #: Each waiter commits its own grant (one Txn): grants due at once on several
    #: semaphores take revisions in the order their waiters get there.
    orders_tokens_of_one_step = False
    can_share_with_processes = True  # the URL names the member and the state's prefix

    def __init__(self) -> None:
        self._endpoints: list[str] = []

    def unavailable(self) -> str | None:
        from tests.etcd.cluster import etcd_unavailable  # a test helper: imported when used

        return etcd_unavailable()

    def start(self) -> None:
        from tests.etcd.cluster import shared_member

        self._endpoints = shared_member().endpoints

    def stop(self) -> None:
        self._endpoints = []  # the shared member stops when the run ends

    def url(self, state: str) -> str:
        assert self._endpoints, "the harness was not started"
        return f"etcd://{','.join(self._endpoints)}?prefix=/tenure-test/{state}/"


class RedisHarness(Harness):
    """``redis://``: the run's shared Redis server (``tests/redis``), a key prefix per test.

    Every URL names the shared server and a prefix of its own state,
    ``redis://127.0.0.1:PORT/0?prefix=tenure-test:<state>:``: the kit's state names
    are unique, so tests never meet (the server goes when the run ends). Time is
    Redis's real clock, and the kit cannot cut connections here: tests that need
    either skip, as on ``tenure://`` (tests/backends/redis covers them).
    """

    name = "redis"
    can_share_with_processes = True  # the URL names the server and the state's prefix

    def __init__(self) -> None:
        self._url = ""

    def unavailable(self) -> str | None:
        from tests.redis.server import redis_unavailable  # a test helper: imported when used

        return redis_unavailable()

    def start(self) -> None:
        from tests.redis.server import shared_redis

        self._url = shared_redis().url(0)

    def stop(self) -> None:
        self._url = ""  # the shared server stops when the run ends

    def url(self, state: str) -> str:
        assert self._url, "the harness was not started"
        return f"{self._url}?prefix=tenure-test:{state}:"


class PostgresHarness(UrlHarness):
    """``postgres://``: the run's shared PostgreSQL server (``tests/postgres``), one schema.

    Tests share the schema as they share a ``tenure serve``: each works in fresh
    nodes of its own. Time is the database's real clock, and the kit cannot cut
    connections: tests that need either skip (tests/backends/postgres covers both).
    """

    def __init__(self) -> None:
        super().__init__("postgres://")
        self._server_url: str | None = None

    def unavailable(self) -> str | None:
        from tests.postgres.server import postgres_unavailable  # a test helper

        return postgres_unavailable()

    def start(self) -> None:
        from tests.postgres.server import shared_postgres

        # Small pools: many clients share the server (its max_connections is 100).
        self._server_url = shared_postgres().url(schema="tenure_kit", pool_size="4")

    def stop(self) -> None:
        self._server_url = None  # the shared server stops when the run ends

    def url(self, state: str) -> str:
        assert self._server_url is not None, "the harness was not started"
        return self._server_url


#: Every backend the repo's run tests. Real servers (postgres, redis) join here;
#: their ``unavailable()`` says when their server is missing.
ALL_HARNESSES: list[Harness] = [
    MemoryHarness(),
    DictHarness(),
    TenureHarness(),
    TenureClusterHarness(),
    EtcdHarness(),
    RedisHarness(),
    PostgresHarness(),
]
