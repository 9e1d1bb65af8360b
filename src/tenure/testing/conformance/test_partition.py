"""Partitions: every key has exactly one live owner, all members agree, and only the
keys that must move do, as members join and leave."""

from __future__ import annotations

import asyncio
import contextlib
import random

import pytest

import tenure
from tenure.errors import InvalidArgumentError, PreconditionFailedError, SessionExpiredError

from .support import eventually, within

#: The keys every check looks at.
KEYS = [f"order-{i}" for i in range(300)]


async def settled(parts: list[tenure.Partition]) -> None:
    """Until every partition of ``parts`` sees exactly the members in ``parts``."""
    ids = {part.id for part in parts}

    async def agree() -> bool:
        return all(set(part.view.weights) == ids for part in parts)

    await eventually(agree, f"every member seeing {sorted(ids)}")


def assignment(parts: list[tenure.Partition]) -> dict[str, str]:
    """Each key's owner, checked: exactly one member owns it, and every member's
    ``owners`` names that one."""
    owners: dict[str, str] = {}
    for key in KEYS:
        owning = [part.id for part in parts if part.owns(key)]
        assert len(owning) == 1, (key, owning)
        assert {part.owners(key)[0] for part in parts} == set(owning), key
        owners[key] = owning[0]
    return owners


async def test_members_joining_and_leaving_at_random_keep_one_owner_per_key(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    rng = random.Random(35)
    clients = (client, client2)
    live: list[tenure.Partition] = []
    before: dict[str, str] = {}
    for step in range(10):
        if len(live) < 2 or (len(live) < 5 and rng.random() < 0.6):
            session = await clients[step % 2].session(node)
            weight = rng.choice([1, 2, 0.5])
            joiner = await session.group("shards").partition(f"m{step}", weight=weight)
            live.append(joiner)
            await settled(live)
            after = assignment(live)
            moved = {key for key in KEYS if before.get(key) != after[key]}
            # A key moves only to the member that joined.
            assert all(after[key] == joiner.id for key in moved), step
        else:
            leaver = live.pop(rng.randrange(len(live)))
            await leaver.leave()
            await settled(live)
            after = assignment(live)
            moved = {key for key in KEYS if before[key] != after[key]}
            # Only the keys the member that left owned move.
            assert moved == {key for key in KEYS if before[key] == leaver.id}, step
        before = after
    assert len(set(before.values())) == len(live)  # every member got keys
    for part in live:
        await part.leave()


async def test_weights_skew_ownership(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    light = await (await client.session(node)).group("g").partition("light", weight=1)
    heavy = await (await client2.session(node)).group("g").partition("heavy", weight=3)
    await settled([light, heavy])
    keys = [f"key-{i}" for i in range(2000)]
    heavy_keys = sum(heavy.owns(key) for key in keys)
    assert sum(light.owns(key) for key in keys) == len(keys) - heavy_keys
    # 3/4 expected; the hash is fixed, so the count is too (1,510 here).
    assert 0.70 * len(keys) < heavy_keys < 0.80 * len(keys)


async def test_owners_lists_distinct_members_the_owner_first(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    parts = [
        await (await c.session(node)).group("g").partition(f"p{i}")
        for i, c in enumerate((client, client2, client))
    ]
    await settled(parts)
    for key in KEYS[:50]:
        listed = parts[0].owners(key, replicas=3)
        assert sorted(listed) == ["p0", "p1", "p2"]
        assert parts[1].owners(key, replicas=2) == listed[:2]
        assert parts[2].owners(key, replicas=9) == listed  # no more than there are
        assert parts[0].view.owners(key, 2) == listed[:2]
        assert [p.id for p in parts if p.owns(key)] == [listed[0]]
        assert parts[1].view.owns(key) == (listed[0] == "p1")
    for bad in (0, -1, 1.5, True):
        with pytest.raises(InvalidArgumentError, match="replicas"):
            parts[0].owners("k", replicas=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="key"):
        parts[0].owns(17)  # type: ignore[arg-type]


async def test_changes_yield_an_assignment_per_membership_change(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    one, two = await client.session(node), await client2.session(node)
    mine = await one.group("g").partition("a", weight=2, data=b"10.0.0.1")
    changes = mine.changes()
    async with contextlib.aclosing(changes):
        first = await within(anext(changes))
        assert (first.members, first.weights, first.joined, first.left) == (
            {"a": b"10.0.0.1"},
            {"a": 2},
            {"a"},
            set(),
        )
        assert first.tokens == {"a": mine.token}
        assert first.me == "a"
        assert all(first.owns(key) for key in KEYS)
        # A plain member takes no keys and is no part of the partition's views.
        plain = await two.group("g").join("watcher")
        other = await two.group("g").partition("b", weight=1)
        view = await within(anext(changes))
        if "b" not in view.weights:  # (a read between the two joins: nothing changed)
            view = await within(anext(changes))
        assert (set(view.weights), view.joined, view.left) == ({"a", "b"}, {"b"}, set())
        assert "watcher" not in view.members
        assert not other.owns(KEYS[0]) or not mine.owns(KEYS[0])
        assert {k for k in KEYS if view.owns(k)} == {k for k in KEYS if mine.owns(k)}
        await other.leave()
        view = await within(anext(changes))
        assert (set(view.weights), view.joined, view.left) == ({"a"}, set(), {"b"})
        await plain.leave()
        await mine.leave()
        assert await within(anext(changes, None)) is None  # left: the changes end
    with pytest.raises(PreconditionFailedError):
        mine.owns("k")
    assert await one.group("g").members() == {}


async def test_a_lost_member_ends_its_changes_with_the_loss(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    doomed = await client.session(node)
    survivor = await (await client2.session(node)).group("g").partition("stays")
    part = await doomed.group("g").partition("goes")
    await settled([survivor, part])
    changes = part.changes()
    async with contextlib.aclosing(changes):
        await within(anext(changes))
        await client2.kill_session(node, doomed.id)
        with pytest.raises(SessionExpiredError):
            await within(anext(changes))
    with pytest.raises(SessionExpiredError):
        part.owns("k")
    await settled([survivor])
    assert all(survivor.owns(key) for key in KEYS)
    await doomed.close()


async def test_a_partition_in_async_with_leaves_at_its_end(
    client: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    async with session.group("g").partition("p", data=b"x") as part:
        assert part.held
        assert (part.weight, part.member.data) == (1, b"x")
        assert part.owns("anything")
        assert await session.group("g").members() == {"p": b"x"}
        await part.member.update(b"y")
        assert await session.group("g").members() == {"p": b"y"}
    assert not part.held
    assert await session.group("g").members() == {}
    await asyncio.sleep(0)
