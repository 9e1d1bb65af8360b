"""Fencing tokens: every grant's token is greater than every earlier grant's."""

from __future__ import annotations

import itertools

import pytest

import tenure

from .support import owners

pytestmark = pytest.mark.requires(tenure.Capability.FENCING_TOKENS)


async def test_tokens_increase_across_every_kind_of_grant(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    tokens: list[int] = []
    a = await client.session(node)
    b = await client2.session(node)
    await a.semaphore("pool").create(limit=5)

    async with a.mutex("job") as lock:
        tokens.append(lock.token)
    async with b.semaphore("pool").acquire(count=2) as lease:
        tokens.append(lease.token)
    async with a.election("primary").campaign(b"a") as leadership:
        tokens.append(leadership.token)
    async with b.mutex("job") as lock:  # the same mutex again, from another client
        tokens.append(lock.token)
    async with client.session(node) as fresh, fresh.mutex("other") as lock:
        tokens.append(lock.token)
    lease = await a.semaphore("pool").acquire(count=1)
    tokens.append(lease.token)

    assert all(earlier < later for earlier, later in itertools.pairwise(tokens))


async def test_concurrent_holders_have_distinct_increasing_tokens(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    sessions = [await (client, client2)[i % 2].session(node) for i in range(6)]
    await sessions[0].semaphore("pool").create(limit=6)
    leases = [await s.semaphore("pool").acquire() for s in sessions]

    tokens = [lease.token for lease in leases]
    assert tokens == sorted(set(tokens))
    description = await sessions[0].semaphore("pool").describe(owners=True)
    assert [o.token for o in description.owners] == tokens  # what others see, in order


async def test_tokens_keep_increasing_when_a_node_is_dropped_and_created_again(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    before = await session.mutex("job").lock()
    await client.drop_node(node, force=True)
    await client2.create_node(node)

    session = await client2.session(node)
    after = await session.mutex("job").lock()

    assert after.token > before.token  # the dropped node's tokens are never reused


async def test_proclaim_keeps_the_token_and_a_new_term_gets_a_new_one(
    client: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    leadership = await session.election("primary").campaign(b"v1")
    token = leadership.token

    await leadership.proclaim(b"v2")
    await leadership.proclaim(b"v3")
    assert leadership.token == token
    leader = await session.election("primary").leader()
    assert leader is not None
    assert leader.token == token
    await leadership.resign()

    again = await session.election("primary").campaign(b"v4")
    assert again.token > token


async def test_the_token_is_what_other_sessions_see(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    other = await client2.session(node)
    lock = await session.mutex("job").lock()

    description = await other.semaphore("job").describe(owners=True)

    assert await owners(other, "job") == [session.id]
    assert description.owners[0].token == lock.token
