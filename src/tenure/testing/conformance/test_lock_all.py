"""All-or-none locks: several mutexes in one step; overlapping sets never deadlock.

On a backend without ``Capability.ALL_OR_NONE`` every test but the last skips; the
last checks that ``lock_all`` is refused there whole (UnsupportedError, nothing
taken), if it is refused, never done one name at a time in its place.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable

import pytest

import tenure
from tenure.errors import (
    InvalidArgumentError,
    LeaseLostError,
    NotFoundError,
    PreconditionFailedError,
    SessionExpiredError,
    UnsupportedError,
)
from tenure.testing import FakeClock

from .harness import Expire
from .support import eventually, hold_in_block, owners, spawn, wait_for_waiters, waiters, within

ALL_OR_NONE = pytest.mark.requires(tenure.Capability.ALL_OR_NONE)


@ALL_OR_NONE
async def test_free_names_are_held_at_once_each_with_its_own_token(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    one, two = await client.session(node), await client2.session(node)
    async with one.lock_all(["acct/1", "acct/7"], timeout=5) as held:
        assert isinstance(held, tenure.HeldLocks)
        assert list(held.tokens) == ["acct/1", "acct/7"]
        assert held.tokens["acct/7"] > held.tokens["acct/1"] > 0
        assert all(isinstance(lock, tenure.Lock) for lock in held.locks.values())
        # They are the mutexes of those names: nobody else gets either.
        assert await two.mutex("acct/7").try_lock() is None
        with pytest.raises(TimeoutError):
            await two.lock_all(["acct/9", "acct/1"], timeout=0)
        assert await owners(two, "acct/9") == []  # a refused one takes nothing
    assert not held.held
    lock = await within(two.mutex("acct/1").lock(timeout=5))
    await lock.release()


@ALL_OR_NONE
async def test_none_is_held_while_one_is_busy_then_all_at_once(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    one, two = await client.session(node), await client2.session(node)
    busy = await one.mutex("b").lock()
    locking = spawn(two.lock_all(["a", "b", "c"]))
    await wait_for_waiters(one, "b", 1)
    # Waiting for b, it holds neither a nor c: another session takes a meanwhile?
    # No: it waits in a's queue too, ahead of later requests, but holds nothing.
    assert await owners(one, "a") == []
    assert await waiters(one, "a") == [two.id]
    await busy.release()
    held = await within(locking)
    assert set(held.tokens) == {"a", "b", "c"}
    assert len(set(held.tokens.values())) == 3
    await held.release()
    assert await owners(one, "a") == []


@ALL_OR_NONE
async def test_overlapping_sets_in_opposite_orders_never_deadlock(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    sessions = [await c.session(node) for c in (client, client2, client, client2)]
    names = [f"acct/{i}" for i in range(4)]
    inside: list[str] = []
    grants: list[int] = []
    rng = random.Random(29)

    async def transfer(session: tenure.Session, seed: int) -> None:
        mine = random.Random(seed)
        for _ in range(6):  # bounded: 4 x 6 transfers
            pair = mine.sample(names, 2)  # any order: opposite orders happen
            async with session.lock_all(pair, timeout=30) as held:
                for name in pair:
                    assert name not in inside, f"{name} held twice"
                    inside.append(name)
                grants.extend(held.tokens.values())
                await asyncio.sleep(0)
                for name in pair:
                    inside.remove(name)

    await within(
        asyncio.gather(*(transfer(s, rng.randrange(2**32)) for s in sessions)),
        "24 transfers over overlapping pairs",
    )
    assert len(grants) == 48
    assert len(set(grants)) == 48  # every grant its own token


@ALL_OR_NONE
async def test_a_waiting_set_holds_back_later_requests_of_its_names(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    one, two = await client.session(node), await client2.session(node)
    busy = await one.mutex("a").lock()
    locking = spawn(two.lock_all(["a", "b"]))
    await wait_for_waiters(one, "b", 1)
    # b is free, but the set came first: FIFO, no barging past it.
    assert await one.mutex("b").try_lock() is None
    later = spawn(one.mutex("b").lock())
    await wait_for_waiters(one, "b", 2)
    await busy.release()
    held = await within(locking)
    assert not later.done()
    await held.release()
    lock = await within(later)
    await lock.release()


@ALL_OR_NONE
async def test_a_timeout_or_a_cancel_leaves_nothing_in_any_queue(
    client: tenure.Client, client2: tenure.Client, node: str, state_clock: FakeClock | None
) -> None:
    one, two = await client.session(node), await client2.session(node)
    busy = await one.mutex("b").lock()
    timing_out = spawn(two.lock_all(["a", "b"], timeout=0.3))
    await wait_for_waiters(one, "a", 1)
    if state_clock is not None:  # (memory:// runs on the kit's clock: move it)
        await state_clock.advance(0.5)
    with pytest.raises(TimeoutError):
        await within(timing_out)
    assert await waiters(one, "a") == []
    assert await waiters(one, "b") == []
    locking = spawn(two.lock_all(["a", "b"]))
    await wait_for_waiters(one, "a", 1)
    locking.cancel()
    with pytest.raises(asyncio.CancelledError):
        await locking
    await wait_for_waiters(one, "a", 0)
    assert await waiters(one, "b") == []
    await busy.release()
    held = await within(two.lock_all(["a", "b"], timeout=5))  # nothing left behind
    await held.release()


@ALL_OR_NONE
async def test_losing_the_session_cancels_the_block_and_frees_every_name(
    client: tenure.Client, client2: tenure.Client, node: str, expire: Expire
) -> None:
    one = await client.session(node, recovery_window=15.0)
    two = await client2.session(node)
    task, _, lock_set = await hold_in_block(one.lock_all(["a", "b"]))
    waiting = spawn(two.lock_all(["b", "a"]))
    await wait_for_waiters(two, "a", 1)
    await expire(one)
    with pytest.raises(SessionExpiredError):
        await within(task)
    # Every lock of the set ended lost with the session (none "released" by the set).
    for lock in lock_set.locks.values():
        assert isinstance(lock.lost_reason, SessionExpiredError), lock
    held = await within(waiting)
    await held.release()


@ALL_OR_NONE
async def test_one_lock_lost_ends_the_set_and_releases_the_others(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    one, two = await client.session(node), await client2.session(node)
    held = await one.lock_all(["a", "b"])
    await two.semaphore("a").delete(force=True)  # a's grant is taken from it
    reason = await within(held.lost)
    assert isinstance(reason, LeaseLostError)
    assert not held.held
    lock = await within(two.mutex("b").lock(timeout=5))  # b was released
    await lock.release()


@ALL_OR_NONE
async def test_a_forced_delete_ends_every_set_waiting_on_the_name_whole(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    """Two sets wait on x; deleting x ends both, each in every queue, with NotFound.
    Withdrawing the first serves z, which must not grant the second while its member
    still waits on x (the engine, redis:// and postgres:// each once did)."""
    holder, first, second = [await client.session(node) for _ in range(3)]
    deleter = await client2.session(node)
    await holder.mutex("w").lock()
    waiting_first = spawn(first.lock_all(["w", "x", "z"], timeout=30))
    await wait_for_waiters(holder, "x", 1)
    waiting_second = spawn(second.lock_all(["x", "z"], timeout=30))
    await wait_for_waiters(holder, "x", 2)
    await deleter.semaphore("x").delete(force=True)
    for waiting in (waiting_first, waiting_second):
        with pytest.raises(NotFoundError, match="'x' was deleted"):
            await within(waiting)

    async def z_free() -> bool:  # (etcd:// clients take their sets' other keys back)
        return await waiters(deleter, "z") == []

    await eventually(z_free, "no set left waiting on 'z'")
    assert await owners(deleter, "z") == []
    assert await waiters(deleter, "w") == []
    assert await owners(deleter, "w") == [holder.id]


@ALL_OR_NONE
async def test_bad_requests_are_refused_at_once(client: tenure.Client, node: str) -> None:
    session = await client.session(node)
    for names in ([], ["x", "x"], "ab", [f"n{i}" for i in range(65)], ["ok", ""]):
        with pytest.raises(InvalidArgumentError):
            await session.lock_all(names)
    async with session.mutex("x"):
        with pytest.raises(PreconditionFailedError, match="not reentrant"):
            await session.lock_all(["y", "x"])


async def _refused(opening: Awaitable[tenure.HeldLocks]) -> tenure.HeldLocks | UnsupportedError:
    """What ``opening`` gives, or the UnsupportedError it raises."""
    try:
        return await opening
    except UnsupportedError as error:
        return error


async def test_where_it_is_not_declared_it_is_refused_whole_or_works_whole(
    client: tenure.Client, node: str
) -> None:
    """Declared, ``lock_all`` works; not declared, it may be refused, with
    UnsupportedError and nothing taken, but never done one name at a time."""
    session = await client.session(node)
    got = await _refused(session.lock_all(["a", "b"], timeout=1))
    if isinstance(got, UnsupportedError):
        assert tenure.Capability.ALL_OR_NONE not in client.capabilities
        assert "ALL_OR_NONE" in str(got)
        assert await owners(session, "a") == []
        assert await owners(session, "b") == []
    else:
        assert set(got.tokens) == {"a", "b"}
        await got.release()
