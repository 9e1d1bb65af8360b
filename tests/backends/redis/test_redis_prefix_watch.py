"""Prefix watches on redis://: the node's ``pw`` registry, as the kit cannot see it.

A prefix watch is a field ``<sid>:<wid>`` of the node's ``pw`` hash and a member of
the session's ``spw:<sid>`` set (lua/57_prefix_watches.lua); every function's
``fire_watches`` pushes a ``P`` to each watch whose prefix a touched name starts
with. These tests read both keys, arm a watch twice with one id as a retry would,
and lose a push on purpose to see the inbox gap make the cache list again.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

import tenure
from tenure.backends._base import prefix_watch
from tenure.backends.redis import RedisBackend
from tenure.errors import LimitExceededError
from tenure.testing.conformance.support import eventually, within
from tests.backends.redis import places
from tests.backends.redis.places import node_place, store_of
from tests.redis.server import RedisServer


class Place(places.Place):
    """Node n's place, with readers of its prefix watches."""

    async def registry(self) -> dict[bytes, bytes]:
        """Node n's prefix watches: ``<sid>:<wid>`` -> prefix."""
        found: dict[bytes, bytes] = await self.admin.hgetall(self.keys + "pw")  # type: ignore[assignment]
        return found

    async def watch_count(self, session: tenure.Session) -> int:
        """What the session record counts against max_watches_per_session."""
        return int(await self.admin.hget(f"{self.keys}s:{session.id}", "nw") or 0)


@pytest.fixture
async def place(redis_server: RedisServer) -> AsyncIterator[Place]:
    async with node_place(redis_server, Place) as made:
        yield made


async def test_a_watch_is_registered_once_counted_and_forgotten_when_closed(
    place: Place,
) -> None:
    async with tenure.connect(place.url) as client:
        session = await client.session("n")
        stream = await prefix_watch(session._backend_session()).watch_prefix(
            "config/", data=True, owners=False, waiters=False
        )
        store = store_of(session)
        [wid] = store.watches.prefixed
        assert await place.registry() == {f"{session.id}:{wid}".encode(): b"config/"}
        assert await place.watch_count(session) == 1
        # Sent again (its answer lost): the same id finds it armed, counted once.
        await store.invoke("watch_prefix", "", wid, "config/")
        assert len(await place.registry()) == 1
        assert await place.watch_count(session) == 1
        await stream.aclose()
        assert await place.registry() == {}
        assert await place.watch_count(session) == 0
        assert await place.admin.exists(f"{place.keys}spw:{session.id}") == 0


@pytest.mark.parametrize("end", ["close", "kill", "resume", "drop"])
async def test_the_sessions_end_forgets_its_prefix_watches(place: Place, end: str) -> None:
    async with tenure.connect(place.url) as client, tenure.connect(place.url) as other:
        session = await client.session("n")
        keep = await other.session("n")
        await prefix_watch(session._backend_session()).watch_prefix(
            "a/", data=True, owners=True, waiters=False
        )
        await prefix_watch(session._backend_session()).watch_prefix(
            "", data=False, owners=False, waiters=False
        )
        await prefix_watch(keep._backend_session()).watch_prefix(
            "a/", data=True, owners=True, waiters=False
        )
        assert len(await place.registry()) == 3
        if end == "close":
            await session.close()
        elif end == "kill":
            await other.kill_session("n", session.id)
        elif end == "resume":
            async with tenure.connect(place.url) as taker:
                taken = await taker.session("n", resume=session.ticket())
                assert await place.watch_count(taken) == 0  # the new owner arms its own
        else:
            await other.drop_node("n", force=True)
            assert await place.admin.exists(place.keys + "pw") == 0
            assert await place.admin.exists(f"{place.keys}spw:{session.id}") == 0
            return
        assert [key.split(b":")[0] for key in await place.registry()] == [str(keep.id).encode()]
        assert await place.admin.exists(f"{place.keys}spw:{session.id}") == 0


async def test_prefix_and_single_watches_share_the_sessions_limit(place: Place) -> None:
    async with tenure.connect(place.url) as client:
        await client.alter_node("n", max_watches_per_session=2)
        session = await client.session("n")
        backend = prefix_watch(session._backend_session())
        await backend.watch_prefix("a/", data=True, owners=False, waiters=False)
        await session._backend_session().watch_semaphore(
            "x", data=True, owners=False, waiters=False
        )
        with pytest.raises(LimitExceededError, match=r"max_watches_per_session \(2\)"):
            await backend.watch_prefix("b/", data=True, owners=False, waiters=False)
        assert store_of(session).watches.prefixed.keys() == {
            int(key.split(b":")[1]) for key in await place.registry()
        }  # the refused one left nothing behind


async def test_a_node_arms_no_more_prefix_watches_than_its_bound_whoever_asks(
    place: Place,
) -> None:
    # The engine's max_prefix_watches_per_node, on Redis: every call of the node that
    # changes a name compares it with each of them (fire_watches), so the node's count
    # is bounded, whichever sessions and clients armed them.
    bound = f"{place.url}&max_prefix_watches_per_node=3"
    async with tenure.connect(bound) as client, tenure.connect(bound) as other:
        sessions = [await client.session("n"), await other.session("n")]
        backends = [prefix_watch(session._backend_session()) for session in sessions]
        streams = [
            await backends[i % 2].watch_prefix(f"p{i}/", data=True, owners=False, waiters=False)
            for i in range(3)
        ]
        for backend in backends:  # neither session is near its own limit (1,000)
            with pytest.raises(
                LimitExceededError, match=r"max_prefix_watches_per_node \(3\) reached on node 'n'"
            ):
                await backend.watch_prefix("q/", data=True, owners=False, waiters=False)
        assert len(await place.registry()) == 3  # the refused ones left nothing behind
        assert await place.watch_count(sessions[1]) == 1
        await streams[0].aclose()  # one closed: room for one more
        await backends[1].watch_prefix("q/", data=True, owners=False, waiters=False)
        assert len(await place.registry()) == 3
        lock = await sessions[0].mutex("q/x").lock()  # the node goes on serving
        await lock.release()


async def test_an_inbox_gap_makes_the_cache_list_again(place: Place) -> None:
    """A push lost on its way (here: the registration hidden while the change is made,
    then the inbox's sequence moved on) is found by the next push's gap: a reset."""
    async with tenure.connect(place.url) as client, tenure.connect(place.url) as writer_client:
        writer = await writer_client.session("n")
        await writer.semaphore("config/a").create(1, b"1")
        async with client.cache("n", prefix="config/") as cache:
            [(field, prefix)] = (await place.registry()).items()
            await place.admin.hdel(place.keys + "pw", field)
            await writer.semaphore("config/a").update(b"2")  # its push never made
            await place.admin.hset(place.keys + "pw", field, prefix)
            backend = client.backend
            assert isinstance(backend, RedisBackend)
            await place.admin.hincrby(place.keys + "inseq", backend.client_id, 1)
            await writer.semaphore("config/b").create(1, b"b")  # pushed after a gap

            async def listed_again() -> bool:
                a, b = cache.get("config/a"), cache.get("config/b")
                return a is not None and a.data == b"2" and b is not None

            await eventually(listed_again, "the cache listing again after the gap")
            changes = cache.changes()
            await writer.semaphore("config/a").update(b"3")
            change = await within(anext(changes))
            assert change.view is not None
            assert (change.name, change.view.data) == ("config/a", b"3")
