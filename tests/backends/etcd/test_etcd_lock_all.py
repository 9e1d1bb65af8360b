"""lock_all on etcd://, checked on the keys etcd holds (src/tenure/backends/etcd/_set.py).

The conformance kit (``test_lock_all``) and the differential test check what every
backend promises; these check how etcd:// keeps it: one Txn puts every member's
request at one create_revision, a waiting member holds its queue back, a set's
grants ascend in the names' order, and every way out (a timeout, a cancel, a lost
answer, a forced delete, a refusal) leaves no key of the set behind.
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgpack
import pytest
from aetcd.rpc import rpc_pb2

import tenure
from tenure._etcd.requests import prefix_end
from tenure.backends.etcd import EtcdBackend
from tenure.errors import LimitExceededError, NotFoundError
from tests.backends.etcd.proxied import proxied_session


def _backend(client: tenure.Client) -> EtcdBackend:
    backend = client.backend
    assert isinstance(backend, EtcdBackend)
    return backend


async def _keys(client: tenure.Client, under: bytes = b"") -> dict[bytes, Any]:
    """Every key of the client's prefix that starts with ``under`` (without the prefix)."""
    prefix = _backend(client).layout.prefix
    start = prefix + under
    request = rpc_pb2.RangeRequest(key=start, range_end=prefix_end(start))
    reply = await _backend(client).conn.range(request)
    return {bytes(kv.key)[len(prefix) :]: kv for kv in reply.kvs}


async def _semaphore_keys(client: tenure.Client, node: str, name: str) -> set[bytes]:
    """The keys under semaphore ``name`` of ``node`` (requests, grants, placeholders)."""
    return set(await _keys(client, f"n/{node}/s/{name}/".encode()))


async def _waiters(session: tenure.Session, name: str) -> list[int]:
    try:
        description = await session.semaphore(name).describe(waiters=True)
    except NotFoundError:  # an ephemeral semaphore nobody has asked for (yet, or now)
        return []
    return [waiter.session_id for waiter in description.waiters]


async def _until_waiting(session: tenure.Session, name: str, count: int) -> None:
    for _ in range(200):
        if len(await _waiters(session, name)) == count:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{name!r} never had {count} waiters")


async def test_a_free_set_is_one_request_per_name_at_one_revision_tokens_in_name_order(
    etcd_url: str,
) -> None:
    async with tenure.connect(etcd_url) as client:
        await client.create_node("n")
        session = await client.session("n")
        names = ["b", "a", "c"]  # the names' order, not their sort order, orders the tokens
        held = await session.lock_all(names, timeout=5)
        tokens = [held.tokens[name] for name in names]
        assert tokens == sorted(set(tokens))
        requests = {}
        for name in names:
            keys = await _keys(client, f"n/n/s/{name}/q/".encode())
            (kv,) = keys.values()
            requests[name] = kv
            value = msgpack.unpackb(kv.value)
            assert value["grp"] == 3  # a member of a set of three
            assert int(kv.lease) == session.id
        # One Txn made them all: one create_revision, the set's arrival.
        assert len({int(kv.create_revision) for kv in requests.values()}) == 1
        # The first name's grant is its request (granted by that Txn); each later
        # one a grant key of its own, at a revision of its own.
        assert tokens[0] == int(requests["b"].create_revision)
        for name, token in zip(names[1:], tokens[1:], strict=True):
            (grant,) = (await _keys(client, f"n/n/s/{name}/g/".encode())).values()
            assert int(grant.create_revision) == token
        await held.release()
        for name in names:
            assert await _semaphore_keys(client, "n", name) == set()


async def test_a_waiting_member_holds_back_its_queue_until_the_set_is_granted_whole(
    etcd_url: str,
) -> None:
    async with tenure.connect(etcd_url) as one, tenure.connect(etcd_url) as two:
        await one.create_node("n")
        first, second = await one.session("n"), await two.session("n")
        busy = await first.mutex("b").lock()
        locking = asyncio.ensure_future(second.lock_all(["a", "b"], timeout=10))
        await _until_waiting(first, "b", 1)
        # "a" is free, but the set waits for it: a later request of "a" may not pass.
        assert await first.mutex("a").try_lock() is None
        later = asyncio.ensure_future(first.mutex("a").lock(timeout=10))
        await _until_waiting(first, "a", 2)
        assert not later.done()
        await busy.release()
        held = await asyncio.wait_for(locking, 10)
        assert not later.done()
        await held.release()
        lock = await asyncio.wait_for(later, 10)
        assert lock.token > max(held.tokens.values())
        await lock.release()


async def test_a_timeout_and_a_cancel_take_every_member_key_back(etcd_url: str) -> None:
    async with tenure.connect(etcd_url) as one, tenure.connect(etcd_url) as two:
        await one.create_node("n")
        first, second = await one.session("n"), await two.session("n")
        busy = await first.mutex("b").lock()
        with pytest.raises(TimeoutError):
            await second.lock_all(["a", "b", "c"], timeout=0.3)
        for name in ("a", "c"):
            assert await _semaphore_keys(one, "n", name) == set()
        assert len(await _semaphore_keys(one, "n", "b")) == 1  # busy's request alone
        locking = asyncio.ensure_future(second.lock_all(["a", "b", "c"]))
        await _until_waiting(first, "c", 1)
        locking.cancel()
        with pytest.raises(asyncio.CancelledError):
            await locking
        for _ in range(100):
            if not await _semaphore_keys(one, "n", "a"):
                break
            await asyncio.sleep(0.02)
        assert await _semaphore_keys(one, "n", "a") == set()
        assert await _semaphore_keys(one, "n", "c") == set()
        await busy.release()
        assert await _semaphore_keys(one, "n", "b") == set()


async def test_a_forced_delete_of_one_name_ends_the_waiting_set_whole(etcd_url: str) -> None:
    async with tenure.connect(etcd_url) as one, tenure.connect(etcd_url) as two:
        await one.create_node("n")
        first, second = await one.session("n"), await two.session("n")
        busy = await first.mutex("b").lock()
        locking = asyncio.ensure_future(second.lock_all(["a", "b"], timeout=10))
        await _until_waiting(first, "a", 1)
        await first.semaphore("b").delete(force=True)
        with pytest.raises(NotFoundError):
            await asyncio.wait_for(locking, 10)
        assert busy.lost_reason is not None
        for _ in range(100):
            if not await _semaphore_keys(one, "n", "a"):
                break
            await asyncio.sleep(0.02)
        assert await _semaphore_keys(one, "n", "a") == set()
        # The other name is free for anyone at once.
        lock = await first.mutex("a").lock(timeout=1)
        await lock.release()
        assert not second.closed


async def test_sixty_four_names_fit_etcds_txn_limits_at_once_and_queued(etcd_url: str) -> None:
    names = [f"k{i:02d}" for i in range(64)]  # MAX_SET_NAMES; etcd's 128 ops a Txn
    async with tenure.connect(etcd_url) as one, tenure.connect(etcd_url) as two:
        await one.create_node("n")
        first, second = await one.session("n"), await two.session("n")
        held = await first.lock_all(names, timeout=5)
        tokens = [held.tokens[name] for name in names]
        assert tokens == sorted(set(tokens))
        waiting = asyncio.ensure_future(second.lock_all(names[::-1], timeout=20))
        await _until_waiting(first, "k63", 1)
        await held.release()
        again = await asyncio.wait_for(waiting, 20)
        assert min(again.tokens.values()) > max(tokens)
        await again.release()
        assert await _keys(one, b"n/n/s/") == {}


async def test_a_set_over_max_semaphores_is_refused_and_leaves_no_placeholder(
    etcd_url: str,
) -> None:
    async with tenure.connect(etcd_url) as client:
        await client.create_node("n", max_semaphores=3)
        session = await client.session("n")
        kept = await session.mutex("x").lock()  # one semaphore exists: room for two more
        with pytest.raises(LimitExceededError, match="max_semaphores"):
            await session.lock_all(["a", "b", "c"], timeout=5)
        # Nothing of the refused set stays: no request, no placeholder (p/).
        assert all(key.startswith(b"n/n/s/x/") for key in await _keys(client, b"n/n/s/"))
        held = await session.lock_all(["a", "b"], timeout=5)  # two fit
        assert set(held.tokens) == {"a", "b"}
        await held.release()
        await kept.release()


async def test_a_withdrawal_whose_answers_are_lost_is_sent_until_answered(
    etcd_member: Any, etcd_url: str
) -> None:
    """A waiting set is cancelled while etcd's answers are lost: the withdrawal (a read,
    then one Txn for every member) is sent again until answered, and leaves nothing."""
    async with proxied_session(etcd_member, etcd_url) as opened:
        proxy, session, other = opened.proxy, opened.session, opened.other
        other_client = opened.other_client
        busy = await other.mutex("b").lock()
        locking = asyncio.ensure_future(session.lock_all(["a", "b"], timeout=30))
        await _until_waiting(other, "a", 1)
        proxy.lose_downstream()  # requests reach etcd; no answer comes back
        try:
            locking.cancel()
            await asyncio.sleep(2.5)  # past connect_timeout: its first try failed
            assert await _waiters(other, "a") == [session.id]  # (it reads first)
        finally:
            proxy.lose_downstream(False)
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(locking, 10)
        await _until_waiting(other, "a", 0)  # sent again, and answered
        assert await _waiters(other, "b") == []
        await busy.release()
        held = await asyncio.wait_for(session.lock_all(["a", "b"], timeout=5), 10)
        assert held.tokens["b"] > busy.token
        await held.release()
        assert not session.closed
        for name in ("a", "b"):
            assert await _semaphore_keys(other_client, "n", name) == set()


async def test_a_resume_finishes_a_committed_set_and_withdraws_a_waiting_one(
    etcd_url: str,
) -> None:
    """The previous owner died between the Txn that committed its set and the grant
    keys that follow (simulated: one grant key deleted): the resumed session holds
    the whole set. Its set that still waited is withdrawn, placeholders and all."""
    async with tenure.connect(etcd_url) as one, tenure.connect(etcd_url) as two:
        await one.create_node("n")
        old = await one.session("n", recovery_window=30)
        other = await two.session("n")
        held = await old.lock_all(["a", "b"], timeout=5)
        busy = await other.mutex("d").lock()
        waiting = asyncio.ensure_future(old.lock_all(["c", "d"]))
        await _until_waiting(other, "c", 1)
        sid = f"{old.id:016x}".encode()
        (grant_b,) = await _keys(one, b"n/n/s/b/g/" + sid)
        await _backend(one).conn.txn(
            [],
            [
                rpc_pb2.RequestOp(
                    request_delete_range=rpc_pb2.DeleteRangeRequest(
                        key=_backend(one).layout.prefix + grant_b
                    )
                )
            ],
        )
        new = await two.session("n", resume=old.ticket())
        resumed = {lease.name: lease for lease in new.leases()}
        assert set(resumed) == {"a", "b"}
        assert resumed["a"].token == held.tokens["a"]
        assert resumed["b"].token > held.tokens["b"]  # granted again, by the resume
        assert await _waiters(other, "c") == []
        assert await _waiters(other, "d") == []
        assert await _semaphore_keys(two, "n", "c") == set()
        assert await other.mutex("a").try_lock() is None  # the set is held, whole
        assert await other.mutex("b").try_lock() is None
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)
        await busy.release()
        for lease in resumed.values():
            await lease.release()
        lock = await other.mutex("b").lock(timeout=5)
        await lock.release()
