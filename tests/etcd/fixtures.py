"""The etcd fixtures, a pytest plugin that ``tests/conftest.py`` loads for every test.

* ``etcd_member``: the run's single member (started once, shared; tests keep to
  keys of their own and never stop it). The conformance kit's etcd harness uses
  the same member.
* ``etcd_cluster``: a fresh three-member cluster for one test, to kill, stop and
  restart at will; closed at the test's end whatever happened (logs stay in the
  test's ``tmp_path``).

Where etcd is not installed both skip, saying so, on a developer machine and
*fail* in CI (``CI=true``): CI must never go green by not testing. When the run
ends, the shared member is stopped, and an etcd process still alive then (a test
that started a cluster and never closed it) is killed and fails the run.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.etcd.cluster import (
    EtcdCluster,
    close_shared_member,
    etcd_unavailable,
    kill_all,
    shared_member,
)
from tests.servers import report_strays, require

__all__ = ["etcd_cluster", "etcd_member", "require_etcd"]


def require_etcd() -> None:
    """Skip the test when etcd is missing here; fail it instead under ``CI=true``."""
    require(etcd_unavailable(), "etcd")


@pytest.fixture(scope="session")
def etcd_member() -> EtcdCluster:
    """The run's one-member etcd cluster (``.url(prefix=...)``, ``.endpoints``)."""
    require_etcd()
    return shared_member()


@pytest.fixture
def etcd_cluster(tmp_path: Path) -> Iterator[EtcdCluster]:
    """A three-member etcd cluster of this test alone, serving and with a leader."""
    require_etcd()
    with EtcdCluster(3, root=tmp_path / "etcd") as cluster:
        yield cluster


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Stop the shared member; kill any other etcd still running, and say so."""
    close_shared_member()
    report_strays(session, "etcd", kill_all())
