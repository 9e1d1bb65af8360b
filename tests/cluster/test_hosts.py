"""A cluster's hosts, built of plain objects (unit tier): the standby's refuses and never
ticks, and shows its times on the leader's clock; the leader's steps down at its lease."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, cast

import pytest

from tenure._core import CreateNode, CreateSession, DetachSession, Engine, NodeConfig
from tenure.errors import NotLeaderError
from tenure.server._cluster.appender import Appender
from tenure.server._cluster.hosts import leader_host, standby_host
from tenure.server._cluster.journal import ClusterJournal
from tenure.server._cluster.keys import ServerRecord
from tenure.server._cluster.role import ClusterRole
from tenure.server._cluster.store import ClusterStore, Leader
from tenure.server._config.serve_config import ServeConfig


class Sealed:
    """The output of a server: what was sealed to which commit."""

    def __init__(self) -> None:
        self.seals: list[tuple[int, int]] = []

    def seal(self, batch: int, durable: int) -> None:
        self.seals.append((batch, durable))

    def release(self, durable: int) -> None:
        pass


def _standby_role() -> ClusterRole:
    role = ClusterRole("c", ServerRecord("me", "127.0.0.1:1"))
    leader = ServerRecord("them", "10.0.0.2:6388", shift=1_000.0)
    role.current = Leader(leader, 3, 9)
    role.members = [leader]
    return role


async def test_a_standbys_host_refuses_every_command_naming_the_leader(tmp_path: Path) -> None:
    engine = Engine()
    engine.apply(CreateNode("n", NodeConfig()), 1.0)
    sid = engine.apply(CreateSession("n", b"k", timeout=1.0), 1.0).session_id
    engine.apply(DetachSession(sid), 1.0)  # (a deadline is due in the follower's engine)
    served = standby_host(ServeConfig(data_dir=tmp_path), engine, _standby_role())
    output = Sealed()
    served.attach(lambda effects: None, output, lambda: pytest.fail("nothing can fail"))
    served.start()
    host = served.host
    with pytest.raises(NotLeaderError) as refused:
        host.execute(CreateNode("m", NodeConfig()))
    assert refused.value.leader == "10.0.0.2:6388"
    assert not host.behind()  # no slices: no timer runs here
    assert host.wall_shift() == pytest.approx(1_000.0, abs=0.01)  # the leader's clock
    served.commit.request_flush()
    await asyncio.sleep(0)
    assert output.seals == [(0, 0)]  # (its refusals leave at the end of their turn)
    assert sid in host.engine.sessions  # nothing here ended it: only the log does
    assert served.shutdown()


async def test_a_leaders_host_steps_down_once_its_lease_may_have_ended(tmp_path: Path) -> None:
    loop = asyncio.get_running_loop()
    lease_ends = [loop.time() + 60.0]
    appender = Appender(
        cast(ClusterStore, object()),
        lease=1,
        term=3,
        next_index=2,
        max_entry=10_000,
        deadline=lambda: lease_ends[0],
    )
    journal = ClusterJournal(cast(ClusterStore, object()), appender, snapshot_every=100, cluster="")
    role = ClusterRole("c", ServerRecord("me", "127.0.0.1:1"))
    role.lead(3)
    served = leader_host(ServeConfig(data_dir=tmp_path), journal, Engine(), role)
    stepped_down: list[Any] = []
    output = Sealed()
    served.attach(lambda effects: None, output, lambda: stepped_down.append(True))
    served.start()
    served.host.execute(CreateNode("n", NodeConfig()), "", None)
    lease_ends[0] = loop.time()  # (no renewal answered in time)
    served.commit.flush()
    assert stepped_down == [True]
    assert served.dead
    assert output.seals == []  # nothing left: not even what only read
    served.shutdown()
