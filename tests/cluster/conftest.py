"""Fixtures of the cluster tests: three ``tenure serve --cluster`` over the run's etcd."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.harness import TenureCluster
from tests.etcd.cluster import EtcdCluster


@pytest.fixture
def cluster(tmp_path: Path, etcd_member: EtcdCluster) -> Iterator[TenureCluster]:
    """Three members of a fresh cluster (a name of its own) over the run's etcd member."""
    with TenureCluster(tmp_path / "cluster", etcd_member.endpoints) as servers:
        yield servers


@pytest.fixture(scope="module")
def steady_cluster(
    tmp_path_factory: pytest.TempPathFactory, etcd_member: EtcdCluster
) -> Iterator[TenureCluster]:
    """Three members shared by a module's tests that kill, stop or pause none of them
    (one start instead of one per test)."""
    root = tmp_path_factory.mktemp("steady-cluster")
    with TenureCluster(root, etcd_member.endpoints) as servers:
        yield servers
