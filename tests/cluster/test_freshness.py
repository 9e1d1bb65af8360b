"""How fresh a standby's state is, against the run's real etcd: the log's last index
read in one linearizable Txn, and :class:`Freshness` confirming the follower's state
with as few of those reads as its callers allow."""

from __future__ import annotations

import asyncio
import math
import uuid
from collections.abc import AsyncIterator

import pytest

from tenure._core import Command, CreateNode, NodeConfig
from tenure._etcd.client import EtcdClient, EtcdClientOptions
from tenure._etcd.streams import WatchHub
from tenure.errors import UnavailableError
from tenure.server._cluster.follower import Follower
from tenure.server._cluster.freshness import Freshness
from tenure.server._cluster.keys import ClusterKeys, LogEntry, ServerRecord
from tenure.server._cluster.store import Appended, ClusterStore
from tenure.server._durability.records import command_record
from tenure.server._durability.storage import framed
from tests.etcd.cluster import EtcdCluster

TIMEOUT = 10.0  # generous: a wait that should end at once, on a shared machine


class CountingStore(ClusterStore):
    """A store that counts its last_index reads (``started`` set at each), each held
    until ``gate`` is set."""

    def __init__(self, conn: EtcdClient, keys: ClusterKeys) -> None:
        super().__init__(conn, keys)
        self.reads = 0
        self.started = asyncio.Event()
        self.gate = asyncio.Event()
        self.gate.set()
        self.fail: UnavailableError | None = None

    async def last_index(self) -> int:
        self.reads += 1
        self.started.set()
        await self.gate.wait()
        if self.fail is not None:
            raise self.fail
        return await super().last_index()


@pytest.fixture
async def store(etcd_member: EtcdCluster) -> AsyncIterator[CountingStore]:
    conn = EtcdClient(EtcdClientOptions(endpoints=tuple(etcd_member.endpoints)))
    keys = ClusterKeys.of("/tenure-test/", f"c{uuid.uuid4().hex[:10]}")
    try:
        yield CountingStore(conn, keys)
    finally:
        await conn.close()


@pytest.fixture
async def follower(store: CountingStore) -> AsyncIterator[Follower]:
    """A follower of ``store``'s (empty) log, following it."""
    hub = WatchHub(store.conn)
    follower = Follower(store, hub)
    try:
        await follower.load()
        follower.start()
        yield follower
    finally:
        await follower.stop()
        await hub.close()


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


async def _append(store: ClusterStore, index: int, term: int, lease: int, node: str) -> None:
    entry = _entry(term, CreateNode(node, NodeConfig()))
    assert await store.append(index, entry, lease) is Appended.DONE


async def test_the_last_index_is_the_newest_entry_or_the_snapshot_that_trimmed_them(
    store: ClusterStore,
) -> None:
    assert await store.last_index() == 0  # no entry, no snapshot
    lease, term = await _candidate(store, "a")
    for index in (1, 2, 3):
        await _append(store, index, term, lease, f"n{index}")
    assert await store.last_index() == 3
    # A snapshot of 2 trims entries 1 and 2: entry 3 is still the newest.
    two = await store.write_chunks(2, term, b"x" * 10, chunk=1000)
    assert await store.install(two, lease, None)
    assert [index for index, _ in (await store.read_log(0)).entries] == [3]
    assert await store.last_index() == 3
    # A snapshot of 3 trims every entry: its pointer says how far the log went.
    three = await store.write_chunks(3, term, b"y" * 10, chunk=1000)
    assert await store.install(three, lease, two)
    assert (await store.read_log(0)).entries == []
    assert await store.last_index() == 3
    await _append(store, 4, term, lease, "n4")
    assert await store.last_index() == 4


async def test_a_fresh_read_sees_every_entry_acknowledged_before_it(
    store: CountingStore, follower: Follower
) -> None:
    freshness = Freshness(follower)
    assert freshness.confirmed_at == -math.inf
    assert freshness.age() == math.inf
    assert not freshness.holds(1e9)  # (never confirmed: no finite bound holds)
    lease, term = await _candidate(store, "a")
    await _append(store, 1, term, lease, "app")  # acknowledged: etcd committed it
    applied = await freshness.within(0, timeout=TIMEOUT)
    # What within() would answer at once, told without waiting (the face's turn path):
    assert freshness.holds(60, applied)
    assert not freshness.holds(60, applied + 1)  # (an entry not applied yet)
    assert not freshness.holds(-1)  # (a confirmation from the future: none)
    assert applied >= 1
    assert follower.applied >= 1
    assert "app" in follower.engine.nodes
    assert store.reads == 1
    assert 0 <= freshness.age() < math.inf
    # Confirmed a moment ago: a caller content with a minute's staleness reads nothing.
    assert await freshness.within(60, timeout=TIMEOUT) >= 1
    assert store.reads == 1
    # Already applied: a min_index needs no read either.
    assert await freshness.within(60, 1, timeout=TIMEOUT) >= 1
    assert store.reads == 1


async def test_many_callers_at_once_share_at_most_two_reads(
    store: CountingStore, follower: Follower
) -> None:
    freshness = Freshness(follower)
    lease, term = await _candidate(store, "a")
    for index in (1, 2, 3):
        await _append(store, index, term, lease, f"n{index}")
    results = await asyncio.gather(*(freshness.within(0, timeout=TIMEOUT) for _ in range(20)))
    assert store.reads <= 2
    assert all(result >= 3 for result in results)
    assert {"n1", "n2", "n3"} <= set(follower.engine.nodes)


async def test_an_index_the_log_does_not_have_is_unavailable_after_the_timeout(
    store: CountingStore, follower: Follower
) -> None:
    freshness = Freshness(follower)
    with pytest.raises(UnavailableError, match=r"could not confirm its state within 0\.3 s"):
        await freshness.within(0, 100, timeout=0.3)
    assert store.reads == 1
    # The read itself confirmed the (empty) state: only the index was missing.
    assert freshness.confirmed_at > -math.inf


async def test_a_cancelled_caller_leaves_the_read_to_the_others(
    store: CountingStore, follower: Follower
) -> None:
    freshness = Freshness(follower)
    lease, term = await _candidate(store, "a")
    await _append(store, 1, term, lease, "app")
    store.gate.clear()  # the read waits, in flight, until the gate opens
    first = asyncio.ensure_future(freshness.within(0, timeout=TIMEOUT))
    await asyncio.wait_for(store.started.wait(), TIMEOUT)
    assert store.reads == 1
    # Content with a minute's staleness: it rides the read the first caller sent.
    second = asyncio.ensure_future(freshness.within(60, timeout=TIMEOUT))
    await asyncio.sleep(0)  # it reaches its wait for that read
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    store.gate.set()
    assert await second >= 1
    assert "app" in follower.engine.nodes
    assert store.reads == 1


async def test_a_failed_read_is_every_waiting_callers_error(
    store: CountingStore, follower: Follower
) -> None:
    freshness = Freshness(follower)
    store.gate.clear()
    store.fail = UnavailableError("etcd is away")
    callers = [asyncio.ensure_future(freshness.within(0, timeout=TIMEOUT)) for _ in range(3)]
    await asyncio.wait_for(store.started.wait(), TIMEOUT)
    assert store.reads == 1
    store.gate.set()
    for caller in callers:
        with pytest.raises(UnavailableError, match="etcd is away"):
            await caller
    assert store.reads <= 2
    assert freshness.confirmed_at == -math.inf
    # Etcd back: the next caller confirms.
    store.fail = None
    assert await freshness.within(0, timeout=TIMEOUT) == 0
    assert freshness.confirmed_at > -math.inf
