"""The conformance kit's etcd harness: in the run, a prefix of its own per state."""

from __future__ import annotations

from tests.api.harness import ALL_HARNESSES, EtcdHarness
from tests.etcd.client import etcd_client
from tests.etcd.cluster import EtcdCluster


def test_the_etcd_harness_is_in_the_run() -> None:
    assert sum(isinstance(harness, EtcdHarness) for harness in ALL_HARNESSES) == 1


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
