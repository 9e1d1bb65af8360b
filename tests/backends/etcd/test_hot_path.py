"""The pieces of etcd://'s acquire and release path: turns, key spelling, the Txns' shapes.

The turns and the keys need no etcd; the last tests check, in etcd, what the
uncontended acquire and the release leave behind.
"""

from __future__ import annotations

import asyncio

import pytest

import tenure
from tenure._etcd.requests import get_prefix
from tenure.backends._turns import Turns
from tenure.backends.etcd import EtcdBackend
from tenure.backends.etcd._keys import Layout, _escape, name_part
from tenure.errors import TenureError


async def _join(
    turns: Turns[bytes], key: bytes, log: list[str], name: str, gate: asyncio.Event
) -> None:
    turn = turns.take(key)
    if turn is not None:
        await turns.wait(key, turn)
    try:
        log.append(f"{name} in")
        await gate.wait()
        log.append(f"{name} out")
    finally:
        turns.give(key)


async def test_joins_of_one_name_take_turns_in_the_order_asked() -> None:
    turns: Turns[bytes] = Turns()
    gate = asyncio.Event()
    log: list[str] = []
    tasks = [asyncio.create_task(_join(turns, b"a", log, str(i), gate)) for i in range(4)]
    other = asyncio.create_task(_join(turns, b"b", log, "b", asyncio.Event()))
    await asyncio.sleep(0.01)
    assert log == ["0 in", "b in"]  # another name does not wait
    gate.set()
    await asyncio.gather(*tasks)
    assert [entry for entry in log if entry != "b in"] == [
        f"{i} {step}" for i in range(4) for step in ("in", "out")
    ]
    other.cancel()
    with pytest.raises(asyncio.CancelledError):
        await other
    assert len(turns) == 0  # nothing is kept once nobody joins


async def test_a_join_cancelled_while_it_waits_does_not_hold_up_the_next() -> None:
    turns: Turns[bytes] = Turns()
    gate = asyncio.Event()
    log: list[str] = []
    first = asyncio.create_task(_join(turns, b"a", log, "first", gate))
    await asyncio.sleep(0)
    gone = asyncio.create_task(_join(turns, b"a", log, "gone", gate))
    last = asyncio.create_task(_join(turns, b"a", log, "last", gate))
    await asyncio.sleep(0.01)
    gone.cancel()
    await asyncio.sleep(0)
    gate.set()
    await asyncio.gather(first, last)
    assert gone.cancelled()
    assert log == ["first in", "first out", "last in", "last out"]
    assert len(turns) == 0


async def test_a_turn_handed_to_a_join_cancelled_at_that_moment_is_passed_on() -> None:
    turns: Turns[bytes] = Turns()
    assert turns.take(b"a") is None
    handed = turns.take(b"a")
    after = turns.take(b"a")
    assert handed is not None
    assert after is not None
    waiter = asyncio.create_task(turns.wait(b"a", handed))
    await asyncio.sleep(0)
    turns.give(b"a")  # handed over...
    waiter.cancel()  # ...and cancelled before it ran: the turn goes on to the next
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert after.done()
    turns.give(b"a")
    assert len(turns) == 0


@pytest.mark.parametrize("name", ["m", "k-12", "a/b", "50%", "with space", "é", "", "~._-", "a+b"])
def test_a_name_is_spelled_as_the_layout_spells_it(name: str) -> None:
    layout = Layout(b"/p/")
    assert layout.semaphore("n", name) == layout.semaphores("n") + _escape(name).encode() + b"/"
    assert name_part(name) == _escape(name).encode() + b"/"


def _backend(client: tenure.Client) -> EtcdBackend:
    backend = client.backend
    assert isinstance(backend, EtcdBackend)
    return backend


async def _keys(client: tenure.Client, node: str, name: str) -> list[bytes]:
    prefix = _backend(client).layout.semaphore(node, name)
    reply = await _backend(client).conn.txn([], [get_prefix(prefix)])
    return sorted(bytes(kv.key)[len(prefix) :] for kv in reply.responses[0].response_range.kvs)


async def test_an_uncontended_acquire_puts_one_key_and_a_release_leaves_none(
    etcd_url: str,
) -> None:
    async with tenure.connect(etcd_url) as client:
        await client.create_node("n")
        session = await client.session("n")
        lease = await session.mutex("m").lock()
        assert await _keys(client, "n", "m") == [b"q/" + f"{session.id:016x}-00000000".encode()]
        await lease.release()
        assert await _keys(client, "n", "m") == []
        # A persistent semaphore (its record known to the client now): the same, beside it.
        await session.semaphore("pool").create(limit=2)
        first = await session.semaphore("pool").acquire()
        second = await (await client.session("n")).semaphore("pool").acquire()
        assert second.token > first.token
        await first.release()
        await second.release()
        assert await _keys(client, "n", "pool") == [b"rec"]


async def test_a_release_drops_the_hold_and_its_queued_upgrade(etcd_url: str) -> None:
    async with tenure.connect(etcd_url) as client:
        await client.create_node("n")
        mine, other = await client.session("n"), await client.session("n")
        await mine.semaphore("pool").create(limit=3)
        lease = await mine.semaphore("pool").acquire(count=2)
        blocker = await other.semaphore("pool").acquire(count=1)
        upgrade = asyncio.create_task(lease.restate(3))  # waits: one token is taken
        sid = f"{mine.id:016x}-00000000".encode()
        for _ in range(50):
            if b"q/" + sid + b"+" in await _keys(client, "n", "pool"):
                break
            await asyncio.sleep(0.05)
        assert b"q/" + sid + b"+" in await _keys(client, "n", "pool")
        await lease.release()
        assert not [key for key in await _keys(client, "n", "pool") if sid in key]
        with pytest.raises(TenureError):  # its request went with the hold: it ends
            await asyncio.wait_for(upgrade, 5)
        taken = await mine.semaphore("pool").acquire(count=2, timeout=5)
        await taken.release()
        await blocker.release()
