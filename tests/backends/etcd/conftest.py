"""The etcd:// backend's own tests run on the shared single etcd member (tests/etcd)."""

from __future__ import annotations

import uuid

import pytest

from tests.etcd.cluster import EtcdCluster


@pytest.fixture
def etcd_endpoint(etcd_member: EtcdCluster) -> str:
    """``127.0.0.1:PORT`` of the running single-member etcd."""
    return etcd_member.endpoints[0]


@pytest.fixture
def etcd_url(etcd_endpoint: str) -> str:
    """A URL with a prefix of its own (tests do not meet)."""
    return f"etcd://{etcd_endpoint}?prefix=/test/{uuid.uuid4().hex[:12]}/"
