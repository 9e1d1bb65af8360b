"""tenure's etcd client and streams, unchanged, over a simulated etcd (tenure.testing.sim:
``tenure.testing.sim.etcd``: its store and parts, its stubs and calls), on simulated time.

The client is tenure's :class:`~tenure._etcd.client.EtcdClient` with one change, its
channel (:class:`SimEtcdClient`: the real generated stubs over a ``SimChannel``); its
keepalive and watch streams are tenure's :class:`KeepAlive` and :class:`WatchHub`.
The model's own rules (compares, nested Txns, compaction, leases) are also checked on
the store alone, with no loop.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc
import pytest
from aetcd.rpc import kv_pb2, rpc_pb2

from tenure._etcd.client import EtcdClient, EtcdClientOptions, LeaseNotFoundError
from tenure._etcd.requests import (
    compare_create,
    compare_empty,
    compare_mod,
    delete,
    get,
    prefix_end,
    put,
    range_request,
)
from tenure._etcd.streams import KeepAlive, Watcher, WatchHub
from tenure.errors import LimitExceededError, UnavailableError
from tenure.testing.sim import SimLoop
from tenure.testing.sim.etcd._keyspace import EtcdRpcError
from tenure.testing.sim.etcd._store import SimEtcdStore
from tenure.testing.sim.etcd._stubs import SimEtcd
from tests.sim.test_sim_loop import run as run_on_a_loop

T = TypeVar("T")
ENDPOINTS = ("etcd-1:2379", "etcd-2:2379", "etcd-3:2379")
PUT, DELETE = kv_pb2.Event.PUT, kv_pb2.Event.DELETE
C = rpc_pb2.Compare


class SimEtcdClient(EtcdClient):
    """tenure's client whose channel goes to a :class:`SimEtcd` (its ``channel_factory``
    option, the seam the simulation uses)."""

    def __init__(self, etcd: SimEtcd, **options: Any) -> None:
        self.etcd = etcd
        super().__init__(
            EtcdClientOptions(
                endpoints=ENDPOINTS,
                channel_factory=lambda endpoint, _: etcd.channel(endpoint),
                **options,
            )
        )


class Holder:
    """A lease the keepalive stream renews (a ``Renewable``), noting what it heard."""

    def __init__(self, lease_id: int, ttl: int) -> None:
        self.lease_id, self.ttl = lease_id, ttl
        self.renewals: list[float] = []
        self.reconnects = 0
        self.gone = asyncio.Event()

    def renewed(self, sent_at: float) -> None:
        self.renewals.append(sent_at)

    def lease_gone(self) -> None:
        self.gone.set()

    def reconnected(self) -> None:
        self.reconnects += 1


def run(seed: int, main: Callable[[SimLoop, SimEtcd, SimEtcdClient], Awaitable[T]]) -> T:
    """``main(loop, etcd, client)`` on a new simulated loop of ``seed``, with a cluster
    of :data:`ENDPOINTS` and a client of it; what is left running is cancelled after."""

    async def body(loop: SimLoop) -> T:
        etcd = SimEtcd(ENDPOINTS, random.Random(f"{seed}-etcd"))
        client = SimEtcdClient(etcd)
        try:
            return await main(loop, etcd, client)
        finally:
            await client.close()
            etcd.close()

    return run_on_a_loop(seed, body)


async def collect(watcher: Watcher, count: int, within: float = 30.0) -> tuple[list[Any], int]:
    """The first ``count`` events ``watcher`` brings, and how often it was reset meanwhile."""
    events: list[Any] = []
    resets = 0
    async with asyncio.timeout(within):
        while len(events) < count:
            await watcher.wait()
            more, reset = watcher.drain()
            events += more
            resets += reset
    return events, resets


# -- over the client ---------------------------------------------------------------------


def test_put_range_and_compares_as_etcd_answers_them() -> None:
    async def main(loop: SimLoop, etcd: SimEtcd, client: SimEtcdClient) -> None:
        key = b"/t/a"
        made = await client.txn([compare_create(key, 0)], [put(key, b"1")], [get(key)])
        assert made.succeeded
        assert made.header.revision == 2
        again = await client.txn([compare_create(key, 0)], [put(key, b"x")], [get(key)])
        assert not again.succeeded
        assert again.header.revision == 2
        kv = again.responses[0].response_range.kvs[0]
        assert (kv.value, kv.create_revision, kv.mod_revision, kv.version) == (b"1", 2, 2, 1)
        changed = await client.txn([compare_mod(key, 2)], [put(key, b"2")])
        assert changed.succeeded
        assert changed.header.revision == 3
        stale = await client.txn([compare_mod(key, 2)], [put(key, b"3")])
        assert not stale.succeeded
        now = await client.range(rpc_pb2.RangeRequest(key=key))
        kv = now.kvs[0]
        assert (kv.value, kv.create_revision, kv.mod_revision, kv.version) == (b"2", 2, 3, 2)
        then = await client.range(rpc_pb2.RangeRequest(key=key, revision=2))
        assert then.kvs[0].value == b"1"
        assert then.header.revision == 3
        assert now.header.member_id == etcd.members[ENDPOINTS[0]]
        # An empty prefix holds "no key under it"; a key made under it breaks that.
        assert (await client.txn([compare_empty(b"/t/b/")], [])).succeeded
        assert not (await client.txn([compare_empty(b"/t/")], [])).succeeded

    run(1, main)


def test_ranges_limit_count_sort_and_filter_as_the_cluster_store_reads_them() -> None:
    async def main(loop: SimLoop, etcd: SimEtcd, client: SimEtcdClient) -> None:
        for name in (b"c", b"a", b"d", b"b"):  # created in this order: revisions 2 to 5
            await client.txn([], [put(b"/s/" + name, name * 3)])
        page = await client.range(rpc_pb2.RangeRequest(key=b"/s/", range_end=b"\0", limit=2))
        assert [kv.key for kv in page.kvs] == [b"/s/a", b"/s/b"]
        assert page.more
        assert page.count == 4
        keys = await client.range(range_request(b"/s/", keys_only=True))
        assert [kv.value for kv in keys.kvs] == [b""] * 4
        counted = await client.range(range_request(b"/s/", count_only=True))
        assert counted.count == 4
        assert not counted.kvs
        # tenure.server._cluster.store's ahead_of: the newest created before revision 4.
        request = range_request(b"/s/", keys_only=True)
        request.max_create_revision = 3
        request.sort_target = rpc_pb2.RangeRequest.CREATE
        request.sort_order = rpc_pb2.RangeRequest.DESCEND
        request.limit = 1
        ahead = await client.range(request)
        assert [kv.key for kv in ahead.kvs] == [b"/s/a"]
        assert ahead.count == 4
        request.sort_order = rpc_pb2.RangeRequest.ASCEND
        assert [kv.key for kv in (await client.range(request)).kvs] == [b"/s/c"]

    run(2, main)


def test_refusals_carry_etcds_codes_and_words() -> None:
    async def main(loop: SimLoop, etcd: SimEtcd, client: SimEtcdClient) -> None:
        too_many = rpc_pb2.TxnRequest(compare=[compare_create(b"/k%d" % i, 0) for i in range(129)])
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await client.kv.Txn(too_many)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert refused.value.details() == "etcdserver: too many operations in txn request"
        twice = rpc_pb2.TxnRequest(success=[put(b"/k", b"1"), put(b"/k", b"2")])
        with pytest.raises(grpc.aio.AioRpcError, match="duplicate key given in txn request"):
            await client.kv.Txn(twice)
        with pytest.raises(LimitExceededError):  # past --max-request-bytes (1.5 MiB)
            await client.txn([], [put(b"/big", b"x" * (1600 * 1024))])
        with pytest.raises(LeaseNotFoundError):
            await client.txn([], [put(b"/k", b"1", lease=12345)])
        with pytest.raises(grpc.aio.AioRpcError) as future:
            await client.kv.Range(rpc_pb2.RangeRequest(key=b"/k", revision=99))
        assert future.value.code() == grpc.StatusCode.OUT_OF_RANGE
        assert etcd.store.revision == 1  # nothing refused was applied

    run(3, main)


def test_a_txn_applied_whose_answer_was_lost_fails_its_compare_when_tried_again() -> None:
    async def main(loop: SimLoop, etcd: SimEtcd, client: SimEtcdClient) -> None:
        key = b"/once"
        etcd.lose_next_answers(1)
        reply = await client.txn([compare_create(key, 0)], [put(key, b"mine")], [get(key)])
        assert etcd.answers_lost == 1
        assert client.generation == 1
        assert client.endpoint == ENDPOINTS[1]
        assert not reply.succeeded  # the second try found the first one's write
        kv = reply.responses[0].response_range.kvs[0]
        assert (kv.value, kv.version, kv.create_revision) == (b"mine", 1, 2)
        assert etcd.store.revision == 2  # applied once
        # A read whose answer is lost is just read again.
        etcd.lose_next_answers(1)
        assert (await client.range(rpc_pb2.RangeRequest(key=key))).kvs[0].value == b"mine"

    run(4, main)


def test_a_down_endpoint_fails_the_client_over_to_the_next() -> None:
    async def main(loop: SimLoop, etcd: SimEtcd, client: SimEtcdClient) -> None:
        etcd.down(ENDPOINTS[0])
        started = loop.time()
        reply = await client.range(rpc_pb2.RangeRequest(key=b"/f"))
        assert client.endpoint == ENDPOINTS[1]
        assert client.generation == 1
        assert reply.header.member_id == etcd.members[ENDPOINTS[1]]
        assert loop.time() - started >= 0.05  # the client's backoff before the next try
        etcd.up(ENDPOINTS[0])
        etcd.down(ENDPOINTS[1])
        await client.range(rpc_pb2.RangeRequest(key=b"/f"))
        assert client.endpoint == ENDPOINTS[2]

    run(5, main)


async def _all_down(loop: SimLoop, etcd: SimEtcd, client: SimEtcdClient) -> float:
    for endpoint in ENDPOINTS:
        etcd.down(endpoint)
    started = loop.time()
    async with asyncio.timeout(60):
        with pytest.raises(UnavailableError, match="etcd unreachable"):
            await client.range(rpc_pb2.RangeRequest(key=b"/f"))
    return loop.time() - started


def test_the_client_gives_up_after_connect_timeout_of_the_loops_clock() -> None:
    # (It measured connect_timeout from time.monotonic() and compared it with the loop's
    # time: on a loop whose clock is another, it never gave up.)
    took = run(6, _all_down)
    assert 4.0 <= took <= 5.0  # connect_timeout (5 s), less the last backoff that did not fit


def test_a_lease_not_renewed_ends_on_simulated_time_with_its_keys_in_one_revision() -> None:
    async def main(loop: SimLoop, etcd: SimEtcd, client: SimEtcdClient) -> None:
        grant = await client.lease_call("LeaseGrant", rpc_pb2.LeaseGrantRequest(TTL=5))
        granted_at, lease = loop.time(), int(grant.ID)
        assert grant.TTL == 5
        assert lease > 0
        await client.txn([], [put(b"/l/a", b"1", lease), put(b"/l/b", b"2", lease)])
        hub = WatchHub(client)
        watcher = hub.watch(b"/l/", prefix_end(b"/l/"), 0)
        events, _ = await collect(watcher, 2)
        gone_after = loop.time() - granted_at
        await hub.close()
        assert [e.type for e in events] == [DELETE, DELETE]
        assert [e.kv.key for e in events] == [b"/l/a", b"/l/b"]
        assert events[0].kv.mod_revision == events[1].kv.mod_revision == 3  # one revision
        assert 5.0 <= gone_after <= 5.6  # its TTL, then the lessor's next tick (500 ms)
        ttl = await client.lease_call("LeaseTimeToLive", rpc_pb2.LeaseTimeToLiveRequest(ID=lease))
        assert ttl.TTL == -1
        assert not (await client.range(range_request(b"/l/"))).kvs
        with pytest.raises(LeaseNotFoundError):
            await client.lease_call("LeaseRevoke", rpc_pb2.LeaseRevokeRequest(ID=lease))

    run(7, main)


def test_the_keepalive_stream_keeps_a_lease_and_hears_when_it_is_gone() -> None:
    async def main(loop: SimLoop, etcd: SimEtcd, client: SimEtcdClient) -> None:
        grant = await client.lease_call("LeaseGrant", rpc_pb2.LeaseGrantRequest(TTL=3))
        holder = Holder(int(grant.ID), 3)
        await client.txn([], [put(b"/k/held", b"1", holder.lease_id)])
        keepalive = KeepAlive(client)
        keepalive.add(holder)
        await asyncio.sleep(60)
        request = rpc_pb2.LeaseTimeToLiveRequest(ID=holder.lease_id, keys=True)
        alive = await client.lease_call("LeaseTimeToLive", request)
        assert alive.TTL > 0
        assert list(alive.keys) == [b"/k/held"]
        assert len(holder.renewals) >= 55  # one a second (a third of its TTL)
        assert not holder.gone.is_set()
        await client.lease_call("LeaseRevoke", rpc_pb2.LeaseRevokeRequest(ID=holder.lease_id))
        async with asyncio.timeout(3):
            await holder.gone.wait()  # the next renewal is answered TTL 0
        await keepalive.close()

    run(8, main)


async def _writes(client: SimEtcdClient, prefix: bytes) -> list[int]:
    """Five changes under ``prefix``: one put, two puts in one Txn, a delete, a put;
    and one outside it. Their revisions."""
    revisions = []
    for ops in (
        [put(prefix + b"a", b"1")],
        [put(prefix + b"b", b"1"), put(prefix + b"c", b"1")],
        [delete(prefix + b"a")],
        [put(b"/elsewhere", b"1")],
        [put(prefix + b"b", b"2")],
    ):
        revisions.append(int((await client.txn([], ops)).header.revision))
    return revisions


def test_a_watch_from_an_old_revision_replays_its_events_in_order() -> None:
    async def main(loop: SimLoop, etcd: SimEtcd, client: SimEtcdClient) -> None:
        revisions = await _writes(client, b"/w/")
        hub = WatchHub(client)
        asked_at = loop.time()
        watcher = hub.watch(b"/w/", prefix_end(b"/w/"), revisions[0])
        events, resets = await collect(watcher, 5)
        heard_after = loop.time() - asked_at
        later = hub.watch(b"/w/", prefix_end(b"/w/"), revisions[2])  # from mid-history
        tail, _ = await collect(later, 2)
        await hub.close()
        assert [(e.type, int(e.kv.mod_revision)) for e in tail] == [
            (DELETE, revisions[2]),
            (PUT, revisions[4]),
        ]
        seen = [(e.type, e.kv.key, int(e.kv.mod_revision)) for e in events]
        assert seen == [
            (PUT, b"/w/a", revisions[0]),
            (PUT, b"/w/b", revisions[1]),
            (PUT, b"/w/c", revisions[1]),
            (DELETE, b"/w/a", revisions[2]),
            (PUT, b"/w/b", revisions[4]),
        ]
        assert resets == 0
        assert watcher.next_revision == revisions[4] + 1
        assert heard_after >= 0.1  # a watch from the past waits for etcd's sync (100 ms)

    run(9, main)


def test_a_watch_from_a_compacted_revision_is_cancelled_and_its_owner_told() -> None:
    async def main(loop: SimLoop, etcd: SimEtcd, client: SimEtcdClient) -> None:
        revisions = await _writes(client, b"/c/")
        etcd.compact(revisions[2])
        with pytest.raises(grpc.aio.AioRpcError) as gone:
            await client.kv.Range(rpc_pb2.RangeRequest(key=b"/c/b", revision=revisions[1]))
        assert gone.value.code() == grpc.StatusCode.OUT_OF_RANGE
        assert "required revision has been compacted" in (gone.value.details() or "")
        at = await client.range(range_request(b"/c/", revision=revisions[2]))  # still readable
        assert [kv.key for kv in at.kvs] == [b"/c/b", b"/c/c"]
        hub = WatchHub(client)
        watcher = hub.watch(b"/c/", prefix_end(b"/c/"), revisions[0])
        async with asyncio.timeout(5):
            while not watcher.reset:  # (its first news: etcd made it)
                await watcher.wait()
                if not watcher.reset:
                    assert not watcher.drain()[0]
        events, reset = watcher.drain()
        assert reset
        assert not events
        assert watcher.compacted == revisions[2]
        watcher.restart(revisions[2] + 1)  # its owner re-read at revisions[2]
        events, _ = await collect(watcher, 1)
        await hub.close()
        assert [(e.kv.key, e.kv.mod_revision) for e in events] == [(b"/c/b", revisions[4])]

    run(10, main)


async def _through_faults(loop: SimLoop, etcd: SimEtcd, client: SimEtcdClient) -> dict[str, Any]:
    """A watch and a lease kept while 30 writes are made, two leader changes and a
    member's death among them; what the watch saw and when."""
    rng = random.Random(f"{loop.seed}-writer")
    hub, keepalive = WatchHub(client), KeepAlive(client)
    watcher = hub.watch(b"/r/", prefix_end(b"/r/"), 0)
    grant = await client.lease_call("LeaseGrant", rpc_pb2.LeaseGrantRequest(TTL=6))
    holder = Holder(int(grant.ID), 6)
    keepalive.add(holder)
    written: list[int] = []
    reader = asyncio.create_task(collect(watcher, 30, within=120))  # its owner, all along
    for i in range(30):
        if i in (8, 20):
            etcd.leader_change()
        if i == 14:
            etcd.down(client.endpoint)
        reply = await client.txn([], [put(b"/r/%d" % (i % 4), b"%d" % i)])
        written.append(int(reply.header.revision))
        await asyncio.sleep(rng.uniform(0.0, 0.4))
    events, resets = await reader
    lease = await client.lease_call(
        "LeaseTimeToLive", rpc_pb2.LeaseTimeToLiveRequest(ID=holder.lease_id)
    )
    await hub.close()
    await keepalive.close()
    return {
        "written": written,
        "seen": [int(e.kv.mod_revision) for e in events],
        "resets": resets,
        "reconnects": holder.reconnects,
        "lease_ttl": int(lease.TTL),
        "gone": holder.gone.is_set(),
        "trace": [(int(e.kv.mod_revision), bytes(e.kv.value)) for e in events],
        "ended_at": loop.time(),
    }


def test_broken_streams_resume_the_watch_with_no_event_missed_or_repeated() -> None:
    found = run(11, _through_faults)
    assert found["seen"] == found["written"]  # every write, once, in order
    assert found["resets"] >= 2  # each new stream told the owner to re-read
    assert found["reconnects"] >= 3  # the keepalive stream was opened again each time
    assert found["lease_ttl"] > 0
    assert not found["gone"]


def test_one_seed_gives_one_history() -> None:
    first, again, other = (
        run(12, _through_faults),
        run(12, _through_faults),
        run(13, _through_faults),
    )
    assert first == again
    assert first["ended_at"] != other["ended_at"]


def test_a_leader_change_renews_every_lease_to_its_full_ttl() -> None:
    async def main(loop: SimLoop, etcd: SimEtcd, client: SimEtcdClient) -> tuple[int, int]:
        grant = await client.lease_call("LeaseGrant", rpc_pb2.LeaseGrantRequest(TTL=10))
        request = rpc_pb2.LeaseTimeToLiveRequest(ID=grant.ID)
        await asyncio.sleep(7)
        before = int((await client.lease_call("LeaseTimeToLive", request)).TTL)
        etcd.leader_change()
        after = int((await client.lease_call("LeaseTimeToLive", request)).TTL)
        return before, after

    before, after = run(14, main)
    assert before == 2  # 3 s left, less the crossings, truncated as etcd truncates
    assert after == 10  # its TTL plus the election timeout (1 s), less the crossings


# -- the streams' grpc.aio shape, as tenure's streams use it ------------------------------


def test_a_stream_reads_eof_after_its_end_and_raises_when_it_breaks() -> None:
    async def main(loop: SimLoop, etcd: SimEtcd, client: SimEtcdClient) -> None:
        grant = await client.lease_call("LeaseGrant", rpc_pb2.LeaseGrantRequest(TTL=5))
        call = client.lease.LeaseKeepAlive(metadata=None)
        await call.write(rpc_pb2.LeaseKeepAliveRequest(ID=grant.ID))
        await call.write(rpc_pb2.LeaseKeepAliveRequest(ID=777))
        await call.done_writing()
        assert (await call.read()).TTL == 5
        assert (await call.read()).TTL == 0  # no such lease
        assert await call.read() is grpc.aio.EOF
        broken = client.lease.LeaseKeepAlive()
        etcd.down(client.endpoint)
        with pytest.raises(grpc.aio.AioRpcError) as lost:
            await broken.read()
        assert lost.value.code() == grpc.StatusCode.UNAVAILABLE
        with pytest.raises(asyncio.InvalidStateError):
            await broken.write(rpc_pb2.LeaseKeepAliveRequest(ID=grant.ID))
        etcd.up(client.endpoint)
        cancelled = client.watch.Watch()
        assert cancelled.cancel()
        assert not cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cancelled.read()

    run(15, main)


def test_an_idle_watch_hears_the_revision_every_ten_minutes() -> None:
    async def main(loop: SimLoop, etcd: SimEtcd, client: SimEtcdClient) -> None:
        call = client.watch.Watch()
        create = rpc_pb2.WatchCreateRequest(key=b"/p", watch_id=7, progress_notify=True)
        await call.write(rpc_pb2.WatchRequest(create_request=create))
        created = await call.read()
        assert created.created
        assert created.watch_id == 7
        assert created.header.revision == 1
        await client.txn([], [put(b"/elsewhere", b"1")])
        async with asyncio.timeout(601):
            progress = await call.read()
        assert not progress.events
        assert progress.watch_id == 7
        assert progress.header.revision == 2
        assert loop.time() >= 600
        call.cancel()

    run(16, main)


# -- the store alone ----------------------------------------------------------------------


def _txn(store: SimEtcdStore, compares: list[Any], success: list[Any]) -> Any:
    return store.txn(rpc_pb2.TxnRequest(compare=compares, success=success))


def test_compares_on_every_target_and_over_ranges() -> None:
    store = SimEtcdStore()
    lease = store.lease_grant(rpc_pb2.LeaseGrantRequest(TTL=1), 0.0)
    assert lease.TTL == 2  # etcd's least TTL
    _txn(store, [], [put(b"/a", b"x", int(lease.ID)), put(b"/b", b"y")])
    _txn(store, [], [put(b"/b", b"z")])

    def held(compare: Any) -> bool:
        return bool(_txn(store, [compare], []).succeeded)

    assert held(C(key=b"/b", target=C.VERSION, result=C.EQUAL, version=2))
    assert held(C(key=b"/b", target=C.VALUE, result=C.GREATER, value=b"y"))
    assert held(C(key=b"/a", target=C.LEASE, result=C.EQUAL, lease=int(lease.ID)))
    assert held(C(key=b"/b", target=C.LEASE, result=C.EQUAL, lease=0))
    assert held(C(key=b"/a", target=C.MOD, result=C.NOT_EQUAL, mod_revision=3))
    assert not held(C(key=b"/nope", target=C.VALUE, result=C.EQUAL, value=b""))
    assert held(C(key=b"/nope", target=C.VERSION, result=C.EQUAL, version=0))
    everything = {"key": b"/", "range_end": prefix_end(b"/")}
    assert held(C(**everything, target=C.CREATE, result=C.EQUAL, create_revision=2))
    assert not held(C(**everything, target=C.MOD, result=C.EQUAL, mod_revision=2))
    assert store.revision == 3  # no compare Txn wrote


def test_a_nested_txn_runs_in_the_branch_taken_in_one_revision() -> None:
    store = SimEtcdStore()
    inner = rpc_pb2.TxnRequest(
        compare=[compare_create(b"/n", 0)], success=[put(b"/n", b"new"), get(b"/n")]
    )
    outer = rpc_pb2.TxnRequest(
        compare=[compare_create(b"/missing", 5)],
        success=[put(b"/no", b"1")],
        failure=[get(b"/n"), rpc_pb2.RequestOp(request_txn=inner)],
    )
    reply = store.txn(outer)
    assert not reply.succeeded
    assert reply.header.revision == 2
    assert not reply.responses[0].response_range.kvs  # read before the nested put
    nested = reply.responses[1].response_txn
    assert nested.succeeded
    assert nested.responses[1].response_range.kvs[0].value == b"new"
    assert nested.responses[1].response_range.header.revision == 2  # it sees the write


def test_a_key_put_twice_or_put_and_deleted_in_one_branch_is_refused() -> None:
    store = SimEtcdStore()
    under = rpc_pb2.DeleteRangeRequest(key=b"/k/", range_end=b"/k0")
    for ops in (
        [put(b"/k", b"1"), put(b"/k", b"2")],
        [put(b"/k/1", b"1"), rpc_pb2.RequestOp(request_delete_range=under)],
    ):
        with pytest.raises(EtcdRpcError, match="duplicate key given in txn request"):
            _txn(store, [], ops)
    both = rpc_pb2.TxnRequest(success=[put(b"/k", b"1")], failure=[put(b"/k", b"2")])
    _txn(store, [], [rpc_pb2.RequestOp(request_txn=both)])  # one branch runs: allowed
    quirk = rpc_pb2.DeleteRangeRequest(key=b"/k", range_end=b"\0")
    _txn(store, [], [put(b"/k", b"3"), rpc_pb2.RequestOp(request_delete_range=quirk)])
    assert store.revision == 3


def test_compaction_keeps_what_a_read_or_watch_at_its_revision_needs() -> None:
    store = SimEtcdStore()
    _txn(store, [], [put(b"/a", b"1"), put(b"/b", b"1")])  # 2
    _txn(store, [], [put(b"/a", b"2")])  # 3
    _txn(store, [], [delete(b"/b"), put(b"/c", b"1")])  # 4: a delete and a put at C
    store.compact(rpc_pb2.CompactionRequest(revision=4))
    with pytest.raises(EtcdRpcError, match="compacted"):
        store.range(rpc_pb2.RangeRequest(key=b"/a", revision=3))
    with pytest.raises(EtcdRpcError, match="compacted"):
        store.compact(rpc_pb2.CompactionRequest(revision=4))
    at = store.range(rpc_pb2.RangeRequest(key=b"/", range_end=b"\0", revision=4))
    assert [(kv.key, kv.value) for kv in at.kvs] == [(b"/a", b"2"), (b"/c", b"1")]
    replayed = [(v.key, v.tombstone) for v in store.keys.changes_since(4)]
    assert replayed == [(b"/c", False)]  # the put at C stays, the tombstone goes


def test_a_revoked_lease_takes_its_keys_in_one_revision_and_keepalives_answer_zero() -> None:
    store = SimEtcdStore()
    lease = int(store.lease_grant(rpc_pb2.LeaseGrantRequest(TTL=10), 0.0).ID)
    _txn(store, [], [put(b"/x", b"1", lease), put(b"/y", b"1", lease)])
    ask = rpc_pb2.LeaseKeepAliveRequest(ID=lease)
    assert store.lease_keepalive(ask, 9.0).TTL == 10
    assert store.expire(18.9) == []
    assert store.lease_keepalive(ask, 19.0).TTL == 0
    assert store.expire(19.0) == [lease]
    assert store.revision == 3
    assert store.lease_time_to_live(rpc_pb2.LeaseTimeToLiveRequest(ID=lease), 20.0).TTL == -1
