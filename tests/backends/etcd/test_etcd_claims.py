"""Claims on etcd://, checked on the keys and leases etcd holds (backends/etcd/_claims.py).

The conformance kit (``test_claim``) checks what every backend promises; these check
how etcd:// keeps it: a claim's record and ``c/<name>`` on a lease of TTL at_most
(plus the margin, rounded up), the token the Txn's revision, a release that moves
both keys to the at_least lease (or deletes them when it is gone), max_claims counted
exactly under claims made at once, and the record of an ended claim cleared.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import msgpack
import pytest
from aetcd.rpc import rpc_pb2

import tenure
from tenure._core.claims import parse_claim
from tenure._etcd.requests import prefix_end
from tenure.backends.etcd import EtcdBackend
from tenure.backends.etcd._claims import LEASE_MARGIN, lease_seconds
from tenure.errors import LimitExceededError, UnavailableError
from tenure.testing.conformance.support import within
from tests.backends.scenarios import claimed_past_max_claims


def _backend(client: tenure.Client) -> EtcdBackend:
    backend = client.backend
    assert isinstance(backend, EtcdBackend)
    return backend


async def _keys(client: tenure.Client, under: bytes) -> dict[bytes, Any]:
    """Every key of the client's prefix that starts with ``under`` (without either)."""
    start = _backend(client).layout.prefix + under
    request = rpc_pb2.RangeRequest(key=start, range_end=prefix_end(start))
    reply = await _backend(client).conn.range(request)
    return {bytes(kv.key)[len(start) :]: kv for kv in reply.kvs}


async def _marker(client: tenure.Client, name: str) -> dict[str, Any]:
    """The value of node n's ``c/<name>``: the claim's id and its leases."""
    (kv,) = (await _keys(client, f"n/n/c/{name}".encode())).values()
    value: dict[str, Any] = msgpack.unpackb(kv.value)
    return value


async def _ttl(client: tenure.Client, lease: int) -> tuple[int, int]:
    """A lease's (TTL left, TTL granted); (-1, 0) once it is gone."""
    request = rpc_pb2.LeaseTimeToLiveRequest(ID=lease)
    reply = await _backend(client).conn.lease_call("LeaseTimeToLive", request)
    return int(reply.TTL), int(reply.grantedTTL)


def test_a_lease_lasts_the_time_asked_plus_the_margin_in_whole_seconds() -> None:
    assert LEASE_MARGIN == 1.0
    assert lease_seconds(60.0) == 61
    assert lease_seconds(59.2) == 61
    assert lease_seconds(0.1) == 2  # etcd's least TTL


async def test_a_claim_is_two_keys_on_its_at_most_lease_and_its_token_the_txns_revision(
    etcd_url: str,
) -> None:
    async with tenure.connect(etcd_url) as client:
        await client.create_node("n")
        session = await client.session("n")
        before = await session.mutex("m").lock()
        claim = await session.claim("nightly", at_least=30.0, at_most=600.0, data=b"job")
        assert claim is not None
        keys = await _keys(client, b"n/n/")
        rec, mark = keys[b"s/nightly/rec"], keys[b"c/nightly"]
        assert int(rec.lease) == int(mark.lease) != 0
        assert int(rec.create_revision) == int(mark.create_revision) == claim.token
        assert claim.token > before.token
        stored = msgpack.unpackb(rec.value)
        assert stored["limit"] == 1
        assert stored["data"].split(b" ")[2] == b"-"  # written before its revision was known
        described = await session.semaphore("nightly").describe()
        assert parse_claim("nightly", described.data).token == claim.token  # read with it
        marker = msgpack.unpackb(mark.value)
        assert marker["id"] == claim.id
        assert marker["most"] == int(rec.lease)
        assert (await _ttl(client, marker["most"]))[1] == 601
        assert (await _ttl(client, marker["least"]))[1] == 31
        # A release moves both keys to the at_least lease, and writes the token out.
        assert await claim.release()
        keys = await _keys(client, b"n/n/")
        rec, mark = keys[b"s/nightly/rec"], keys[b"c/nightly"]
        assert int(rec.lease) == int(mark.lease) == marker["least"]
        record = parse_claim("nightly", msgpack.unpackb(rec.value)["data"])
        assert (record.token, record.released_at is not None) == (claim.token, True)


async def test_a_release_after_at_least_deletes_the_claims_keys(etcd_url: str) -> None:
    async with tenure.connect(etcd_url) as client:
        await client.create_node("n")
        session = await client.session("n")
        claim = await session.claim("a", at_least=30.0, at_most=600.0)
        assert claim is not None
        marker = await _marker(client, "a")
        await _backend(client).conn.lease_call(  # as if at_least had passed
            "LeaseRevoke", rpc_pb2.LeaseRevokeRequest(ID=marker["least"])
        )
        assert await client.release_claim("n", "a", claim.id)
        assert await _keys(client, b"n/n/s/a/") == {}
        assert await _keys(client, b"n/n/c/") == {}
        zero = await session.claim("b", at_least=0.0, at_most=600.0)  # no at_least lease
        assert zero is not None
        assert (await _marker(client, "b"))["least"] == 0
        assert await zero.release()
        assert await _keys(client, b"n/n/c/") == {}


async def test_the_end_is_the_leases_and_the_claim_goes_with_its_keys(etcd_url: str) -> None:
    async with tenure.connect(etcd_url) as client:
        await client.create_node("n")
        session = await client.session("n")
        claim = await session.claim("job", at_least=1.0, at_most=600.0)
        assert claim is not None
        marker = await _marker(client, "job")
        await _backend(client).conn.lease_call(  # its at_most, come early
            "LeaseRevoke", rpc_pb2.LeaseRevokeRequest(ID=marker["most"])
        )
        keys = await _keys(client, b"n/n/")
        assert b"c/job" not in keys  # both went with the lease, in one revision
        assert b"s/job/rec" not in keys
        again = await session.claim("job", at_least=1.0, at_most=600.0)
        assert again is not None
        assert again.token > claim.token


async def test_max_claims_is_counted_exactly_under_claims_made_at_once(etcd_url: str) -> None:
    async with claimed_past_max_claims(etcd_url) as client:
        assert len(await _keys(client, b"n/n/c/")) == 5


async def test_an_ended_claims_record_put_again_without_its_lease_is_cleared(
    etcd_url: str,
) -> None:
    """A compare_and_set of a claim's record puts it with no lease: when the claim's
    key goes, the record stays, an ended claim's; the next claim clears it."""
    async with tenure.connect(etcd_url) as client:
        await client.create_node("n")
        session = await client.session("n")
        claim = await session.claim("job", at_least=0.0, at_most=600.0)
        assert claim is not None
        semaphore = session.semaphore("job")
        data = (await semaphore.describe()).data
        assert await semaphore.compare_and_set(data, data)  # its record, on no lease now
        marker = await _marker(client, "job")
        await _backend(client).conn.lease_call(
            "LeaseRevoke", rpc_pb2.LeaseRevokeRequest(ID=marker["most"])
        )
        keys = await _keys(client, b"n/n/")
        assert b"c/job" not in keys
        assert int(keys[b"s/job/rec"].lease) == 0
        again = await session.claim("job", at_least=0.0, at_most=600.0)
        assert again is not None
        assert again.token > claim.token
        assert int((await _keys(client, b"n/n/s/job/"))[b"rec"].lease) != 0


@pytest.mark.parametrize("at_most", [0.5, 2.0])
async def test_a_claim_of_a_second_or_two_still_gets_etcds_least_ttl(
    etcd_url: str, at_most: float
) -> None:
    async with tenure.connect(etcd_url) as client:
        await client.create_node("n")
        session = await client.session("n")
        claim = await session.claim("short", at_least=0.0, at_most=at_most)
        assert claim is not None
        marker = await _marker(client, "short")
        assert (await _ttl(client, marker["most"]))[1] == lease_seconds(at_most)


async def test_a_claim_whose_txn_answer_was_lost_is_found_by_its_retry(etcd_url: str) -> None:
    """The claim's Txn commits but its answer is lost (UnavailableError): its leases are
    the claim's, so they stay, and the retry (the same id) finds the claim it made."""
    async with tenure.connect(etcd_url) as client:
        await client.create_node("n")
        session = await client.session("n")
        conn = _backend(client).conn
        real, claim_key = conn.send_txn, _backend(client).layout.claim("n", "job")
        committed: list[int] = []

        async def answer_lost(request: Any, *, timeout: float | None = None) -> Any:
            reply = await real(request, timeout=timeout)
            puts = [op.request_put.key for op in request.success if op.HasField("request_put")]
            if reply.succeeded and not committed and claim_key in puts:
                committed.append(int(reply.header.revision))
                raise UnavailableError("the answer was lost")
            return reply

        conn.send_txn = answer_lost  # type: ignore[method-assign]
        claim = await session.claim("job", at_least=30.0, at_most=600.0)
        assert claim is not None
        assert committed == [claim.token]  # the first Txn's claim, not a second one
        keys = await _keys(client, b"n/n/")
        assert int(keys[b"c/job"].create_revision) == claim.token
        marker = await _marker(client, "job")
        assert (await _ttl(client, marker["most"]))[0] > 0  # its leases were kept
        assert (await _ttl(client, marker["least"]))[0] > 0


async def test_a_claim_past_etcds_request_size_is_refused_at_once(etcd_url: str) -> None:
    # The record carries the data in hex (twice its bytes): within a node's
    # max_data_size (up to 16 MiB), past etcd's --max-request-bytes (1.5 MiB by
    # default). etcd refuses such a Txn whatever the retry: LimitExceededError at once,
    # nothing kept, the session goes on (it was sent again, and hung, before).
    async with tenure.connect(etcd_url) as client:
        await client.create_node("n", max_data_size=4 * 1024 * 1024)
        session = await client.session("n")
        sent: list[Callable[[], Awaitable[object]]] = [
            lambda: session.claim("x", at_least=1.0, at_most=5.0, data=b"d" * 1_000_000),
            lambda: session.semaphore("y").create(1, b"d" * 2_000_000),
            lambda: session.acquire("z", 1, ephemeral=True, data=b"d" * 2_000_000),
        ]
        for send in sent:
            with pytest.raises(LimitExceededError, match="--max-request-bytes"):
                await within(send(), "a request etcd refuses for its size")
        assert await _keys(client, b"n/n/c/") == {}  # no claim was kept
        claim = await session.claim("x", at_least=1.0, at_most=5.0, data=b"small")
        assert claim is not None
        await claim.release()
