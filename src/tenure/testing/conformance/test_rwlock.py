"""Readers-writer locks: readers share, a writer is alone, one FIFO queue serves both."""

from __future__ import annotations

import asyncio
import random

import pytest

import tenure
from tenure.errors import SessionExpiredError
from tenure.testing import FakeClock

from .harness import Expire
from .support import spawn, wait_for_waiters, within


async def _state(session: tenure.Session, name: str) -> tuple[list[int], int | None, list[int]]:
    """(reader session ids, writer session id, waiter counts) of the lock ``name``."""
    found = await session.rwlock(name).describe()
    writer = found.writer.session_id if found.writer else None
    return sorted(r.session_id for r in found.readers), writer, [w.count for w in found.waiters]


@pytest.mark.requires(tenure.Capability.FENCING_TOKENS)
async def test_readers_share_the_lock_and_each_has_its_own_token(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    one, two = await client.session(node), await client2.session(node)
    first = await one.rwlock("catalog").read(timeout=5.0)
    second = await two.rwlock("catalog").read(timeout=5.0)
    assert isinstance(first, tenure.ReadLock)
    assert (first.count, second.count) == (1, 1)
    assert second.token > first.token > 0
    assert await _state(one, "catalog") == (sorted([one.id, two.id]), None, [])
    third = await client.session(node)
    assert await third.rwlock("catalog").try_write() is None
    extra = await third.rwlock("catalog").try_read()
    assert extra is not None
    await extra.release()
    await first.release()
    await second.release()
    free = await one.rwlock("catalog").describe()
    assert not free.held
    assert (free.readers, free.writer, free.waiters) == ((), None, ())


@pytest.mark.requires(tenure.Capability.FENCING_TOKENS)
async def test_a_writer_is_alone_and_readers_wait_for_it(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    one, two = await client.session(node), await client2.session(node)
    async with one.rwlock("catalog").write() as writing:
        assert isinstance(writing, tenure.WriteLock)
        assert isinstance(writing, tenure.Lock)
        assert await two.rwlock("catalog").try_read() is None
        assert await _state(two, "catalog") == ([], one.id, [])
        reading = spawn(two.rwlock("catalog").read())
        await wait_for_waiters(one, "catalog", 1)
        assert not reading.done()
    read = await within(reading)
    assert read.token > writing.token
    await read.release()


@pytest.mark.requires(tenure.Capability.FENCING_TOKENS)
async def test_a_waiting_writer_holds_back_the_readers_after_it(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    """No starvation: a reader that comes after a waiting writer waits for it, although
    readers hold the lock; the readers queued behind the writer then go in together."""
    one, two = await client.session(node), await client2.session(node)
    three = await client.session(node)
    held = await one.rwlock("catalog").read()
    writing = spawn(two.rwlock("catalog").write(data=b"writer"))
    await wait_for_waiters(one, "catalog", 1)
    assert await three.rwlock("catalog").try_read() is None  # a writer waits: no passing
    late = [spawn(three.rwlock("catalog").read()), spawn(one.rwlock("catalog").read())]
    await wait_for_waiters(one, "catalog", 3)
    readers, writer, queue = await _state(one, "catalog")
    assert (readers, writer, queue) == ([one.id], None, [tenure.MAX_COUNT, 1, 1])

    await held.release()
    write = await within(writing)
    assert not any(task.done() for task in late)
    await write.release()
    reads = [await within(task) for task in late]
    assert all(read.token > write.token > held.token for read in reads)
    assert await _state(one, "catalog") == (sorted([one.id, three.id]), None, [])
    for read in reads:
        await read.release()


async def test_a_write_times_out_by_the_backend_clock_and_leaves_no_waiter(
    client: tenure.Client, client2: tenure.Client, node: str, clock: FakeClock
) -> None:
    one, two = await client.session(node), await client2.session(node)
    read = await one.rwlock("catalog").read()
    waiting = spawn(two.rwlock("catalog").write(timeout=0.5))
    await wait_for_waiters(one, "catalog", 1)
    await clock.advance(0.6)
    with pytest.raises(TimeoutError):
        await within(waiting)
    assert await _state(one, "catalog") == ([one.id], None, [])
    assert await two.rwlock("catalog").try_read() is not None  # nothing in the queue now
    await read.release()


async def test_a_cancelled_write_lets_the_readers_behind_it_in(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    one, two = await client.session(node), await client2.session(node)
    read = await one.rwlock("catalog").read()
    writing = spawn(two.rwlock("catalog").write())
    await wait_for_waiters(one, "catalog", 1)
    behind = spawn(one.rwlock("catalog").read())
    await wait_for_waiters(one, "catalog", 2)
    writing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await within(writing)
    second = await within(behind)
    assert await _state(two, "catalog") == ([one.id, one.id], None, [])
    await second.release()
    await read.release()


async def test_a_lost_reader_lets_the_writer_in_and_its_block_is_cancelled(
    client: tenure.Client, client2: tenure.Client, node: str, expire: Expire
) -> None:
    reader = await client.session(node, recovery_window=15.0)
    writer = await client2.session(node)
    entered = asyncio.Event()

    async def block() -> None:
        async with reader.rwlock("catalog").read():
            entered.set()
            await asyncio.Event().wait()

    task = spawn(block())
    await within(entered.wait())
    writing = spawn(writer.rwlock("catalog").write())
    await wait_for_waiters(writer, "catalog", 1)
    await expire(reader)
    with pytest.raises(SessionExpiredError):
        await within(task)
    write = await within(writing)
    assert await _state(writer, "catalog") == ([], writer.id, [])
    await write.release()


@pytest.mark.requires(tenure.Capability.FENCING_TOKENS)
async def test_a_writer_downgrades_to_a_reader_and_keeps_its_token(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    one, two = await client.session(node), await client2.session(node)
    write = await one.rwlock("catalog").write()
    reading = spawn(two.rwlock("catalog").read())
    await wait_for_waiters(one, "catalog", 1)
    await write.restate(1)
    read = await within(reading)
    assert write.held
    assert write.count == 1
    assert read.token > write.token
    assert await _state(one, "catalog") == (sorted([one.id, two.id]), None, [])
    await read.release()
    await write.release()


async def test_a_mutex_and_the_write_side_of_the_same_name_exclude_each_other(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    one, two = await client.session(node), await client2.session(node)
    lock = await one.mutex("catalog").lock()
    assert await two.rwlock("catalog").try_read() is None
    assert await two.rwlock("catalog").try_write() is None
    await lock.release()
    read = await two.rwlock("catalog").read(timeout=5.0)
    assert await one.mutex("catalog").try_lock() is None
    await read.release()


async def test_random_readers_and_writers_never_overlap_a_writer(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    """Tasks of two clients read and write at random: a writer is always alone, a reader
    only ever beside readers; every request is served."""
    rng = random.Random(29)
    sessions = [await c.session(node) for c in (client, client2, client, client2)]
    inside = {"readers": 0, "writers": 0}
    broken: list[str] = []
    served = 0

    async def one(session: tenure.Session, write: bool) -> None:
        nonlocal served
        rw = session.rwlock("catalog")
        async with rw.write() if write else rw.read():
            inside["writers" if write else "readers"] += 1
            if inside["writers"] > 1 or (inside["writers"] and inside["readers"]):
                broken.append(f"overlap: {inside}")
            await asyncio.sleep(0)
            inside["writers" if write else "readers"] -= 1
        served += 1

    plan = [(rng.choice(sessions), rng.random() < 0.3) for _ in range(24)]
    await within(asyncio.gather(*(one(session, write) for session, write in plan)))
    assert broken == []
    assert served == len(plan)
