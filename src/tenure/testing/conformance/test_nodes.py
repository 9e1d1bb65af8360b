"""Nodes: create, describe, alter and drop the namespaces sessions live in."""

from __future__ import annotations

import pytest

import tenure
from tenure.errors import (
    AlreadyExistsError,
    InvalidArgumentError,
    LeaseLostError,
    NotFoundError,
    SessionClosedError,
)

from .harness import DropAtEnd, unique
from .support import hold_in_block, spawn, wait_for_waiters, within


async def test_create_node_with_settings_and_describe_it(
    client: tenure.Client, drop_at_end: DropAtEnd
) -> None:
    name = drop_at_end(unique("configured"))
    await client.create_node(name, recovery_window=12.0, max_waiters=7, max_data_size=100)

    description = await client.describe_node(name)

    assert description.name == name
    assert description.config.recovery_window == 12.0
    assert description.config.max_waiters == 7
    assert description.config.max_data_size == 100
    assert description.config.max_sessions == tenure.NodeConfig().max_sessions  # default kept
    assert (description.sessions, description.semaphores) == (0, 0)


async def test_create_node_from_a_config_with_overrides(
    client: tenure.Client, drop_at_end: DropAtEnd
) -> None:
    name = drop_at_end(unique("from-config"))
    config = tenure.NodeConfig(recovery_window=20.0, max_semaphores=5)
    await client.create_node(name, config, recovery_window=30)

    described = (await client.describe_node(name)).config

    assert (described.recovery_window, described.max_semaphores) == (30.0, 5)


@pytest.mark.requires(tenure.Capability.LOCK_DELAY)
async def test_a_node_keeps_its_lock_delay(
    client: tenure.Client, client2: tenure.Client, drop_at_end: DropAtEnd
) -> None:
    name = drop_at_end(unique("delayed"))
    await client.create_node(name, lock_delay=0.5)
    assert (await client2.describe_node(name)).config.lock_delay == 0.5
    await client2.alter_node(name, lock_delay=1.5)
    assert (await client.describe_node(name)).config.lock_delay == 1.5


async def test_create_node_exist_ok_leaves_an_existing_node_alone(
    client: tenure.Client, node: str, drop_at_end: DropAtEnd
) -> None:
    await client.alter_node(node, max_waiters=3)
    with pytest.raises(AlreadyExistsError):
        await client.create_node(node)

    await client.create_node(node, exist_ok=True, max_waiters=9)  # no error, no change

    assert (await client.describe_node(node)).config.max_waiters == 3
    fresh = drop_at_end(unique("fresh"))
    await client.create_node(fresh, exist_ok=True, max_waiters=9)
    assert (await client.describe_node(fresh)).config.max_waiters == 9
    await client.drop_node(fresh)


async def test_describe_node_counts_live_sessions_and_semaphores(
    client: tenure.Client, node: str
) -> None:
    async with client.session(node) as first, client.session(node):
        await first.semaphore("pool").create(limit=2)
        lock = await first.mutex("job").lock()
        assert (await client.describe_node(node)).sessions == 2
        assert (await client.describe_node(node)).semaphores == 2  # "pool" and the mutex
        await lock.release()
        assert (await client.describe_node(node)).semaphores == 1  # the mutex was ephemeral
    assert (await client.describe_node(node)).sessions == 0


async def test_alter_node_returns_and_keeps_the_new_settings(
    client: tenure.Client, node: str
) -> None:
    altered = await client.alter_node(node, recovery_window=5.0, max_waiters=3)

    assert (altered.config.recovery_window, altered.config.max_waiters) == (5.0, 3)
    assert (await client.describe_node(node)).config == altered.config


async def test_the_old_name_of_the_recovery_window_still_works_with_a_warning(
    client: tenure.Client, node: str, drop_at_end: DropAtEnd
) -> None:
    """``session_timeout`` was the name of ``recovery_window`` (and still is in every
    store's records): create_node and alter_node take it, warning at the caller."""
    name = drop_at_end(unique("old-name"))
    with pytest.warns(DeprecationWarning, match="now called recovery_window") as caught:
        await client.create_node(name, session_timeout=9.0)
    assert [w.filename for w in caught] == [__file__]
    assert (await client.describe_node(name)).config.recovery_window == 9.0
    with pytest.warns(DeprecationWarning, match="now called recovery_window") as caught:
        altered = await client.alter_node(name, session_timeout=6.0)
    assert [w.filename for w in caught] == [__file__]
    assert altered.config.recovery_window == 6.0
    async with client.session(name) as session:  # a new session gets it as its default
        assert session.recovery_window == 6.0
    with pytest.raises(InvalidArgumentError, match="give recovery_window only"):
        await client.alter_node(name, session_timeout=1.0, recovery_window=2.0)
    assert (await client.describe_node(name)).config.recovery_window == 6.0
    await client.drop_node(name)


async def test_a_node_is_seen_by_every_client_of_the_same_state(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    assert (await client2.describe_node(node)).name == node
    await client2.alter_node(node, max_waiters=15)
    assert (await client.describe_node(node)).config.max_waiters == 15


async def test_drop_node_then_create_it_again(client: tenure.Client, node: str) -> None:
    await client.drop_node(node)

    with pytest.raises(NotFoundError):
        await client.describe_node(node)
    await client.create_node(node)
    assert (await client.describe_node(node)).sessions == 0


async def test_drop_node_with_force_ends_its_sessions_and_their_holds(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    session = await client2.session(node)
    waiter = await client2.session(node)
    lock = await session.mutex("job").lock()
    holder, _, _ = await hold_in_block(lock)
    waiting = spawn(waiter.mutex("job").lock())
    await wait_for_waiters(session, "job", 1)

    await client.drop_node(node, force=True)

    with pytest.raises(LeaseLostError):  # the holder's lease went with the node
        await within(holder, "the holder's cancellation")
    assert isinstance(lock.lost_reason, LeaseLostError)
    assert not lock.held
    with pytest.raises(NotFoundError):  # what the waiter waited for is gone
        await within(waiting)
    for ended in (session, waiter):
        assert isinstance(ended.lost_reason, SessionClosedError)  # closed, not expired
    with pytest.raises(NotFoundError):
        await client.describe_node(node)
