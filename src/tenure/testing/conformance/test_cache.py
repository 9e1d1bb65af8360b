"""The prefix cache: every semaphore under a prefix mirrored in the client, kept current.

``client.cache(node, prefix=...)`` arms a prefix watch, lists the prefix, and then
follows the watch's pushes. Checked here against another client's random stream
of creates, updates, deletes, acquires and releases under the prefix and outside
it: the cache converges to ``list_semaphores(prefix)`` and a describe of each,
names outside never show, ``changes()`` tells each change, and the cache survives a
dropped connection (a reset: it lists again) and the loss of its session.
"""

from __future__ import annotations

import contextlib
import random

import pytest

import tenure
from tenure import lowlevel
from tenure.backends._base import prefix_watch
from tenure.errors import InvalidArgumentError, LimitExceededError, NotFoundError

from .harness import Network
from .support import eventually, spawn, within

pytestmark = pytest.mark.requires(tenure.Capability.PREFIX_WATCH)

PREFIX = "config/"

#: What a view shows that the tests compare: an owner's ``since`` is left out (a
#: server stamps each reply with its clocks' difference then, which drifts).
Shown = tuple[object, ...]


def shown(view: tenure.SemaphoreDescription | None) -> Shown | None:
    if view is None:
        return None
    owners = tuple((o.session_id, o.count, o.data, o.token) for o in view.owners)
    return (view.name, view.limit, view.count, view.data, view.ephemeral, owners)


def shown_items(cache: tenure.Cache) -> dict[str, Shown | None]:
    return {name: shown(view) for name, view in cache.items()}


async def truth(
    client: tenure.Client, session: tenure.Session, node: str
) -> dict[str, Shown | None]:
    """The prefix as the backend has it now: its listing, and a describe of each name."""
    found: dict[str, Shown | None] = {}
    for summary in await client.list_semaphores(node, PREFIX):
        try:
            view = await session.semaphore(summary.name).describe(owners=True)
        except NotFoundError:
            continue  # deleted between the two reads
        found[summary.name] = shown(view)
    return found


async def converged(
    cache: tenure.Cache, client: tenure.Client, session: tenure.Session, node: str
) -> None:
    async def same() -> bool:
        return shown_items(cache) == await truth(client, session, node)

    await eventually(same, f"the cache of {PREFIX!r} showing what the backend has")


async def test_the_cache_holds_the_prefix_once_entered(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    writer = await client2.session(node)
    await writer.semaphore("config/db").create(1, b"postgres://db")
    await writer.semaphore("config/cache").create(3, b"redis://cache")
    await writer.semaphore("configs").create(1, b"outside")
    await writer.semaphore("other/config/x").create(1, b"outside")
    lock = await writer.mutex("config/lock").lock(data=b"holder")

    async with client.cache(node, prefix=PREFIX) as cache:
        assert [name for name, _ in cache.items()] == ["config/cache", "config/db", "config/lock"]
        db = cache.get("config/db")
        assert db is not None
        assert (db.data, db.limit, db.count) == (b"postgres://db", 1, 0)
        held = cache.get("config/lock")
        assert held is not None
        assert [(o.session_id, o.data, o.token) for o in held.owners] == [
            (writer.id, b"holder", lock.token)
        ]
        assert held.waiters == ()
        assert cache.get("config/missing") is None
        # Names outside the prefix are not in the cache, though the store has them.
        assert cache.get("configs") is None
        assert cache.get("other/config/x") is None
        assert cache.get("other/x") is None
        with pytest.raises(InvalidArgumentError, match="name must be a str"):
            cache.get(b"config/db")  # type: ignore[arg-type]
        assert shown_items(cache) == await truth(client, writer, node)


async def test_changes_tell_each_change_and_a_deletion_removes(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    writer = await client2.session(node)
    await writer.semaphore("config/db").create(1, b"v1")

    async with client.cache(node, prefix=PREFIX) as cache:
        changes = cache.changes()
        await writer.semaphore("config/db").update(b"v2")
        change = await within(anext(changes))
        assert change.name == "config/db"
        assert change.view is not None
        assert change.view.data == b"v2"
        assert cache.get("config/db") == change.view

        await writer.semaphore("config/new").create(2, b"n")
        change = await within(anext(changes))
        assert (change.name, change.view is not None) == ("config/new", True)

        lease = await writer.semaphore("config/new").acquire(data=b"w")
        change = await within(anext(changes))
        assert change.view is not None
        assert [(o.session_id, o.token) for o in change.view.owners] == [(writer.id, lease.token)]
        assert change.view.count == 1
        await lease.release()
        change = await within(anext(changes))
        assert change.view is not None
        assert (change.view.owners, change.view.count) == ((), 0)

        await writer.semaphore("config/db").delete()
        change = await within(anext(changes))
        assert change == tenure.CacheChange("config/db", None)
        assert cache.get("config/db") is None
        assert [name for name, _ in cache.items()] == ["config/new"]


async def test_the_cache_converges_under_a_random_stream_of_changes(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    rng = random.Random(35)
    writer = await client2.session(node)
    other = await client2.session(node)
    names = [f"config/{i}" for i in range(6)] + ["config", "configs/x", "other/1"]
    await writer.semaphore("config/0").create(2, b"start")

    async with client.cache(node, prefix=PREFIX) as cache:
        seen: dict[str, Shown | None] = shown_items(cache)
        changes = cache.changes()
        leases: list[tenure.Lease] = []
        for _ in range(60):
            name = rng.choice(names)
            action = rng.choice(["create", "update", "delete", "acquire", "release", "lock"])
            with contextlib.suppress(tenure.errors.TenureError):
                if action == "create":
                    await writer.semaphore(name).create(rng.randint(1, 3), b"c")
                elif action == "update":
                    await writer.semaphore(name).update(b"%d" % rng.randint(0, 99))
                elif action == "delete":
                    await writer.semaphore(name).delete(force=True)
                elif action == "acquire":
                    holder = rng.choice([writer, other])
                    lease = await holder.semaphore(name).try_acquire(data=b"a")
                    if lease is not None:
                        leases.append(lease)
                elif action == "release" and leases:
                    await leases.pop(rng.randrange(len(leases))).release()
                elif action == "lock":  # an ephemeral semaphore: comes and goes
                    lock = await other.mutex(name).try_lock()
                    if lock is not None:
                        leases.append(lock)
        await converged(cache, client, writer, node)

        # What changes() told, applied to the state at entry, is the state now.
        async def told_all() -> bool:
            if seen == shown_items(cache):
                return True
            change = await within(anext(changes), "the next change the cache applied")
            assert change.name.startswith(PREFIX), change.name
            if change.view is None:
                seen.pop(change.name, None)
            else:
                seen[change.name] = shown(change.view)
            return seen == shown_items(cache)

        await eventually(told_all, "changes() telling every change the cache applied")
        assert all(name.startswith(PREFIX) for name, _ in cache.items())


async def test_a_cache_over_max_size_fails_naming_the_limit(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    writer = await client2.session(node)
    for i in range(3):
        await writer.semaphore(f"config/{i}").create(1)

    with pytest.raises(LimitExceededError, match=r"max_size \(2\)"):
        async with client.cache(node, prefix=PREFIX, max_size=2):
            pass

    async with client.cache(node, prefix=PREFIX, max_size=4) as cache:
        changes = cache.changes()
        await writer.semaphore("config/3").create(1)  # 4: still fits
        assert (await within(anext(changes))).name == "config/3"
        await writer.semaphore("config/4").create(1)  # 5: over
        with pytest.raises(LimitExceededError, match=r"max_size \(4\)"):
            await within(anext(changes))
        with pytest.raises(LimitExceededError, match="max_size"):
            cache.items()
        with pytest.raises(LimitExceededError, match="max_size"):
            await within(anext(cache.changes()))


async def test_a_reset_lists_again_and_converges(
    client: tenure.Client, client2: tenure.Client, node: str, network: Network
) -> None:
    writer = await client2.session(node)
    await writer.semaphore("config/a").create(1, b"1")
    await writer.semaphore("config/b").create(1, b"1")

    async with client.cache(node, prefix=PREFIX) as cache:
        changes = cache.changes()
        session = cache._session
        assert session is not None
        await network.disconnect(session, lose_pushes=True)
        await writer.semaphore("config/a").update(b"2")  # its push is lost
        await writer.semaphore("config/b").delete()
        await writer.semaphore("config/c").create(1, b"new")
        await network.reconnect(session)  # the watch is armed again: a reset

        await converged(cache, client, writer, node)
        told: dict[str, bytes | None] = {}
        for _ in range(3):
            change = await within(anext(changes))
            told[change.name] = None if change.view is None else change.view.data
        assert told == {"config/a": b"2", "config/b": None, "config/c": b"new"}
        await writer.semaphore("config/a").update(b"3")  # the new watch pushes
        assert (await within(anext(changes))).view.data == b"3"  # type: ignore[union-attr]


async def test_the_cache_outlives_the_loss_of_its_session(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    writer = await client2.session(node)
    await writer.semaphore("config/a").create(1, b"1")

    async with client.cache(node, prefix=PREFIX) as cache:
        changes = cache.changes()
        [mine] = [s for s in await client2.list_sessions(node) if "cache" in s.description]
        await client2.kill_session(node, mine.session_id)  # as an operator would
        await writer.semaphore("config/a").update(b"2")
        await writer.semaphore("config/b").create(1, b"b")

        await converged(cache, client, writer, node)
        told: dict[str, bytes | None] = {}
        while len(told) < 2:
            change = await within(anext(changes))
            told[change.name] = None if change.view is None else change.view.data
        assert told == {"config/a": b"2", "config/b": b"b"}

        async def replaced() -> bool:
            live = [s for s in await client2.list_sessions(node) if "cache" in s.description]
            return len(live) == 1 and live[0].session_id != mine.session_id

        await eventually(replaced, "the cache's new session")
        await writer.semaphore("config/b").delete()
        assert await within(anext(changes)) == tenure.CacheChange("config/b", None)


async def test_a_cache_of_data_alone_lists_no_owners(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    writer = await client2.session(node)
    await writer.semaphore("config/a").create(2, b"1")
    await writer.semaphore("config/a").acquire()

    async with client.cache(node, prefix=PREFIX, owners=False) as cache:
        view = cache.get("config/a")
        assert view is not None
        assert (view.data, view.owners) == (b"1", ())
        changes = cache.changes()
        await writer.semaphore("config/a").update(b"2")
        change = await within(anext(changes))
        assert change.view is not None
        assert (change.view.data, change.view.owners) == (b"2", ())


async def test_closing_the_cache_ends_its_changes_and_its_session(
    client: tenure.Client, node: str
) -> None:
    cache = await client.cache(node, prefix=PREFIX)
    changes = cache.changes()
    waiting = spawn(anext(changes))
    assert any("cache" in s.description for s in await client.list_sessions(node))
    await cache.aclose()
    with pytest.raises(StopAsyncIteration):
        await within(waiting)

    async def gone() -> bool:
        return not any("cache" in s.description for s in await client.list_sessions(node))

    await eventually(gone, "the cache's session closed")


async def test_the_watch_counts_against_max_watches_per_session(
    client: tenure.Client, node: str
) -> None:
    await client.alter_node(node, max_watches_per_session=2)
    session = await client.session(node)
    backend = prefix_watch(lowlevel.backend_session(session))
    first = await backend.watch_prefix("a/", data=True, owners=False, waiters=False)
    async with contextlib.aclosing(session.semaphore("x").watch(data=True)) as single:
        await within(anext(single))
        with pytest.raises(LimitExceededError, match="max_watches_per_session"):
            await backend.watch_prefix("b/", data=True, owners=False, waiters=False)
    await first.aclose()

    async def room() -> bool:  # (the cancel of a closed watch may be sent in the background)
        try:
            stream = await backend.watch_prefix("b/", data=True, owners=False, waiters=False)
        except LimitExceededError:
            return False
        await stream.aclose()
        return True

    await eventually(room, "a closed prefix watch's slot freed")


@pytest.mark.parametrize(
    ("args", "what"),
    [
        ({"prefix": "bad\nprefix"}, "prefix"),
        ({"prefix": 7}, "prefix"),
        ({"prefix": PREFIX, "max_size": 0}, "max_size"),
        ({"prefix": PREFIX, "max_size": 1.5}, "max_size"),
        ({"prefix": PREFIX, "owners": "yes"}, "owners"),
    ],
)
async def test_bad_arguments_are_refused_before_anything_is_sent(
    client: tenure.Client, node: str, args: dict[str, object], what: str
) -> None:
    with pytest.raises(InvalidArgumentError, match=what):
        client.cache(node, **args)  # type: ignore[arg-type]
