"""A node's ``long_hold``: its own threshold for telling of long holds, kept where a
tenure server tells of them (Capability.LONG_HOLDS), refused everywhere else.

What a server does with it (its log, its audit log, ``tenure_long_holds_total``) is
the server's own tests' (``tests/server/test_long_holds.py``): the kit checks the
setting as every client sees it, created, altered, described, and refused.
"""

from __future__ import annotations

import math

import pytest

import tenure
from tenure import NodeConfig
from tenure.backends import Capability
from tenure.errors import InvalidArgumentError, UnsupportedError

from .harness import DropAtEnd, unique

#: The longest threshold a node may set (366 days, as a max_hold).
LONGEST = 366 * 24 * 3600.0


@pytest.mark.requires(Capability.LONG_HOLDS)
async def test_a_nodes_long_hold_is_kept_altered_and_described(
    client: tenure.Client, node: str, drop_at_end: DropAtEnd
) -> None:
    assert (await client.describe_node(node)).config.long_hold is None  # (the default)
    told = drop_at_end(unique("long"))
    await client.create_node(told, long_hold=300.0, max_hold=600.0)
    config = (await client.describe_node(told)).config
    assert (config.long_hold, config.max_hold) == (300.0, 600.0)
    quiet = drop_at_end(unique("quiet"))
    await client.create_node(quiet, NodeConfig(long_hold=0.0))  # (0: none is told of)
    assert (await client.describe_node(quiet)).config.long_hold == 0.0
    altered = await client.alter_node(told, long_hold=0.5)
    assert (altered.config.long_hold, altered.config.max_hold) == (0.5, 600.0)
    assert (await client.alter_node(told, long_hold=LONGEST)).config.long_hold == LONGEST
    assert (await client.alter_node(told, long_hold=0)).config.long_hold == 0.0
    # Other changes keep it; None gives the node back to the server's setting.
    assert (await client.alter_node(told, max_waiters=7)).config.long_hold == 0.0
    assert (await client.alter_node(told, long_hold=None)).config.long_hold is None
    assert (await client.describe_node(told)).config.max_waiters == 7
    assert (await client.alter_node(node, long_hold=2)).config.long_hold == 2.0
    assert (await client.describe_node(node)).config.long_hold == 2.0


@pytest.mark.parametrize(
    "bad", [-1.0, -0.001, math.nan, math.inf, -math.inf, LONGEST + 1, "5", True]
)
async def test_a_bad_long_hold_is_refused_and_nothing_changes(
    client: tenure.Client, node: str, bad: object
) -> None:
    """On every backend: a bad value is refused for what it is (InvalidArgumentError,
    before the store is asked), whether the store would tell of long holds or not."""
    name = unique("bad")
    with pytest.raises(InvalidArgumentError, match="long_hold"):
        await client.create_node(name, long_hold=bad)
    with pytest.raises(InvalidArgumentError, match="long_hold"):
        await client.alter_node(node, long_hold=bad)
    assert (await client.describe_node(node)).config.long_hold is None
    assert name not in await client.list_nodes()


async def test_long_hold_is_refused_where_no_server_tells_of_long_holds(
    client: tenure.Client, node: str, drop_at_end: DropAtEnd
) -> None:
    """On every backend: one without Capability.LONG_HOLDS (no server log or audit log
    to tell in: ``memory://``, ``etcd://``, ``redis://``, ``postgres://``) refuses a
    node created or altered with ``long_hold`` set, 0 too, with UnsupportedError saying
    it needs a tenure server; a node that does not set it is unaffected. One with the
    capability keeps it. Never taken and then ignored."""
    name = drop_at_end(unique("long"))
    if Capability.LONG_HOLDS in client.capabilities:
        await client.create_node(name, long_hold=0.0)
        assert (await client.describe_node(name)).config.long_hold == 0.0
        return
    for value in (300.0, 0.0):
        with pytest.raises(UnsupportedError, match=r"long_hold.*tenure server"):
            await client.create_node(name, long_hold=value)
        with pytest.raises(UnsupportedError, match=r"long_hold.*tenure server"):
            await client.create_node(name, NodeConfig(long_hold=value))
        with pytest.raises(UnsupportedError, match=r"long_hold.*tenure server"):
            await client.alter_node(node, long_hold=value)
    assert name not in await client.list_nodes()
    described = await client.describe_node(node)
    assert described.config.long_hold is None
    # Unset (None, the default), it is no setting at all: the rest works as ever.
    assert (await client.alter_node(node, long_hold=None)).config == described.config
    altered = await client.alter_node(node, max_waiters=9)
    assert (altered.config.max_waiters, altered.config.long_hold) == (9, None)
    await client.create_node(name, NodeConfig(long_hold=None, max_waiters=8))
    assert (await client.describe_node(name)).config.max_waiters == 8
    async with client.session(name) as session, session.mutex("job"):
        pass
