"""A client through a cluster's rolling upgrade: the newer protocol once the leader speaks it.

Scripted members (tests/backends/fake_cluster.py): a member "upgraded" speaks one
version more. A real upgrade of real members, from an earlier commit's build, is
tests/cluster/test_upgrade.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

import tenure
from tenure import Capability
from tenure._protocol.messages import LEADER, PROTOCOL_VERSION, STANDBY
from tenure.backends.remote import SINCE_VERSION, TenureBackend
from tests.api.support import eventually, owners
from tests.backends.fake_cluster import FakeCluster, FakeMember

pytestmark = pytest.mark.timeout(30)

Start = Callable[..., Awaitable[FakeMember]]
#: The newest protocol version that brings a capability (version 8 brought none: only
#: an operator's acts, tenure._protocol.admin), and one it brings (the first by name).
BRINGS: int = max(SINCE_VERSION)
NEWEST: Capability = min(SINCE_VERSION[BRINGS], key=lambda c: c.value)
OLDER: tuple[int, ...] = tuple(range(1, BRINGS))  # the versions before it
NEWER: tuple[int, ...] = tuple(range(1, PROTOCOL_VERSION + 1))  # every version


@pytest.fixture
async def start() -> AsyncIterator[Start]:
    """``await start(name, role=..., leader=..., versions=...)``: a running member."""
    cluster, members = FakeCluster(), list[FakeMember]()

    async def make(name: str, **kwargs: Any) -> FakeMember:
        member = await FakeMember(name, cluster, **kwargs).start()
        members.append(member)
        return member

    try:
        yield make
    finally:
        for member in members:
            await member.close()
        cluster.close()


async def test_a_client_speaks_the_newer_version_to_an_upgraded_leader_it_met_older(
    start: Start,
) -> None:
    # The standby is the first door: the client meets it speaking the older version,
    # is refused the newer one there, and goes on to the leader it names.
    leader = await start("t1", versions=OLDER)
    standby = await start("t2", role=STANDBY, leader=leader.address, versions=OLDER)
    async with tenure.connect(f"tenure://{standby.address},{leader.address}") as client:
        await client.create_node("n")
        session = await client.session("n", recovery_window=30.0)
        lock = await session.mutex("job").lock()
        backend = client.backend
        assert isinstance(backend, TenureBackend)
        link = backend.shards[0].link
        assert link.welcome is not None
        assert link.welcome.version == BRINGS - 1
        assert NEWEST not in client.capabilities
        assert standby.hellos == list(range(PROTOCOL_VERSION, BRINGS - 2, -1))

        # The standby is upgraded (it speaks the newer version), then the leader
        # hands over to it: the client goes there in the newer version (it kept the
        # older one for that door for the link's life, and so never had the newer
        # protocol's commands once the cluster was upgraded).
        standby.versions = frozenset(NEWER)
        standby.role, standby.leader = LEADER, None
        leader.step_down(standby.address)

        async def moved() -> bool:
            return link.connected and str(link.endpoint) == standby.address

        await eventually(moved, "the client on the upgraded leader")
        assert link.welcome is not None
        assert link.welcome.version == PROTOCOL_VERSION
        assert standby.hellos[-1] == PROTOCOL_VERSION
        assert NEWEST in client.capabilities
        assert lock.lost_reason is None
        assert await owners(session, "job") == [session.id]
