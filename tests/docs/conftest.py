"""What the docs' runners share in one run: a directory per page (with the files the
page's blocks read), and the servers each page says are running, started on first
use and shared by the page's blocks (a ``tenure serve`` of each page's own; one
cluster of three members for every page that names one; the run's etcd, Redis and
PostgreSQL, a database of each page's own)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.cluster.harness import TenureCluster
from tests.docs.pages import PAGES
from tests.etcd.cluster import EtcdCluster
from tests.ports import free_port
from tests.server.wire import ServerProcess

#: The servers' addresses of one page, as the page's process gets them (``DOCS_*``).
Env = dict[str, str]


class DocServers:
    """The servers of the docs' pages, each started once (per worker), all killed at
    the end."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.tenures: dict[tuple[str, ...], ServerProcess] = {}
        self.databases: dict[str, str] = {}
        self.ydb_ports: dict[str, int] = {}
        self.clusters: list[TenureCluster] = []

    def tenure(self, key: str, *extra: str) -> ServerProcess:
        """The ``tenure serve`` of ``key`` (a page, or a page's block), with ``extra``."""
        found = self.tenures.get((key, *extra))
        if found is None:
            data = self.root / re.sub(r"\W", "-", key) / f"data-{len(self.tenures)}"
            data.parent.mkdir(exist_ok=True)
            found = ServerProcess(data, "--fsync", "off", *extra).__enter__()
            self.tenures[(key, *extra)] = found
        return found

    def cluster(self, etcd: EtcdCluster) -> TenureCluster:
        """The one cluster of three members the pages share."""
        if not self.clusters:
            self.clusters.append(TenureCluster(self.root / "cluster", etcd.endpoints).open())
        return self.clusters[0]

    def close(self) -> None:
        for server in self.tenures.values():
            server.kill()
        for cluster in self.clusters:
            cluster.close()


@pytest.fixture(scope="session")
def docs_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DocServers]:
    servers = DocServers(tmp_path_factory.mktemp("docs-servers"))
    try:
        yield servers
    finally:
        servers.close()


@pytest.fixture(scope="session")
def page_dir(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """The directory of a page's blocks, with the files they read (made once)."""
    made: dict[str, Path] = {}

    def directory(name: str) -> Path:
        if name not in made:
            where = tmp_path_factory.mktemp(re.sub(r"\W", "-", name))
            files = PAGES[name].files if name in PAGES else None
            if files is not None:
                files(where)
            made[name] = where
        return made[name]

    return directory


@pytest.fixture
def page_env(
    request: pytest.FixtureRequest, docs_servers: DocServers, page_dir: Callable[[str], Path]
) -> Callable[[str], Env]:
    """``page_env(page)``: the addresses of the servers the page names, started now if
    they are not yet."""

    def env(name: str) -> Env:
        found: Env = {}
        for kind in PAGES[name].servers:
            found.update(start(kind, name, request, docs_servers, page_dir(name)))
        return found

    return env


def start(
    kind: str, name: str, request: pytest.FixtureRequest, servers: DocServers, where: Path
) -> Env:
    """The server ``kind`` of page ``name``, started if it is not yet: its ``DOCS_*``."""
    if kind == "tenure":
        return {"DOCS_TENURE": f"127.0.0.1:{servers.tenure(name).port}"}
    if kind == "ydb":
        port = servers.ydb_ports.setdefault(name, free_port())
        server = servers.tenure(name, "--ydb-port", str(port))
        return {"DOCS_TENURE": f"127.0.0.1:{server.port}", "DOCS_YDB": f"127.0.0.1:{port}"}
    if kind == "tls":
        files = ("--tls-cert", "server.pem", "--tls-key", "server.key", "--tls-client-ca", "ca.pem")
        server = servers.tenure(
            name, *(arg if arg.startswith("--") else str(where / arg) for arg in files)
        )
        return {"DOCS_TLS": f"127.0.0.1:{server.port}", "DOCS_TLS_PORT": str(server.port)}
    if kind == "redis":
        redis = request.getfixturevalue("redis_server")
        return {"DOCS_REDIS": f"127.0.0.1:{redis.port}"}
    if kind == "postgres":
        if name not in servers.databases:
            postgres = request.getfixturevalue("postgres_server")
            database = "docs_" + re.sub(r"\W", "_", name) + f"_{len(servers.databases)}"
            with contextlib.suppress(Exception):
                postgres.drop_database(database)
            servers.databases[name] = postgres.create_database(database).split("://", 1)[1]
        return {"DOCS_POSTGRES": servers.databases[name]}
    if kind == "etcd":
        etcd = request.getfixturevalue("etcd_member")
        return {"DOCS_ETCD": ",".join(etcd.endpoints)}
    if kind == "cluster":
        cluster = servers.cluster(request.getfixturevalue("etcd_member"))
        members = [server.address for server in cluster.servers]
        env = {"DOCS_CLUSTER": ",".join(members)}
        env.update({f"DOCS_CLUSTER{i}": address for i, address in enumerate(members)})
        return env
    raise AssertionError(f"page {name} names a server nobody starts: {kind!r}")
