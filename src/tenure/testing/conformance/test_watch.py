"""Watches: the current state at once, then the latest state after each watched change."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

import tenure
from tenure.errors import SessionClosedError, SessionExpiredError

from .harness import Expire
from .support import settle, spawn, within

pytestmark = pytest.mark.requires(tenure.Capability.WATCH)


async def test_watch_yields_the_current_state_then_each_data_change(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    watcher = await client.session(node)
    writer = await client2.session(node)
    await writer.semaphore("config").create(limit=1, data=b"v1")

    async with contextlib.aclosing(watcher.semaphore("config").watch(data=True)) as states:
        first = await within(anext(states))
        assert (first.exists, first.data, first.limit) == (True, b"v1", 1)

        await writer.semaphore("config").update(b"v2")
        assert (await within(anext(states))).data == b"v2"

        await writer.semaphore("config").update(b"v3")
        assert (await within(anext(states))).data == b"v3"


async def test_changes_made_while_processing_coalesce_into_the_latest(
    client: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    await session.semaphore("config").create(limit=1, data=b"0")

    async with contextlib.aclosing(session.semaphore("config").watch(data=True)) as states:
        assert (await within(anext(states))).data == b"0"
        for version in (b"1", b"2", b"3"):
            await session.semaphore("config").update(version)

        assert (await within(anext(states))).data == b"3"  # not b"1": never a stale queue
        await session.semaphore("config").update(b"4")
        assert (await within(anext(states))).data == b"4"


async def test_watch_of_owners_sees_acquires_and_releases(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    watcher = await client.session(node)
    worker = await client2.session(node)
    await watcher.semaphore("pool").create(limit=2)

    async with contextlib.aclosing(watcher.semaphore("pool").watch(owners=True)) as states:
        assert (await within(anext(states))).owners == ()

        lease = await worker.semaphore("pool").acquire(count=2, data=b"w")
        state = await within(anext(states))
        assert [(o.session_id, o.count, o.data, o.token) for o in state.owners] == [
            (worker.id, 2, b"w", lease.token)
        ]
        assert state.count == 2

        await lease.release()
        state = await within(anext(states))
        assert (state.owners, state.count) == ((), 0)


async def test_watch_of_waiters_sees_the_queue(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    watcher = await client.session(node)
    waiter = await client2.session(node)
    lock = await watcher.mutex("job").lock()

    async with contextlib.aclosing(watcher.semaphore("job").watch(waiters=True)) as states:
        assert (await within(anext(states))).waiters == ()
        waiting = spawn(waiter.mutex("job").lock(data=b"me"))
        state = await within(anext(states))
        assert [(w.session_id, w.count, w.data) for w in state.waiters] == [
            (waiter.id, tenure.MAX_COUNT, b"me")
        ]

        await lock.release()
        await within(waiting)
        assert (await within(anext(states))).waiters == ()


async def test_a_watch_ignores_changes_it_does_not_watch(client: tenure.Client, node: str) -> None:
    session = await client.session(node)
    other = await client.session(node)
    await session.semaphore("config").create(limit=1, data=b"v1")

    async with contextlib.aclosing(session.semaphore("config").watch(data=True)) as states:
        await within(anext(states))
        pending = spawn(anext(states))
        lease = await other.semaphore("config").acquire()  # owners change: not watched
        await settle()
        assert not pending.done()

        await session.semaphore("config").update(b"v2")
        state = await within(pending)
        assert state.data == b"v2"
        assert state.owners == ()  # only what was asked for is listed
        await lease.release()


async def test_watch_of_a_missing_semaphore_sees_it_come_and_go(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    watcher = await client.session(node)
    other = await client2.session(node)

    async with contextlib.aclosing(watcher.semaphore("later").watch(data=True)) as states:
        state = await within(anext(states))
        assert not state.exists
        assert (state.limit, state.count, state.data, state.owners) == (0, 0, b"", ())

        await other.semaphore("later").create(limit=4, data=b"hi")
        state = await within(anext(states))
        assert (state.exists, state.limit, state.data) == (True, 4, b"hi")

        await other.semaphore("later").delete()
        assert not (await within(anext(states))).exists


async def test_service_discovery_with_an_ephemeral_semaphore(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    """Endpoints register as owners of an ephemeral semaphore; watchers see them come and go."""
    watcher = await client.session(node)
    host_a = await client2.session(node)
    host_b = await client2.session(node)

    def endpoints(state: tenure.SemaphoreDescription) -> list[bytes]:
        return [owner.data for owner in state.owners]

    async with contextlib.aclosing(watcher.semaphore("endpoints").watch(owners=True)) as states:
        assert not (await within(anext(states))).exists

        await host_a.semaphore("endpoints").acquire(count=1, ephemeral=True, data=b"host-a")
        assert endpoints(await within(anext(states))) == [b"host-a"]

        lease_b = await host_b.semaphore("endpoints").acquire(
            count=1, ephemeral=True, data=b"host-b"
        )
        assert endpoints(await within(anext(states))) == [b"host-a", b"host-b"]

        await host_a.close()  # host-a goes away with its session
        assert endpoints(await within(anext(states))) == [b"host-b"]

        await lease_b.release()  # the last endpoint leaves: the semaphore vanishes
        assert not (await within(anext(states))).exists

        await host_b.semaphore("endpoints").acquire(count=1, ephemeral=True, data=b"host-b2")
        state = await within(anext(states))
        assert state.exists
        assert endpoints(state) == [b"host-b2"]


async def test_a_watch_ends_with_the_loss_of_its_session(
    client: tenure.Client, node: str, expire: Expire
) -> None:
    session = await client.session(node, recovery_window=5.0)

    async with contextlib.aclosing(session.semaphore("config").watch(data=True)) as states:
        await within(anext(states))
        pending = spawn(anext(states))
        await settle()

        await expire(session)

        with pytest.raises(SessionExpiredError):
            await within(pending)


async def test_a_watch_ends_when_its_session_closes(client: tenure.Client, node: str) -> None:
    session = await client.session(node)

    async with contextlib.aclosing(session.semaphore("config").watch(data=True)) as states:
        await within(anext(states))
        pending = spawn(anext(states))
        await settle()

        await session.close()

        with pytest.raises(SessionClosedError):
            await within(pending)


async def test_closing_a_watch_disarms_it(client: tenure.Client, node: str) -> None:
    await client.alter_node(node, max_watches_per_session=1)
    session = await client.session(node)
    await session.semaphore("config").create(limit=1)

    for attempt in range(4):  # each closed watch gives its slot back
        async with contextlib.aclosing(session.semaphore("config").watch(data=True)) as states:
            await within(anext(states))
            if attempt % 2:  # closed while waiting for a change, not just between items
                pending = spawn(anext(states))
                await settle()
                pending.cancel()
                await asyncio.gather(pending, return_exceptions=True)
        await settle()
    async with (  # and the limit does hold
        contextlib.aclosing(session.semaphore("config").watch(data=True)) as one,
        contextlib.aclosing(session.semaphore("config").watch(data=True)) as two,
    ):
        await within(anext(one))
        with pytest.raises(tenure.errors.LimitExceededError):
            await anext(two)
