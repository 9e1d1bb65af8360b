"""lock_all on redis://: what the conformance kit cannot see there.

A set waiting in several queues is one record of the node's ``grp`` hash (its arrival
number -> its members; ``grp``: the sets' old name) and one deadline (its first
name's ``due`` entry); these tests read both from Redis, retry the function call
itself with one request key, and run the set's timeout on Redis's clock.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

import tenure
from tenure.backends import SessionTicket
from tenure.backends.redis import RedisBackend
from tenure.errors import (
    NotFoundError,
    PreconditionFailedError,
    SessionClosedError,
    SessionExpiredError,
)
from tenure.testing.conformance.support import owners, spawn, wait_for_waiters, waiters, within
from tests.backends.listeners import Heard
from tests.backends.redis import places
from tests.backends.redis.places import node_place, store_of
from tests.redis.server import RedisServer

#: What the Redis functions take for a mutex's count (every token: lock_all's).
ALL = "ffffffffffffffff"


class Place(places.Place):
    """Node n's place, with readers of its waiting sets."""

    async def sets(self) -> int:
        """How many waiting sets node n records."""
        return int(await self.admin.hlen(self.keys + "grp"))

    async def set_deadlines(self) -> list[bytes]:
        """Node n's waiter deadlines (``due`` entries of kind ``w``)."""
        due = await self.admin.zrange(self.keys + "due", 0, -1)
        return [entry for entry in due if isinstance(entry, bytes) and entry.startswith(b"w:")]


@pytest.fixture
async def place(redis_server: RedisServer) -> AsyncIterator[Place]:
    async with node_place(redis_server, Place) as made:
        yield made


async def test_a_waiting_set_is_one_record_and_one_deadline_gone_on_every_way_out(
    place: Place,
) -> None:
    async with tenure.connect(place.url) as client:
        one, two = await client.session("n"), await client.session("n")
        busy = await one.mutex("c").lock()
        # Granted: the record goes with the grant.
        locking = spawn(two.lock_all(["a", "b", "c"], timeout=60))
        await wait_for_waiters(one, "c", 1)
        assert await place.sets() == 1
        holder = f"{two.id}:".encode()
        deadlines = await place.set_deadlines()  # one for the set: its first name's
        assert len(deadlines) == 1
        assert deadlines[0].startswith(b"w:" + holder)
        assert deadlines[0].endswith(b":a")
        await busy.release()
        held = await within(locking)
        assert await place.sets() == 0
        assert await place.set_deadlines() == []
        await held.release()
        # Cancelled by its caller.
        busy = await one.mutex("c").lock()
        locking = spawn(two.lock_all(["a", "c"]))
        await wait_for_waiters(one, "a", 1)
        assert await place.sets() == 1
        locking.cancel()
        with pytest.raises(asyncio.CancelledError):
            await locking
        assert await place.sets() == 0
        assert await waiters(one, "a") == []
        assert await waiters(one, "c") == []
        # Ended with its session.
        three = await client.session("n")
        ending = spawn(three.lock_all(["c", "d"]))
        await wait_for_waiters(one, "d", 1)
        await three.close()
        with pytest.raises(SessionClosedError):
            await within(ending)
        assert await place.sets() == 0
        assert await waiters(one, "d") == []
        assert await waiters(one, "c") == []
        await busy.release()


async def test_the_set_times_out_on_redis_clock_and_leaves_no_member_behind(
    place: Place,
) -> None:
    async with tenure.connect(place.url) as client:
        holder = await client.session("n")
        await holder.mutex("b").lock()
        other = await client.session("n")
        started = time.monotonic()
        # One deadline for the set: its first name's (Redis's clock), which ends both.
        with pytest.raises(TimeoutError, match="timed out waiting for 'a'"):
            await asyncio.wait_for(other.lock_all(["a", "b"], timeout=0.3), 5)
        assert time.monotonic() - started >= 0.25
        assert (await other.semaphore("b").describe(waiters=True)).waiters == ()
        assert (await other.mutex("a").describe()).held is False
        assert await place.sets() == 0
        assert await place.set_deadlines() == []


async def test_a_retried_acquire_all_is_answered_as_its_first_try(place: Place) -> None:
    """Its answer lost, the call is sent again with the same request key: Redis answers
    as the first try was answered (granted: the same tokens; queued: queued) rather
    than refuse the holds and waits the first try made."""
    async with tenure.connect(place.url) as client:
        session = await client.session("n")
        store = store_of(session)
        args = (ALL, b"", "", "1", 2, "a", 7, 101, "b", 7, 102)
        first = await store.invoke("acquire_all", "retry-granted", *args)
        again = await store.invoke("acquire_all", "retry-granted", *args)
        assert first == again
        assert first[0] == b"G"
        assert int(first[2]) > int(first[1])
        for name in ("a", "b"):
            described = await session.semaphore(name).describe(owners=True)
            assert [(o.session_id, o.count) for o in described.owners] == [(session.id, 2**64 - 1)]
        # Queued behind another session's hold of b: the retry is queued too, once.
        other = await client.session("n")
        queued = (ALL, b"", "", "1", 2, "b", 1, 201, "c", 1, 202)
        assert (await store_of(other).invoke("acquire_all", "retry-queued", *queued))[0] == b"Q"
        assert (await store_of(other).invoke("acquire_all", "retry-queued", *queued))[0] == b"Q"
        assert await waiters(session, "b") == [other.id]
        assert await waiters(session, "c") == [other.id]
        assert await place.sets() == 1
        # The same call under a new key is a new request: refused, it waits already.
        with pytest.raises(PreconditionFailedError, match="already holds or waits"):
            await store_of(other).invoke("acquire_all", "another-key", *queued)
        await other.close()
        assert await place.sets() == 0


async def test_a_forced_delete_ends_every_set_waiting_on_the_name_whole(place: Place) -> None:
    """Two sets wait on x; deleting x ends both, each in every queue, with NotFound.
    (Withdrawing the first serves z, which must not grant the second while its
    member still waits on x: every waiter of x leaves before any set is withdrawn.)"""
    async with tenure.connect(place.url) as client:
        holder, first, second, deleter = [await client.session("n") for _ in range(4)]
        await holder.mutex("w").lock()
        waiting_first = spawn(first.lock_all(["w", "x", "z"], timeout=30))
        await wait_for_waiters(holder, "x", 1)
        waiting_second = spawn(second.lock_all(["x", "z"], timeout=30))
        await wait_for_waiters(holder, "x", 2)
        await deleter.semaphore("x").delete(force=True)
        for waiting in (waiting_first, waiting_second):
            with pytest.raises(NotFoundError, match="'x' was deleted"):
                await within(waiting)
        assert await owners(deleter, "z") == []
        assert await waiters(deleter, "z") == []
        assert await waiters(deleter, "w") == []
        assert await owners(deleter, "w") == [holder.id]
        assert await place.sets() == 0


async def test_a_resume_withdraws_a_waiting_set_whole_and_forgets_it(place: Place) -> None:
    async with tenure.connect(place.url) as old, tenure.connect(place.url) as new:
        blocker = await new.session("n")
        busy = await blocker.mutex("b").lock()
        session = await old.session("n", recovery_window=5)
        locking = spawn(session.lock_all(["a", "b"]))
        await wait_for_waiters(blocker, "a", 1)
        backend = new.backend
        assert isinstance(backend, RedisBackend)
        ticket = SessionTicket("redis", "n", session.id, store_of(session).secret())
        resumed = await backend.resume_session("n", ticket, Heard())
        assert await waiters(blocker, "a") == []
        assert await waiters(blocker, "b") == []
        assert await place.sets() == 0
        with pytest.raises(SessionExpiredError):
            await within(locking)
        # Nothing of the set is left to be granted: b goes to the next in line.
        later = spawn(blocker.lock_all(["b", "a"]))
        await busy.release()
        held = await within(later)
        assert set(held.tokens) == {"a", "b"}
        await held.release()
        assert await resumed.holds() == []


async def test_dropping_the_node_drops_its_waiting_sets(place: Place) -> None:
    async with tenure.connect(place.url) as client:
        one, two = await client.session("n"), await client.session("n")
        await one.mutex("b").lock()
        locking = spawn(two.lock_all(["a", "b"]))
        await wait_for_waiters(one, "a", 1)
        assert await place.sets() == 1
        await client.drop_node("n", force=True)
        with pytest.raises(NotFoundError, match="'n' was dropped"):
            await within(locking)
        assert not await place.admin.exists(place.keys + "grp")
