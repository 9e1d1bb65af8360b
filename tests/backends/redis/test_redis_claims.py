"""Claims on redis://: what the conformance kit cannot see there.

A claim is its semaphore's record (the data), an entry of the node's ``clm`` hash
(its times by Redis's clock) and a ``c:<name>`` deadline of ``due``; these tests read
them from Redis, compare the record's time with Redis's TIME, call the release
function itself twice with one request key, and find a claim whose end no reap got to.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import msgpack
import pytest

import tenure
from tenure._core.claims import parse_claim
from tenure.backends.redis import RedisBackend
from tenure.errors import NotFoundError
from tests.backends.redis import places
from tests.backends.redis.places import node_place
from tests.redis.server import RedisServer


class Place(places.Place):
    """Node n's place, with readers of a claim's keys."""

    async def now(self) -> float:
        """Redis's clock (TIME), UNIX seconds."""
        seconds, micros = await self.admin.time()
        return float(seconds) + micros / 1e6

    async def data(self, name: str) -> bytes:
        """The data of semaphore ``name`` (a claim's record)."""
        raw = await self.admin.hget(self.keys + f"m:{name}", "data")
        assert isinstance(raw, bytes)
        return raw

    async def entry(self, name: str) -> list[object] | None:
        """``clm``'s entry of ``name``: [id, token, at_least's end, end], or None."""
        raw = await self.admin.hget(self.keys + "clm", name)
        return None if raw is None else list(msgpack.unpackb(raw))

    async def due(self, name: str) -> float | None:
        """When ``name``'s claim is due to end (its ``due`` entry), or None."""
        score = await self.admin.zscore(self.keys + "due", f"c:{name}")
        return None if score is None else float(score)


@pytest.fixture
async def place(redis_server: RedisServer) -> AsyncIterator[Place]:
    async with node_place(redis_server, Place) as made:
        yield made


async def test_a_claim_is_its_record_an_entry_and_a_deadline_on_redis_clock(
    place: Place,
) -> None:
    async with tenure.connect(place.url) as client, client.session("n") as session:
        before = await place.now()
        claim = await session.claim("nightly", at_least=60.0, at_most=600.0, data=b"\x00job")
        after = await place.now()
        assert claim is not None
        assert before <= claim.granted_at <= after  # Redis's TIME, not this client's clock
        record = parse_claim("nightly", await place.data("nightly"))
        assert (record.id, record.token, record.data) == (claim.id, claim.token, b"\x00job")
        entry = await place.entry("nightly")
        assert entry is not None
        assert entry[:2] == [claim.id, str(claim.token)]
        assert entry[2] == pytest.approx(claim.granted_at + 60.0, abs=1e-3)
        assert entry[3] == pytest.approx(claim.granted_at + 600.0, abs=1e-3)
        assert await place.due("nightly") == pytest.approx(claim.granted_at + 600.0, abs=1e-3)
        # A release moves the end to at_least after the grant, and records when.
        assert await claim.release()
        assert await place.due("nightly") == pytest.approx(claim.granted_at + 60.0, abs=1e-3)
        released = parse_claim("nightly", await place.data("nightly")).released_at
        assert released is not None
        assert claim.granted_at <= released <= await place.now()


async def test_the_end_deletes_every_key_of_the_claim(place: Place) -> None:
    async with tenure.connect(place.url) as client, client.session("n") as session:
        claim = await session.claim("job", at_least=0.0, at_most=600.0)
        assert claim is not None
        assert await client.release_claim("n", "job", claim.id)  # at_least 0: ends now
        assert await place.entry("job") is None
        assert await place.due("job") is None
        assert not await place.admin.exists(place.keys + "m:job")
        assert not await place.admin.sismember(place.keys + "sems", "job")


async def test_a_claim_whose_end_no_reap_got_to_is_ended_by_the_next_claim(
    place: Place,
) -> None:
    """Each call reaps at most 64 due entries: a claim finds by Redis's clock that the
    one holding the name has ended, as the engine's deadlines all come first."""
    async with tenure.connect(place.url) as client, client.session("n") as session:
        first = await session.claim("slot", at_least=0.0, at_most=600.0)
        assert first is not None
        entry = await place.entry("slot")
        assert entry is not None
        entry[2] = entry[3] = await place.now() - 1.0  # as if its end had passed unreaped
        await place.admin.hset(place.keys + "clm", "slot", msgpack.packb(entry))
        await place.admin.zrem(place.keys + "due", "c:slot")
        second = await session.claim("slot", at_least=0.0, at_most=600.0)
        assert second is not None
        assert second.token > first.token


async def test_a_release_sent_again_with_its_request_key_is_answered_as_the_first(
    place: Place,
) -> None:
    async with tenure.connect(place.url) as client, client.session("n") as session:
        claim = await session.claim("job", at_least=60.0, at_most=600.0)
        assert claim is not None
        backend = client.backend
        assert isinstance(backend, RedisBackend)
        key = backend.request_key()
        calls = [
            await backend.conn.retrying(None, "release_claim", place.keys, "job", claim.id, key)
            for _ in range(2)
        ]
        assert [reply.result for reply in calls] == [1, 1]  # a lost answer's retry: True
        assert not await client.release_claim("n", "job", claim.id)  # a new request: False
        with pytest.raises(NotFoundError, match="node 'gone' does not exist"):
            await client.release_claim("gone", "job", claim.id)


async def test_a_node_made_before_claims_has_the_default_max_claims(place: Place) -> None:
    await place.admin.hdel(place.keys + "cfg", "mc")  # as a library before claims made it
    async with tenure.connect(place.url) as client:
        described = await client.describe_node("n")
        assert described.config.max_claims == tenure.NodeConfig().max_claims
        altered = await client.alter_node("n", max_claims=3)
        assert altered.config.max_claims == 3
        assert (await client.describe_node("n")).config.max_claims == 3


async def test_dropping_the_node_forgets_its_claims(place: Place) -> None:
    async with tenure.connect(place.url) as client:
        async with client.session("n") as session:
            assert await session.claim("job", at_least=60.0, at_most=600.0) is not None
        await client.drop_node("n")
        assert not await place.admin.exists(place.keys + "clm")
        await client.create_node("n", max_claims=1)
        async with client.session("n") as session:
            assert await session.claim("job", at_least=60.0, at_most=600.0) is not None
