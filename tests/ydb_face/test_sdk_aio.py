"""YDB's Python SDK, its asyncio coordination client, against a real ``tenure serve --ydb-port``.

The same behaviours as ``test_sdk_sync.py``, through ``ydb.aio``: racing holders are
tasks, waits are bounded by ``asyncio.timeout(WAIT)``, what the SDK does not show is
read back with describes.
"""

from __future__ import annotations

import asyncio
import functools

import pytest
import ydb
from ydb.aio.coordination import CoordinationClient
from ydb.aio.driver import Driver as AioDriver

from tests.server.wire import WAIT
from tests.ydb_face.conftest import DATABASE, unique
from tests.ydb_face.sdkkit import (
    FULL_AFTER_GRACE,
    FULL_CONFIG,
    GRACE_ONLY,
    OTHER_CONFIG,
    apoll,
    awaiting,
    owners_of,
)


@pytest.fixture
def client(aio_driver: AioDriver) -> CoordinationClient:
    """The SDK's asyncio coordination client on the module server."""
    return CoordinationClient(aio_driver)


@pytest.fixture
async def path(client: CoordinationClient) -> str:
    """A fresh node (YDB's defaults), by its YDB path."""
    made = f"{DATABASE}/{unique()}"
    async with asyncio.timeout(WAIT):
        await client.create_node(made)
    return made


# -- nodes -------------------------------------------------------------------------------


async def test_node_lifecycle_round_trips_the_config(client: CoordinationClient) -> None:
    async with asyncio.timeout(WAIT):
        path = f"{DATABASE}/{unique()}"
        await client.create_node(path, FULL_CONFIG)
        assert await client.describe_node(path) == FULL_CONFIG
        # An existing node: SUCCESS (as YDB's scheme answers), and its config is kept.
        await client.create_node(path, OTHER_CONFIG)
        assert await client.describe_node(path) == FULL_CONFIG
        await client.alter_node(path, GRACE_ONLY)
        assert await client.describe_node(path) == FULL_AFTER_GRACE
        await client.delete_node(path)
        with pytest.raises(ydb.issues.SchemeError):
            await client.describe_node(path)
        with pytest.raises(ydb.issues.SchemeError):
            await client.delete_node(path)
        with pytest.raises(ydb.issues.SchemeError):
            await client.alter_node(path, GRACE_ONLY)


async def test_describe_of_a_missing_node_is_a_scheme_error(client: CoordinationClient) -> None:
    with pytest.raises(ydb.issues.SchemeError, match="does not exist"):
        async with asyncio.timeout(WAIT):
            await client.describe_node(f"{DATABASE}/{unique('never')}")


# -- semaphores --------------------------------------------------------------------------


async def test_describe_of_a_missing_semaphore_is_not_found(
    client: CoordinationClient, path: str
) -> None:
    async with asyncio.timeout(WAIT), client.session(path) as session:
        described = await session.semaphore("never-created").describe()
        # The SDK does not raise: its result carries YDB's status.
        assert described.status == ydb.StatusCode.NOT_FOUND
        assert (described.name, described.limit, described.owners) == ("", 0, [])
        # An update is an error the SDK raises (its status is NOT_FOUND).
        with pytest.raises(ydb.issues.Error, match=str(ydb.StatusCode.NOT_FOUND.value)):
            await session.semaphore("never-created").update(b"data")
        # The session goes on: neither call created the semaphore.
        again = await session.semaphore("never-created").describe()
        assert again.status == ydb.StatusCode.NOT_FOUND


async def test_semaphore_data_update_and_describe(client: CoordinationClient, path: str) -> None:
    async with (
        asyncio.timeout(WAIT),
        client.session(path) as mine,
        client.session(path) as theirs,
    ):
        semaphore = mine.semaphore("config", 4)
        async with semaphore:
            await semaphore.update(b"v1")
            described = await semaphore.describe()
            assert described.status == ydb.StatusCode.SUCCESS
            assert (described.name, described.limit, described.count) == ("config", 4, 1)
            assert (described.data, described.ephemeral, described.waiters) == (b"v1", False, [])
            await semaphore.update(b"v2")
            seen = await theirs.semaphore("config", 4).describe()
            assert (seen.data, owners_of(seen)) == (b"v2", owners_of(described))
        seen = await theirs.semaphore("config", 4).describe()
        assert (seen.data, seen.count, seen.owners) == (b"v2", 0, [])


async def test_an_update_over_the_nodes_data_limit_fails_alone(
    client: CoordinationClient, path: str
) -> None:
    # 2 MiB is over the node's max_data_size (64 KiB) and over tenure's frame size
    # (1 MiB), but within what the SDK sends (64,000,000 bytes): the update gets its
    # own error and the session's stream lives on.
    async with asyncio.timeout(WAIT), client.session(path) as session:
        semaphore = session.semaphore("config", 1)
        async with semaphore:
            # (The SDK names the status by its number: 400120 is PRECONDITION_FAILED.)
            precondition_failed = str(ydb.StatusCode.PRECONDITION_FAILED.value)
            with pytest.raises(ydb.issues.Error, match=precondition_failed):
                await semaphore.update(b"x" * (2 * 1024 * 1024))
            await semaphore.update(b"small")
            assert (await semaphore.describe()).data == b"small"


async def test_multi_count_semaphore_queues_what_does_not_fit(
    client: CoordinationClient, path: str
) -> None:
    async with (
        asyncio.timeout(2 * WAIT),
        client.session(path) as one,
        client.session(path) as two,
        client.session(path) as three,
    ):
        single, double = one.semaphore("pool", 3), two.semaphore("pool", 3)
        await single.acquire(1)
        await double.acquire(2)
        full = await single.describe()
        assert (full.limit, full.count, [c for _, c in owners_of(full)]) == (3, 3, [1, 2])
        with pytest.raises(ydb.issues.Error, match="acquire"):  # more than the limit
            await three.semaphore("pool", 3).acquire(4)
        third = three.semaphore("pool", 3)
        taking = asyncio.ensure_future(third.acquire(1))

        async def waiting() -> list[object] | None:
            return (await single.describe()).waiters or None

        queued = await apoll(waiting, "the third waits")
        assert [w.count for w in queued] == [1]  # type: ignore[attr-defined]
        assert not taking.done()  # it waits, as the describe says
        # Described as YDB does: its arrival number and the timeout it asked for (the
        # SDK's: the session's 30 s); an owner's order is its grant's, its timeout 0.
        [waiter] = queued
        assert waiter.order_id > 0  # type: ignore[attr-defined]
        assert waiter.timeout_millis == 30_000  # type: ignore[attr-defined]
        assert all(o.order_id > 0 and o.timeout_millis == 0 for o in full.owners)
        await single.release()
        await taking
        after = await double.describe()
        assert (after.count, sorted(c for _, c in owners_of(after)), after.waiters) == (
            3,
            [1, 2],
            [],
        )
        await third.release()
        await double.release()
        assert (await double.describe()).count == 0


async def test_a_later_smaller_waiter_does_not_pass_an_earlier_one(
    client: CoordinationClient, path: str
) -> None:
    async with (
        asyncio.timeout(2 * WAIT),
        client.session(path) as one,
        client.session(path) as two,
        client.session(path) as three,
    ):
        holder = one.semaphore("fifo-pool", 3)
        await holder.acquire(2)
        big = asyncio.ensure_future(two.semaphore("fifo-pool", 3).acquire(2))
        await apoll(lambda: awaiting(holder, 1), "the big request waits")
        # One token is free, but YDB's queue is strict FIFO: the small one waits too.
        small = asyncio.ensure_future(three.semaphore("fifo-pool", 3).acquire(1))
        await apoll(lambda: awaiting(holder, 2), "the small request waits behind it")
        assert [w.count for w in (await holder.describe()).waiters] == [2, 1]
        assert not small.done()
        await holder.release()
        await asyncio.gather(big, small)
        after = await holder.describe()
        assert (after.count, sorted(c for _, c in owners_of(after))) == (3, [1, 2])


# -- racing holders ----------------------------------------------------------------------


async def test_two_sessions_racing_hold_the_lock_one_at_a_time(
    client: CoordinationClient, path: str
) -> None:
    rounds = 6
    inside = 0
    most = 0
    turns: list[str] = []

    async def holder(who: str) -> None:
        nonlocal inside, most
        async with client.session(path) as session:
            lock = session.semaphore("lock")
            for _ in range(rounds):
                await lock.acquire()
                inside += 1
                most = max(most, inside)
                turns.append(who)
                described = await lock.describe()  # the other task runs meanwhile
                assert (described.count, len(described.owners)) == (1, 1)
                inside -= 1  # before the release: the next grant follows it
                await lock.release()

    async with asyncio.timeout(2 * WAIT):
        await asyncio.gather(holder("a"), holder("b"))
    assert most == 1
    assert sorted(turns) == ["a"] * rounds + ["b"] * rounds


async def test_waiters_are_granted_in_arrival_order(client: CoordinationClient, path: str) -> None:
    order: list[str] = []

    async def waiter(who: str) -> None:
        async with client.session(path) as session:
            mine = session.semaphore("fifo")
            await mine.acquire()
            order.append(who)  # before the release: the next grant follows it
            await mine.release()

    async with asyncio.timeout(2 * WAIT), client.session(path) as first:
        lock = first.semaphore("fifo")
        await lock.acquire()
        waiters = []
        for who, queued in (("b", 1), ("c", 2)):
            waiters.append(asyncio.ensure_future(waiter(who)))
            await apoll(functools.partial(awaiting, lock, queued), f"{who} waits")
        assert order == []
        await lock.release()
        await asyncio.gather(*waiters)
    assert order == ["b", "c"]


async def test_one_lock_from_two_handles_of_one_session(
    client: CoordinationClient, path: str
) -> None:
    async with (
        asyncio.timeout(WAIT),
        client.session(path) as session,
        client.session(path) as other,
    ):
        first, second = session.semaphore("twice"), session.semaphore("twice")
        await first.acquire()
        held = owners_of(await first.describe())
        # YDB's rule: the second acquire restates the session's hold.
        await second.acquire()
        assert owners_of(await second.describe()) == held
        assert [count for _, count in held] == [1]
        # A release from either handle releases the session's one hold.
        await first.release()
        assert (await second.describe()).owners == []
        theirs = other.semaphore("twice")
        await theirs.acquire()
        taken = owners_of(await theirs.describe())
        assert len(taken) == 1
        assert taken != held
        await second.release()  # not the holder: changes nothing
        assert owners_of(await theirs.describe()) == taken
        await theirs.release()


async def test_a_second_handle_supersedes_the_first_while_it_waits(
    client: CoordinationClient, path: str
) -> None:
    async with (
        asyncio.timeout(2 * WAIT),
        client.session(path) as holder,
        client.session(path) as session,
    ):
        lock = holder.semaphore("queued-twice")
        await lock.acquire()
        first = asyncio.ensure_future(session.semaphore("queued-twice").acquire())
        await apoll(functools.partial(awaiting, lock, 1), "the first handle waits")
        second = asyncio.ensure_future(session.semaphore("queued-twice").acquire())
        # YDB's rule: the session asks again, so its earlier request is answered
        # ABORTED ("superseded"), which the SDK raises; the session still waits once.
        with pytest.raises(ydb.issues.Error, match=str(ydb.StatusCode.ABORTED.value)):
            await first
        assert len((await lock.describe()).waiters) == 1
        await lock.release()
        await second
        assert [count for _, count in owners_of(await lock.describe())] == [1]
        await session.semaphore("queued-twice").release()
        assert (await lock.describe()).owners == []
