"""The conformance kit's etcd harness: in the run exactly when the backend exists."""

from __future__ import annotations

import pytest

import tenure
from tenure.errors import UnsupportedError
from tests.api.harness import ALL_HARNESSES, EtcdHarness, etcd_backend_exists
from tests.etcd.client import etcd_client
from tests.etcd.cluster import EtcdCluster


def test_etcd_harness_is_enabled_when_the_backend_exists() -> None:
    # Today etcd is in tenure.backends.PLANNED and the harness is out of the run;
    # the backend's arrival (built in, or registered by entry point) puts it in.
    enabled = [harness for harness in ALL_HARNESSES if isinstance(harness, EtcdHarness)]
    assert len(enabled) == (1 if etcd_backend_exists() else 0)


async def test_the_guard_agrees_with_what_connect_does(etcd_member: EtcdCluster) -> None:
    url = etcd_member.url(prefix="/tenure-test/guard/")
    if etcd_backend_exists():
        async with tenure.connect(url) as client:
            assert client.capabilities
    else:
        with pytest.raises(UnsupportedError, match="etcd:// backend is not available"):
            await tenure.connect(url)


async def test_each_state_gets_its_own_prefix_on_the_shared_member(
    etcd_member: EtcdCluster,
) -> None:
    harness = EtcdHarness()
    assert harness.name == "etcd"
    assert not harness.can_fake_time
    assert not harness.can_disconnect
    assert harness.unavailable() is None
    harness.start()
    try:
        (endpoint,) = etcd_member.endpoints
        assert harness.url("api-1") == f"etcd://{endpoint}?prefix=/tenure-test/api-1/"
        assert harness.url("api-1") == harness.url("api-1")  # same state, same URL
        assert harness.url("api-2") != harness.url("api-1")
        async with etcd_client(endpoint) as client:  # the member it names serves
            await client.put(b"/tenure-test/api-1/probe", b"x")
            assert await client.get(b"/tenure-test/api-1/probe") == b"x"
    finally:
        harness.stop()
    assert etcd_member.members[0].running  # the member is the run's, not the harness's
