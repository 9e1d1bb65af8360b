"""Resume on etcd://: what the record keeps, and an old owner that acts late.

The conformance kit (test_resume) checks the promises on every backend; here,
etcd's own ways: the record keeps the secret's digest (never the secret), an old
owner's re-attach or let-go that raced the news neither takes the session back
nor revokes the resumed lease, and a resumed lease with little TTL left is
renewed at once.
"""

from __future__ import annotations

import asyncio
import hashlib

import msgpack
from aetcd.rpc import rpc_pb2

import tenure
from tenure.backends._session import StoreSession
from tenure.backends.etcd import EtcdBackend
from tenure.backends.etcd._record import SessionRecord
from tenure.backends.etcd._store import EtcdStore
from tenure.errors import SessionExpiredError


def _etcd_session(session: tenure.Session) -> SessionRecord:
    """The session's record, as its client keeps it."""
    inner = session._backend
    assert isinstance(inner, StoreSession)
    assert isinstance(inner.store, EtcdStore)
    return inner.store.record


async def _record(backend: EtcdBackend, session: SessionRecord) -> dict[str, object]:
    reply = await backend.conn.range(rpc_pb2.RangeRequest(key=session.key))
    assert reply.kvs, "the session's record is there"
    value: dict[str, object] = msgpack.unpackb(reply.kvs[0].value)
    assert session.secret not in bytes(reply.kvs[0].value)
    return value


async def _ttl(backend: EtcdBackend, lease_id: int) -> int:
    reply = await backend.conn.lease_call(
        "LeaseTimeToLive", rpc_pb2.LeaseTimeToLiveRequest(ID=lease_id)
    )
    return int(reply.TTL)


async def test_the_record_keeps_the_secrets_digest_and_its_owner(etcd_url: str) -> None:
    async with tenure.connect(etcd_url) as one, tenure.connect(etcd_url) as two:
        await one.create_node("n")
        old = await one.session("n")
        ticket = old.ticket()
        before = await _record(one.backend, _etcd_session(old))  # type: ignore[arg-type]

        new = await two.session("n", resume=ticket)
        after = await _record(two.backend, _etcd_session(new))  # type: ignore[arg-type]

        assert before["key"] == after["key"] == hashlib.sha256(ticket.secret).digest()
        assert after["seq"] == before["seq"] + 1  # type: ignore[operator]
        assert after["owner"] != before["owner"]
        assert after["owner"] == _etcd_session(new).owner_id


async def test_an_old_owner_acting_late_neither_takes_back_nor_revokes(etcd_url: str) -> None:
    async with tenure.connect(etcd_url) as one, tenure.connect(etcd_url) as two:
        await one.create_node("n")
        old = await one.session("n", recovery_window=30.0)
        lock = await old.mutex("job").lock()
        stale = _etcd_session(old)
        new = await two.session("n", resume=old.ticket())
        fresh = _etcd_session(new)

        # A re-attach of the old owner (after a failover of its own, say) and its
        # letting go (its close, or its deadline) come after the news: both must
        # see the record is not theirs.
        await stale.reattach()
        await stale.let_go()

        assert isinstance(old.lost_reason, SessionExpiredError)
        assert await _ttl(two.backend, fresh.lease_id) > 0  # type: ignore[arg-type]
        record = await _record(two.backend, fresh)  # type: ignore[arg-type]
        assert record["owner"] == fresh.owner_id
        [resumed] = new.leases()
        assert resumed.held
        assert resumed.token == lock.token
        assert await new.mutex("other").try_lock() is not None  # its Txns still pass


async def test_a_resumed_lease_with_little_ttl_left_is_renewed_at_once(etcd_url: str) -> None:
    async with tenure.connect(etcd_url) as one, tenure.connect(etcd_url) as two:
        await one.create_node("n")
        old = await one.session("n", recovery_window=2.0)
        lock = await old.mutex("job").lock()
        backend = one.backend
        assert isinstance(backend, EtcdBackend)
        backend.keepalive.remove(old.id)  # the process died, as it were: no renewals
        await asyncio.sleep(1.2)  # some of its 2 s TTL is gone

        new = await two.session("n", resume=old.ticket())
        await asyncio.sleep(3.0)  # longer than the whole TTL

        assert new.lost_reason is None
        [resumed] = new.leases()
        assert resumed.held
        assert resumed.token == lock.token
        assert await _ttl(two.backend, new.id) > 0  # type: ignore[arg-type]


async def test_a_session_resumed_in_its_own_client_stays_renewed(etcd_url: str) -> None:
    async with tenure.connect(etcd_url) as client:
        await client.create_node("n")
        old = await client.session("n", recovery_window=2.0)
        lock = await old.mutex("job").lock()

        new = await client.session("n", resume=old.ticket())
        await asyncio.sleep(3.0)  # longer than the whole TTL: the old one's end must not
        # have stopped the renewals of the same lease for the new one

        assert isinstance(old.lost_reason, SessionExpiredError)
        assert new.lost_reason is None
        [resumed] = new.leases()
        assert resumed.held
        assert resumed.token == lock.token
