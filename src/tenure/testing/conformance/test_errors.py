"""Typed errors: every refusal has its class, and failures change nothing.

(Bad arguments, refused before anything is sent: ``test_bad_arguments.py``.)
"""

from __future__ import annotations

import contextlib

import pytest

import tenure
from tenure.errors import (
    AlreadyExistsError,
    ClientClosedError,
    InvalidArgumentError,
    LeaderChangedError,
    LeaseLostError,
    LimitExceededError,
    LostError,
    NotFoundError,
    PreconditionFailedError,
    SessionClosedError,
    SessionExpiredError,
    TenureError,
    UnsupportedError,
)
from tenure.testing import FakeClock

from .harness import Harness, MakeClient
from .support import spawn, wait_for_waiters, waiters, within

# -- not found / already exists -------------------------------------------------------


async def test_missing_nodes_are_not_found(client: tenure.Client) -> None:
    for attempt in (
        client.describe_node("no-such-node"),
        client.alter_node("no-such-node", lock_delay=1.0),
        client.drop_node("no-such-node"),
        client.session("no-such-node"),
    ):
        with pytest.raises(NotFoundError):
            await attempt


async def test_missing_semaphores_are_not_found(client: tenure.Client, node: str) -> None:
    session = await client.session(node)
    sem = session.semaphore("missing")
    for attempt in (
        sem.describe(),
        sem.update(b"x"),
        sem.delete(),
        sem.acquire(),
        sem.try_acquire(),
    ):
        with pytest.raises(NotFoundError):
            await attempt
    assert await sem.try_acquire(ephemeral=True) is not None  # unless ephemeral


async def test_creating_twice_is_already_exists(client: tenure.Client, node: str) -> None:
    with pytest.raises(AlreadyExistsError):
        await client.create_node(node)
    session = await client.session(node)
    await session.semaphore("pool").create(limit=1)
    with pytest.raises(AlreadyExistsError):
        await session.semaphore("pool").create(limit=2)
    await session.mutex("job").lock()
    with pytest.raises(AlreadyExistsError):  # an ephemeral semaphore exists too
        await session.semaphore("job").create(limit=1)
    assert (await session.semaphore("pool").describe()).limit == 1  # unchanged


# -- limits ---------------------------------------------------------------------------


async def test_a_count_above_the_limit_is_refused_not_waited_for(
    client: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    await session.semaphore("pool").create(limit=3)

    with pytest.raises(LimitExceededError):
        await session.semaphore("pool").acquire(count=4)
    with pytest.raises(LimitExceededError):
        await session.semaphore("pool").try_acquire(count=4)
    assert await waiters(session, "pool") == []
    assert (await session.semaphore("pool").acquire(count=3)).count == 3  # nothing stuck


async def test_max_waiters(client: tenure.Client, client2: tenure.Client, node: str) -> None:
    await client.alter_node(node, max_waiters=2)
    holder = await client.session(node)
    queued = [await client2.session(node) for _ in range(2)]
    third = await client2.session(node)
    await holder.mutex("job").lock()
    tasks = [spawn(s.mutex("job").lock()) for s in queued]
    await wait_for_waiters(holder, "job", 2)

    with pytest.raises(LimitExceededError, match="max_waiters"):
        await third.mutex("job").lock()
    assert await third.mutex("job").try_lock() is None  # a try does not queue: no limit
    assert len(await waiters(holder, "job")) == 2
    for task in tasks:
        task.cancel()


async def test_max_sessions(client: tenure.Client, client2: tenure.Client, node: str) -> None:
    await client.alter_node(node, max_sessions=2)
    first = await client.session(node)
    await client2.session(node)

    with pytest.raises(LimitExceededError, match="max_sessions"):
        await client.session(node)
    await first.close()
    await client.session(node)  # room again


async def test_max_semaphores(client: tenure.Client, node: str) -> None:
    await client.alter_node(node, max_semaphores=1)
    session = await client.session(node)
    await session.semaphore("one").create(limit=1)

    with pytest.raises(LimitExceededError, match="max_semaphores"):
        await session.semaphore("two").create(limit=1)
    with pytest.raises(LimitExceededError, match="max_semaphores"):
        await session.mutex("job").lock()  # an ephemeral one counts too


async def test_max_data_size(client: tenure.Client, node: str) -> None:
    await client.alter_node(node, max_data_size=8)
    session = await client.session(node)
    big = b"x" * 9

    with pytest.raises(LimitExceededError, match="max_data_size"):
        await session.semaphore("pool").create(limit=1, data=big)
    await session.semaphore("pool").create(limit=1, data=b"x" * 8)
    with pytest.raises(LimitExceededError, match="max_data_size"):
        await session.semaphore("pool").update(big)
    with pytest.raises(LimitExceededError, match="max_data_size"):
        await session.semaphore("pool").acquire(data=big)
    leadership = await session.election("primary").campaign(b"small")
    with pytest.raises(LimitExceededError, match="max_data_size"):
        await leadership.proclaim(big)
    assert leadership.data == b"small"
    leader = await session.election("primary").leader()
    assert leader is not None
    assert leader.data == b"small"


@pytest.mark.requires(tenure.Capability.WATCH)
async def test_max_watches_per_session(client: tenure.Client, node: str) -> None:
    await client.alter_node(node, max_watches_per_session=1)
    session = await client.session(node)

    async with contextlib.aclosing(session.semaphore("a").watch(data=True)) as first:
        await within(anext(first))
        with pytest.raises(LimitExceededError, match="max_watches_per_session"):
            async with contextlib.aclosing(session.semaphore("b").watch(data=True)) as second:
                await anext(second)


# -- preconditions --------------------------------------------------------------------


async def test_dropping_a_node_with_sessions_needs_force(client: tenure.Client, node: str) -> None:
    session = await client.session(node)

    with pytest.raises(PreconditionFailedError):
        await client.drop_node(node)
    assert (await client.describe_node(node)).sessions == 1  # nothing changed
    assert not session.closed
    await session.close()
    await client.drop_node(node)


async def test_deleting_a_busy_semaphore_needs_force(client: tenure.Client, node: str) -> None:
    session = await client.session(node)
    await session.semaphore("pool").create(limit=1)
    lease = await session.semaphore("pool").acquire()

    with pytest.raises(PreconditionFailedError):
        await session.semaphore("pool").delete()
    assert lease.held
    await lease.release()
    await session.semaphore("pool").delete()


# -- timeouts -------------------------------------------------------------------------


async def test_a_timed_out_acquire_raises_the_builtin_timeout_error(
    client: tenure.Client, client2: tenure.Client, node: str, clock: FakeClock
) -> None:
    holder = await client.session(node)
    other = await client2.session(node)
    await holder.mutex("job").lock()
    waiting = spawn(other.mutex("job").lock(timeout=1.0))
    await wait_for_waiters(holder, "job", 1)

    await clock.advance(1.5)

    with pytest.raises(TimeoutError) as raised:
        await within(waiting)
    assert not isinstance(raised.value, TenureError)


# -- connecting -----------------------------------------------------------------------


@pytest.mark.parametrize("url", ["nosuch://host", "http://localhost:80"])
async def test_an_unknown_url_scheme_is_an_invalid_argument(url: str) -> None:
    with pytest.raises(InvalidArgumentError, match="scheme"):
        await tenure.connect(url)


@pytest.mark.parametrize("url", ["not a url", "", "memory:"])
async def test_a_malformed_url_is_an_invalid_argument(url: str) -> None:
    with pytest.raises(InvalidArgumentError):
        await tenure.connect(url)


async def test_require_refuses_a_backend_that_lacks_a_capability(
    backend: Harness, state_clock: FakeClock | None, state_name: str, client: tenure.Client
) -> None:
    has = client.capabilities
    lacks = sorted(set(tenure.Capability) - has, key=lambda c: c.value)
    if not lacks:
        pytest.skip(f"{backend.name} backend has every capability: nothing to refuse")
    url, options = backend.url(state_name), backend.options(state_clock)

    with pytest.raises(UnsupportedError, match=lacks[0].value):
        await tenure.connect(url, require=[lacks[0]], **options)
    async with tenure.connect(url, require=has, **options) as satisfied:
        assert satisfied.capabilities == has


# -- a closed client ------------------------------------------------------------------


async def test_a_closed_client_raises_client_closed_error(
    make_client: MakeClient, node: str
) -> None:
    closing = await make_client()
    session = await closing.session(node)
    lock = await session.mutex("job").lock()
    await closing.aclose()

    for reason in (session.lost_reason, lock.lost_reason):
        assert type(reason) is ClientClosedError
    for attempt in (
        closing.create_node("another"),
        closing.describe_node(node),
        closing.alter_node(node, lock_delay=1.0),
        closing.drop_node(node),
        closing.session(node),
    ):
        with pytest.raises(ClientClosedError, match="closed"):
            await attempt
    with pytest.raises(ClientClosedError):
        await session.mutex("job").lock()
    with pytest.raises(SessionClosedError):  # what it raised before it had a class of its own
        await closing.session(node)


def test_every_loss_error_is_a_lost_error() -> None:
    for error in (
        SessionClosedError,
        ClientClosedError,
        SessionExpiredError,
        LeaseLostError,
        LeaderChangedError,
    ):
        assert issubclass(error, LostError)
    assert issubclass(ClientClosedError, SessionClosedError)
    assert issubclass(LeaderChangedError, LeaseLostError)
    assert issubclass(LostError, TenureError)
