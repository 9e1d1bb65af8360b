"""Groups: joins, updates and leaves seen by every member; one member per id; the limit."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Callable

import pytest

import tenure
from tenure._core.members import member_record
from tenure.errors import (
    AlreadyExistsError,
    InvalidArgumentError,
    LeaseLostError,
    LimitExceededError,
    NotFoundError,
    PreconditionFailedError,
    SessionExpiredError,
)

from .harness import Expire
from .support import PATIENCE, describe, spawn, within


async def until(
    views: AsyncGenerator[tenure.GroupView, None],
    wanted: Callable[[tenure.GroupView], bool],
    seen: list[tenure.GroupView] | None = None,
) -> tenure.GroupView:
    """The first view of ``views`` that is ``wanted`` (each one also goes to ``seen``);
    fails if none comes within the kit's patience."""
    async with asyncio.timeout(PATIENCE):
        async for view in views:
            if seen is not None:
                seen.append(view)
            if wanted(view):
                return view
    raise AssertionError("the watch ended")


def members_are(expected: dict[str, bytes]) -> Callable[[tenure.GroupView], bool]:
    """A view whose members (and their data) are ``expected``."""
    return lambda view: view.members == expected


async def test_joins_updates_and_leaves_are_seen_by_every_member(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    sessions = [await c.session(node) for c in (client, client2, client)]
    first = await sessions[0].group("workers").join("w0", data=b"10.0.0.1:80")
    watches = [s.group("workers").watch() for s in sessions]
    async with contextlib.AsyncExitStack() as stack:
        for watch in watches:
            stack.push_async_callback(watch.aclose)
        for watch in watches:  # the first view: every member, all joined
            view = await within(anext(watch))
            assert view.members == {"w0": b"10.0.0.1:80"}
            assert (view.joined, view.left) == ({"w0"}, set())
            assert view.tokens == {"w0": first.token}
        second = await sessions[1].group("workers").join("w1", b"10.0.0.2:80")
        third = await sessions[2].group("workers").join("w2")
        everyone = {"w0": b"10.0.0.1:80", "w1": b"10.0.0.2:80", "w2": b""}
        for watch in watches:
            await until(watch, members_are(everyone))
        await second.update(b"10.0.0.2:90")
        assert second.data == b"10.0.0.2:90"
        updated = {**everyone, "w1": b"10.0.0.2:90"}
        for watch in watches:
            view = await until(watch, members_are(updated))
            assert "w1" not in view.joined | view.left  # data alone: neither
        await first.leave()
        assert not first.held
        left = {"w1": b"10.0.0.2:90", "w2": b""}
        for watch in watches:
            view = await until(watch, members_are(left))
            assert "w0" in view.left
            assert view.tokens == {"w1": second.token, "w2": third.token}
        assert await sessions[2].group("workers").members() == left
        assert list(await sessions[0].group("workers").members()) == ["w1", "w2"]  # join order


async def test_a_taken_id_is_refused_and_the_refused_join_leaves_no_hold(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    one, two = await client.session(node), await client2.session(node)
    member = await one.group("g").join("worker-1", data=b"a")
    with pytest.raises(AlreadyExistsError, match="worker-1"):
        await two.group("g").join("worker-1", data=b"b")
    found = await describe(one, "g")
    assert found is not None
    assert [o.token for o in found.owners] == [member.token]
    assert await two.group("g").members() == {"worker-1": b"a"}
    await member.leave()
    again = await two.group("g").join("worker-1", data=b"b")  # free again
    assert again.token > member.token
    assert await one.group("g").members() == {"worker-1": b"b"}


async def test_of_concurrent_joins_of_one_id_exactly_one_wins(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    sessions = [await c.session(node) for c in (client, client2) * 3]
    for round_ in range(3):
        results = await within(
            asyncio.gather(
                *(s.group("race").join("the-one", data=b"%d" % i) for i, s in enumerate(sessions)),
                return_exceptions=True,
            )
        )
        won = [r for r in results if isinstance(r, tenure.GroupMember)]
        lost = [r for r in results if isinstance(r, AlreadyExistsError)]
        assert (len(won), len(lost)) == (1, len(sessions) - 1), results
        members = await sessions[0].group("race").members()
        assert members == {"the-one": won[0].data}, round_
        found = await describe(sessions[0], "race")
        assert found is not None
        assert [o.token for o in found.owners] == [won[0].token]
        await won[0].leave()


async def test_a_full_group_refuses_a_join_naming_max_members(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    one, two = await client.session(node), await client2.session(node)
    a = await one.group("pool", max_members=2).join("a")
    await two.group("pool", max_members=2).join("b")
    with pytest.raises(LimitExceededError, match="max_members"):
        await one.group("pool", max_members=2).join("c")
    # The first join made it: a later max_members finds the stored limit.
    with pytest.raises(LimitExceededError, match="max_members"):
        await two.group("pool", max_members=50).join("c")
    await a.leave()
    await two.group("pool", max_members=50).join("c")
    assert list(await one.group("pool").members()) == ["b", "c"]


async def test_a_member_leaves_with_its_expired_session(
    client: tenure.Client, client2: tenure.Client, node: str, expire: Expire
) -> None:
    doomed = await client.session(node, recovery_window=15.0)
    watcher = await client2.session(node)
    member = await doomed.group("g").join("gone-soon")
    await watcher.group("g").join("stays")
    views = watcher.group("g").watch()
    async with contextlib.aclosing(views):
        await until(views, lambda view: set(view.members) == {"gone-soon", "stays"})
        await expire(doomed)
        assert isinstance(member.lost_reason, SessionExpiredError)
        view = await until(views, lambda view: set(view.members) == {"stays"})
        assert "gone-soon" in view.left


async def test_a_member_leaves_with_its_killed_session_and_its_block_is_cancelled(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    doomed = await client.session(node)
    watcher = await client2.session(node)
    entered = asyncio.Event()

    async def member_block() -> None:
        async with doomed.group("g").join("victim") as member:
            assert member.held
            entered.set()
            await asyncio.Event().wait()

    body = spawn(member_block())
    views = watcher.group("g").watch()
    async with contextlib.aclosing(views):
        await until(views, lambda view: "victim" in view.members)
        await within(entered.wait())
        await client2.kill_session(node, doomed.id)
        with pytest.raises(SessionExpiredError):
            await within(body)
        view = await until(views, lambda view: not view.members)
        assert view.left == {"victim"}
    await doomed.close()


async def test_leaving_async_with_leaves_and_a_left_member_refuses_updates(
    client: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    async with session.group("g").join("brief", data=b"x") as member:
        assert await session.group("g").members() == {"brief": b"x"}
    assert not member.held
    assert member.lost_reason is None
    assert await session.group("g").members() == {}
    with pytest.raises(PreconditionFailedError):
        await member.update(b"y")
    await member.leave()  # idempotent
    # One task may be several members of one group.
    both = [await session.group("g").join(i) for i in ("x", "y")]
    assert list(await session.group("g").members()) == ["x", "y"]
    for member in both:
        await member.leave()


async def test_a_member_id_left_and_taken_again_is_in_left_and_joined(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    one, two = await client.session(node), await client2.session(node)
    before = await one.group("g").join("w", data=b"old")
    views = one.group("g").watch()
    async with contextlib.aclosing(views):
        seen: list[tenure.GroupView] = []
        await until(views, lambda view: "w" in view.members)
        await before.leave()
        after = await two.group("g").join("w", data=b"new")
        await until(views, lambda view: view.tokens.get("w") == after.token, seen)
    assert "w" in set().union(*(view.left for view in seen))
    assert "w" in set().union(*(view.joined for view in seen))


async def test_create_delete_and_a_semaphore_that_is_no_group(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    one, two = await client.session(node), await client2.session(node)
    group = one.group("g", max_members=3)
    assert await group.members() == {}  # nobody made it: no members
    await group.create()
    assert await group.members() == {}
    with pytest.raises(AlreadyExistsError):
        await group.create()
    await two.group("g").create(exist_ok=True)
    assert (await one.semaphore("g").describe()).limit == 3
    member = await two.group("g").join("m")
    with pytest.raises(PreconditionFailedError):
        await group.delete()  # it has a member
    await group.delete(force=True)
    await within(member.lost)
    assert isinstance(member.lost_reason, LeaseLostError)
    assert await group.members() == {}  # deleted: no members
    with pytest.raises(NotFoundError):
        await group.delete()
    await one.counter("count").add(1)
    for call in (
        lambda: one.group("count").join("m"),
        lambda: one.group("count").members(),
        lambda: one.group("count").create(exist_ok=True),
        lambda: one.group("count").delete(),
    ):
        with pytest.raises(PreconditionFailedError, match="not a group"):
            await call()
    assert await one.counter("count").get() == 1


async def test_a_group_nobody_joined_has_no_members_also_after_a_refused_join(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    one, two = await client.session(node), await client2.session(node)
    assert await one.group("others").members() == {}
    assert await describe(one, "others") is None  # asking made nothing
    with pytest.raises(InvalidArgumentError, match="member_id"):
        one.group("others").join("")  # refused before anything is sent
    assert await one.group("others").members() == {}
    # A join refused by the store: the group is full, the refused join is no member.
    first = await one.group("full", max_members=1).join("first", data=b"1")
    with pytest.raises(LimitExceededError, match="max_members"):
        await two.group("full", max_members=1).join("second", data=b"2")
    assert await two.group("full").members() == {"first": b"1"}
    await first.leave()
    assert await two.group("full").members() == {}
    # A join refused for its id, by a member that then left: nobody is a member.
    kept = await one.group("taken").join("id", data=b"a")
    with pytest.raises(AlreadyExistsError, match="id"):
        await two.group("taken").join("id", data=b"b")
    await kept.leave()
    assert await two.group("taken").members() == {}


async def test_bad_arguments_are_refused_before_anything_is_sent(
    client: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    group = session.group("g")
    for member_id in ("", "a\nb", "\x1b[31m", "x" * 257, "é" * 129, 7, None, b"id"):
        with pytest.raises(InvalidArgumentError, match="member_id"):
            group.join(member_id)  # type: ignore[arg-type]
    for weight in (0, -1, 0.0, float("nan"), float("inf"), 2e9, True, "1", None):
        with pytest.raises(InvalidArgumentError, match="weight"):
            group.partition("p", weight=weight)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="data"):
        group.join("ok", data="text")  # type: ignore[arg-type]
    for bad in (0, -1, 1.5):
        with pytest.raises(InvalidArgumentError, match="max_members"):
            session.group("g", max_members=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        session.group("")
    assert await describe(session, "g") is None  # nothing was sent
    member = await group.join("é" * 128)  # 256 bytes: the longest id
    assert list(await group.members()) == ["é" * 128]
    await member.leave()


async def test_a_watch_of_a_missing_group_sees_it_made_and_deleted(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    one, two = await client.session(node), await client2.session(node)
    views = one.group("later").watch()
    async with contextlib.aclosing(views):
        first = await within(anext(views))
        assert (first.members, first.joined, first.left) == ({}, set(), set())
        member = await two.group("later").join("first", data=b"x")
        assert (await until(views, members_are({"first": b"x"}))).joined == {"first"}
        await two.group("later").delete(force=True)
        assert (await until(views, members_are({}))).left == {"first"}
    assert isinstance(await within(member.lost), LeaseLostError)


async def test_a_join_under_way_is_no_member_but_holds_its_id(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    # A join between its grant and its check, frozen: the hold a join makes first.
    one, two = await client.session(node), await client2.session(node)
    winner = await one.group("g").join("w", data=b"first")
    joining = member_record("w", b"second", weight=None, state="joining")
    loser = await two.semaphore("g").acquire(1, data=joining, timeout=0)
    views = one.group("g").watch()
    async with contextlib.aclosing(views):
        await until(views, members_are({"w": b"first"}))
        # The winner leaves while the loser is still letting go: nobody is "w".
        await winner.leave()
        assert (await until(views, members_are({}))).left == {"w"}
        assert await one.group("g").members() == {}
        # The id is held by the join under way: a third join of it is refused.
        with pytest.raises(AlreadyExistsError):
            await one.group("g").join("w")
        await loser.release()
        third = await one.group("g").join("w", data=b"third")
        assert (await until(views, members_are({"w": b"third"}))).joined == {"w"}
        assert third.token > loser.token
