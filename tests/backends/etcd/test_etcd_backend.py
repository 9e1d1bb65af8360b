"""The etcd:// backend's own parts, on a real etcd: layout, tokens, leases, refusals."""

from __future__ import annotations

import asyncio
from typing import Any

import msgpack
import pytest
from aetcd.rpc import rpc_pb2

import tenure
from tenure._etcd.requests import prefix_end, put
from tenure.backends.etcd import EtcdBackend, lease_ttl
from tenure.backends.etcd._keys import encode
from tenure.errors import InvalidArgumentError, SessionExpiredError, UnsupportedError


def _backend(client: tenure.Client) -> EtcdBackend:
    backend = client.backend
    assert isinstance(backend, EtcdBackend)
    return backend


async def _keys(backend: EtcdBackend) -> dict[bytes, Any]:
    prefix = backend.layout.prefix
    reply = await backend.conn.range(rpc_pb2.RangeRequest(key=prefix, range_end=prefix_end(prefix)))
    return {bytes(kv.key)[len(prefix) :]: kv for kv in reply.kvs}


async def test_the_key_layout(etcd_url: str) -> None:
    async with tenure.connect(etcd_url) as client:
        await client.create_node("app/1")
        async with client.session("app/1") as session:
            await session.semaphore("pool").create(limit=3, data=b"d")
            lease = await session.semaphore("pool").acquire(count=2)
            keys = await _keys(_backend(client))
            sid = f"{session.id:016x}".encode()
            request = b"n/app%2F1/s/pool/q/" + sid + b"-00000000"
            # Granted by the Txn that made it: one key, which says so; its
            # create_revision is the token.
            assert set(keys) == {
                b"n/app%2F1/cfg",
                b"n/app%2F1/sess/" + sid,
                b"n/app%2F1/s/pool/rec",
                request,
            }
            value = msgpack.unpackb(keys[request].value)
            assert isinstance(value.pop("at"), float)  # when, by the granting client's clock
            assert value == {"count": 2, "data": b"", "g": True}
            assert int(keys[request].create_revision) == lease.token
            # Requests, grants and the session record live on the session's lease.
            for key in (b"n/app%2F1/sess/" + sid, request):
                assert int(keys[key].lease) == session.id
            assert int(keys[b"n/app%2F1/s/pool/rec"].lease) == 0
            # A request that waited is granted by a grant key of its own.
            other = await client.session("app/1")
            waiting = asyncio.ensure_future(other.semaphore("pool").acquire(count=2))
            await asyncio.sleep(0.2)
            await lease.release()
            second = await asyncio.wait_for(waiting, 5)
            keys = await _keys(_backend(client))
            osid = f"{other.id:016x}".encode()
            grant = keys[b"n/app%2F1/s/pool/g/" + osid + b"-00000000"]
            assert int(grant.create_revision) == second.token
            assert int(grant.lease) == other.id
            assert set(msgpack.unpackb(grant.value)) == {"at"}  # when it was granted
            await second.release()
            await other.close()
        assert set(await _keys(_backend(client))) == {b"n/app%2F1/cfg", b"n/app%2F1/s/pool/rec"}
        await client.drop_node("app/1")
        assert await _keys(_backend(client)) == {}


async def test_the_token_is_the_grant_revision_and_increases(etcd_url: str) -> None:
    async with tenure.connect(etcd_url) as client:
        await client.create_node("n")
        async with client.session("n") as first, client.session("n") as second:
            held = await first.mutex("m").lock()
            waiting = asyncio.ensure_future(second.mutex("m").lock())
            await asyncio.sleep(0.2)  # queued: its request key is older than its grant
            await held.release()
            lease = await asyncio.wait_for(waiting, 5)
            keys = await _keys(_backend(client))
            sid = f"{second.id:016x}".encode()
            grant = keys[b"n/n/s/m/g/" + sid + b"-00000000"]
            request = keys[b"n/n/s/m/q/" + sid + b"-00000000"]
            assert lease.token == int(grant.create_revision)
            assert int(request.create_revision) < lease.token
            assert held.token < lease.token
            await lease.release()
            tokens = []
            for _ in range(3):
                again = await first.mutex("m").lock()
                tokens.append(again.token)
                await again.release()
            assert tokens == sorted(set(tokens))
            assert tokens[0] > lease.token


async def test_a_waiter_whose_lease_expired_is_never_told_it_holds(etcd_url: str) -> None:
    async with tenure.connect(etcd_url) as client:
        await client.create_node("n")
        backend = _backend(client)
        async with client.session("n") as holder:
            held = await holder.mutex("m").lock()
            waiter = await client.session("n", recovery_window=2)
            waiting = asyncio.ensure_future(waiter.mutex("m").lock())
            await asyncio.sleep(0.2)
            # etcd lets the waiter's lease go (as an expiry would), before the release.
            await backend.conn.lease_call("LeaseRevoke", rpc_pb2.LeaseRevokeRequest(ID=waiter.id))
            await held.release()
            with pytest.raises(SessionExpiredError):
                await asyncio.wait_for(waiting, 5)
            assert isinstance(waiter.lost_reason, SessionExpiredError)
            assert not any(b"/g/" in key for key in await _keys(backend))
            again = await holder.mutex("m").lock()  # nobody holds it
            assert again.token > held.token


@pytest.mark.parametrize(("window", "ttl"), [(0.5, 2), (2.0, 2), (2.3, 3), (30.0, 30)])
async def test_the_lease_ttl_is_the_window_rounded_up(
    etcd_url: str, window: float, ttl: int
) -> None:
    assert lease_ttl(window) == ttl
    async with tenure.connect(etcd_url) as client:
        await client.create_node("n")
        async with client.session("n", recovery_window=window) as session:
            reply = await _backend(client).conn.lease_call(
                "LeaseTimeToLive", rpc_pb2.LeaseTimeToLiveRequest(ID=session.id)
            )
            assert int(reply.grantedTTL) == ttl
            assert session.recovery_window == ttl  # reported as it is kept


async def test_settings_etcd_cannot_honour_are_refused(etcd_url: str) -> None:
    async with tenure.connect(etcd_url) as client:
        with pytest.raises(UnsupportedError, match="lock_delay"):
            await client.create_node("a", lock_delay=1.0)
        with pytest.raises(UnsupportedError, match="default_lease"):
            await client.create_node("b", default_lease=5.0)
        await client.create_node("c")
        with pytest.raises(UnsupportedError, match="lock_delay"):
            await client.alter_node("c", lock_delay=0.5)
        assert tenure.Capability.LEASE_TTL not in client.capabilities
        assert tenure.Capability.REPLICATED in client.capabilities


async def test_unknown_options_are_named(etcd_url: str) -> None:
    with pytest.raises(InvalidArgumentError, match="colour"):
        await tenure.connect(etcd_url + "&colour=blue")


@pytest.mark.parametrize("option", ["connect_timeout", "request_timeout"])
@pytest.mark.parametrize("value", ["soon", "0", "-1", "7200"])
async def test_timeouts_must_be_sensible_seconds(etcd_url: str, option: str, value: str) -> None:
    with pytest.raises(InvalidArgumentError, match=option):
        await tenure.connect(f"{etcd_url}&{option}={value}")


#: A node's settings exactly as a release before the rename stored them (by their
#: field names then, in their order).
OLD_SETTINGS: dict[str, Any] = {
    "session_timeout": 12.0,
    "lock_delay": 0.0,
    "default_lease": None,
    "max_sessions": 10_000,
    "max_semaphores": 100_000,
    "max_waiters": 7,
    "max_data_size": 65_536,
    "max_watches_per_session": 1_000,
    "max_missed_per_session": 256,
}


async def test_the_settings_keep_their_stored_names_and_old_ones_read_back(
    etcd_url: str,
) -> None:
    """recovery_window is ``session_timeout`` in the cfg key, as before the rename."""
    async with tenure.connect(etcd_url) as client:
        backend = _backend(client)
        await client.create_node("new", recovery_window=9.0)
        stored = msgpack.unpackb((await _keys(backend))[b"n/new/cfg"].value)
        assert list(stored) == [*OLD_SETTINGS, "max_claims"]  # (new with claims)
        assert stored["session_timeout"] == 9.0
        altered = await client.alter_node("new", recovery_window=5.0)
        assert altered.config.recovery_window == 5.0
        stored = msgpack.unpackb((await _keys(backend))[b"n/new/cfg"].value)
        assert stored["session_timeout"] == 5.0
        # A node an older release created: read, used and altered by its old key.
        await backend.conn.txn([], [put(backend.layout.config("old"), encode(OLD_SETTINGS))])
        config = (await client.describe_node("old")).config
        assert (config.recovery_window, config.max_waiters) == (12.0, 7)
        assert config.max_claims == tenure.NodeConfig().max_claims  # it kept none
        async with client.session("old") as session:
            assert session.recovery_window == 12.0
        assert (await client.alter_node("old", max_waiters=8)).config.recovery_window == 12.0
        stored = msgpack.unpackb((await _keys(backend))[b"n/old/cfg"].value)
        assert stored == {**OLD_SETTINGS, "max_waiters": 8, "max_claims": config.max_claims}


async def test_closing_a_client_leaves_no_task_of_its_streams_behind(etcd_url: str) -> None:
    """The keepalive and watch streams' writers each wait on a helper task (the wake
    event, the outbox queue); a close cancelled the writer mid-wait and left the
    helper pending, which asyncio reported as destroyed when it was collected."""
    before = asyncio.all_tasks()
    async with tenure.connect(etcd_url) as one, tenure.connect(etcd_url) as two:
        await one.create_node("n")
        first, second = await one.session("n"), await two.session("n")
        lock = await first.mutex("x").lock()
        waiting = asyncio.ensure_future(second.mutex("x").lock())  # a watch is open
        await asyncio.sleep(0.3)
        await lock.release()
        await (await asyncio.wait_for(waiting, 5)).release()
    await asyncio.sleep(0.1)
    left = asyncio.all_tasks() - before - {asyncio.current_task()}
    assert not left, [task.get_coro() for task in left]
