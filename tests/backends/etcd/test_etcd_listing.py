"""Listing, identity and kill_session on a real etcd: what the kit cannot reach.

Names are %-encoded in keys and the encoded order differs from the names' (every
page is still in code point order); semaphore keys are read in several Ranges at
one revision; times are those of the clients that wrote the keys (etcd has no
clock to offer); keys written before tenure 0.14 read as defaults; kill_session
revokes the session's lease after putting a marker its client reads, also when
the client was cut off.
"""

from __future__ import annotations

from typing import Any

import pytest

import tenure
from tenure._core.values import ClientIdentity
from tenure._etcd.requests import get_prefix, put
from tenure.backends.etcd import EtcdBackend
from tenure.backends.etcd import _listing as etcd_listing
from tenure.backends.etcd._keys import decode, encode
from tests.backends.store_listing import (
    check_identity_and_times,
    check_kill_partitioned,
    check_kill_session,
    check_nodes_in_order,
    check_semaphores_by_prefix,
)
from tests.netproxy import NetProxy


async def test_nodes_are_listed_in_code_point_order(etcd_url: str) -> None:
    await check_nodes_in_order(etcd_url)


async def test_semaphores_page_by_prefix_across_ranges(
    etcd_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(etcd_listing, "KEYS_PER_RANGE", 7)  # many Ranges per page
    await check_semaphores_by_prefix(etcd_url)


async def test_owners_waiters_and_sessions_carry_identity_and_client_time(etcd_url: str) -> None:
    await check_identity_and_times(etcd_url, store_clock=False)


async def test_kill_session_revokes_the_lease_and_tells_its_client(etcd_url: str) -> None:
    await check_kill_session(etcd_url, lock_delay=0.0)


async def test_kill_session_of_a_partitioned_client(etcd_member: Any, etcd_url: str) -> None:
    endpoint = etcd_member.endpoints[0]
    host, port = endpoint.rsplit(":", 1)
    async with NetProxy(host, int(port)) as proxy:
        through = etcd_url.replace(endpoint, f"127.0.0.1:{proxy.port}")
        await check_kill_partitioned(proxy, through, etcd_url)


async def test_keys_written_before_identities_read_as_defaults(etcd_url: str) -> None:
    """A session record, a request and a grant key as tenure before 0.14 wrote them."""
    async with tenure.connect(etcd_url) as client:
        backend = client.backend
        assert isinstance(backend, EtcdBackend)
        await client.create_node("n")
        holder = await client.session("n", description="old")
        lease = await holder.mutex("m").lock()
        waiter = await client.session("n")
        layout, conn = backend.layout, backend.conn
        reply = await conn.txn([], [get_prefix(layout.node("n"))])
        for kv in reply.responses[0].response_range.kvs:
            key = bytes(kv.key)
            if key.startswith(layout.sessions("n")):
                value = decode(kv.value)
                for field in ("host", "pid", "name", "at"):
                    value.pop(field, None)
                await conn.txn([], [put(key, encode(value), int(kv.lease))])
            elif b"/q/" in key:
                value = decode(kv.value)
                value.pop("at", None)
                await conn.txn([], [put(key, encode(value), int(kv.lease))])
        sessions = await backend.list_sessions("n", after=0, limit=9)
        old = next(s for s in sessions if s.session_id == holder.id)
        assert (old.description, old.identity, old.created_at) == ("old", ClientIdentity(), None)
        (owner,) = (await waiter.semaphore("m").describe(owners=True)).owners
        assert (owner.token, owner.since, owner.description) == (lease.token, None, "old")
        await lease.release()
        again = await waiter.mutex("m").lock(timeout=5)
        (owner,) = (await waiter.semaphore("m").describe(owners=True)).owners
        assert owner.token == again.token
        assert owner.since is not None
