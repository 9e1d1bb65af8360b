"""The fence, the log and the snapshots in a real etcd (the run's member): what a
deposed leader can no longer do, and how a follower reads what others wrote."""

from __future__ import annotations

import gc
import uuid
from collections.abc import AsyncIterator

import msgpack
import pytest

from tenure._core import Command, CreateNode, CreateSession, Engine, NodeConfig
from tenure._core.snapshot import dump
from tenure._etcd.client import EtcdClient, EtcdClientOptions
from tenure._etcd.streams import WatchHub
from tenure.server._cluster.follower import Follower
from tenure.server._cluster.keys import ClusterKeys, LogEntry, ServerRecord
from tenure.server._cluster.store import Appended, ClusterStore
from tenure.server._durability.records import command_record
from tenure.server._durability.storage import framed
from tests.etcd.cluster import EtcdCluster


@pytest.fixture
async def store(etcd_member: EtcdCluster) -> AsyncIterator[ClusterStore]:
    conn = EtcdClient(EtcdClientOptions(endpoints=tuple(etcd_member.endpoints)))
    keys = ClusterKeys.of("/tenure-test/", f"c{uuid.uuid4().hex[:10]}")
    try:
        yield ClusterStore(conn, keys)
    finally:
        await conn.close()


async def _candidate(store: ClusterStore, name: str) -> tuple[int, int]:
    lease = await store.grant(30)
    return lease, await store.stand(lease, ServerRecord(name, f"{name}:1"))


def _entry(term: int, *commands: Command[object]) -> LogEntry:
    records = b""
    for command in commands:
        record = command_record(command, 1.0)
        assert record is not None
        records += framed(record)
    return LogEntry(term, records)


async def test_the_first_candidate_leads_and_the_next_waits_behind_it(store: ClusterStore) -> None:
    first, first_term = await _candidate(store, "a")
    second, second_term = await _candidate(store, "b")
    assert await store.ahead_of(first_term) is None
    assert await store.ahead_of(second_term) == first_term
    leader, _ = await store.leader()
    assert leader is not None
    assert (leader.member.name, leader.term, leader.lease) == ("a", first_term, first)
    await store.revoke(first)
    assert await store.ahead_of(second_term) is None
    assert (
        await store.stand(second, ServerRecord("b", "b:1")) == second_term
    )  # standing again: same


async def test_a_deposed_leader_cannot_append_and_two_writers_never_fork_the_log(
    store: ClusterStore,
) -> None:
    old, old_term = await _candidate(store, "old")
    assert await store.append(1, _entry(old_term, CreateNode("n", NodeConfig())), old) is (
        Appended.DONE
    )
    # The same entry again (a retried Txn whose first try went through): done, once.
    assert await store.append(1, _entry(old_term, CreateNode("n", NodeConfig())), old) is (
        Appended.DONE
    )
    new, new_term = await _candidate(store, "new")
    await store.revoke(old)  # the old leader's lease ends: it is deposed
    assert await store.append(2, _entry(old_term), old) is Appended.DEPOSED
    assert await store.append(2, _entry(new_term, CreateNode("m", NodeConfig())), new) is (
        Appended.DONE
    )
    # Someone wrote index 2 already: another entry there is refused, never a fork.
    assert await store.append(2, _entry(new_term), new) is Appended.TAKEN
    assert await store.append(3, _entry(new_term), new) is Appended.DONE
    assert await store.append(4, _entry(new_term), new) is Appended.DONE
    page = await store.read_log(0)
    assert [index for index, _ in page.entries] == [1, 2, 3, 4]


async def test_a_snapshot_trims_the_log_only_for_the_leader_of_its_term(
    store: ClusterStore,
) -> None:
    lease, term = await _candidate(store, "a")
    for index in range(1, 6):
        name = f"n{index}"
        assert await store.append(index, _entry(term, CreateNode(name, NodeConfig())), lease) is (
            Appended.DONE
        )
    data = b"x" * 2500
    pointer = await store.write_chunks(3, term, data, chunk=1000)
    assert pointer.chunks == 3
    assert not await store.install(pointer, lease + 1, None)  # not this term's leader
    assert await store.install(pointer, lease, None)
    found, revision = await store.pointer()
    assert found == pointer
    assert await store.read_snapshot(pointer, revision) == data
    page = await store.read_log(0)
    assert [index for index, _ in page.entries] == [4, 5]


async def test_a_follower_applies_the_log_in_order_and_loads_a_snapshot_it_fell_behind(
    store: ClusterStore,
) -> None:
    lease, term = await _candidate(store, "a")
    hub = WatchHub(store.conn)
    follower = Follower(store, hub)
    try:
        await follower.load()
        follower.start()
        key = b"k" * 16
        commands = [
            CreateNode("app", NodeConfig()),
            CreateSession("app", key, 30.0, "s"),
        ]
        for index, command in enumerate(commands, 1):
            assert await store.append(index, _entry(term, command), lease) is Appended.DONE
        await follower.applied_past(2)
        assert "app" in follower.engine.nodes
        assert len(follower.engine.sessions) == 1
        # Entries the follower never sees (it stopped following), then a snapshot of
        # the state after them that trims them: it loads the snapshot whole.
        await follower.stop()
        ahead = Engine()
        for command in commands:
            ahead.apply(command, 1.0)
        for index in range(3, 10):
            later = CreateNode(f"later{index}", NodeConfig())
            assert await store.append(index, _entry(term, later), lease) is Appended.DONE
            ahead.apply(later, 1.0)
        pointer = await store.write_chunks(9, term, msgpack.packb(dump(ahead)), chunk=1000)
        assert await store.install(pointer, lease, None)
        assert await store.append(10, _entry(term, CreateNode("last", NodeConfig())), lease) is (
            Appended.DONE
        )
        loads = follower.loads
        await follower.catch_up()
        assert follower.loads == loads + 1
        assert follower.applied == 10
        assert set(follower.engine.nodes) == {"app", "last", *(f"later{i}" for i in range(3, 10))}
        assert [index for index, _ in (await store.read_log(0)).entries] == [10]
    finally:
        await follower.stop()
        await hub.close()


async def test_a_loaded_state_is_frozen_for_the_cyclic_collector(store: ClusterStore) -> None:
    """What a follower loads lives on, as a single server's recovered state: the
    collector's full collections need not walk it (at a million holds each walk kept
    a standby's loop 270-450 ms)."""
    lease, term = await _candidate(store, "a")
    assert await store.append(1, _entry(term, CreateNode("app", NodeConfig())), lease) is (
        Appended.DONE
    )
    follower = Follower(store, WatchHub(store.conn))
    gc.unfreeze()
    assert gc.get_freeze_count() == 0
    try:
        await follower.load()
        assert "app" in follower.engine.nodes
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
        await follower.stop()
