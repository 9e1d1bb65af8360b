"""The prefix cache's own logic against a scripted store (client/_cache.py).

The kit checks the cache on every backend; here what no real store can be made to do
on cue: a pushed state older than the listing (read back instead), a session lost
and the store unreachable for a while, a consumer that stopped reading, a state that
differs only in an owner's ``since``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, cast

import pytest

import tenure
from tenure._core.values import OwnerInfo, SemaphoreDescription, SemaphoreSummary
from tenure.backends import Capability
from tenure.backends._prefix import PrefixFeed, PrefixStream
from tenure.client._cache import Cache
from tenure.errors import (
    LimitExceededError,
    NotFoundError,
    SessionExpiredError,
    UnavailableError,
)
from tenure.testing.conformance.support import eventually, settle, within


def view(name: str, data: bytes, *, since: float | None = None) -> SemaphoreDescription:
    owners = () if since is None else (OwnerInfo(7, 1, b"o", 3, since=since),)
    return SemaphoreDescription(name, 2, len(owners), data, False, owners)


class Store:
    """A backend and its sessions in one: semaphores in a dict, prefix watches as feeds."""

    capabilities = frozenset({Capability.PREFIX_WATCH})

    def __init__(self) -> None:
        self.sems: dict[str, SemaphoreDescription] = {}
        self.feeds: list[PrefixFeed] = []
        self.described: list[str] = []
        self.before_describe: Callable[[str], None] | None = None
        self.opened = 0
        self.refusals = 0  # opens to refuse with UnavailableError

    # -- Backend ------------------------------------------------------------------------

    async def list_semaphores(
        self, node: str, *, prefix: str, after: str, limit: int
    ) -> list[SemaphoreSummary]:
        names = sorted(n for n in self.sems if n.startswith(prefix) and n > after)[:limit]
        return [SemaphoreSummary(n, 2, 0, 0, 0, False) for n in names]

    # -- BackendSession -----------------------------------------------------------------

    async def describe_semaphore(
        self, name: str, *, owners: bool, waiters: bool
    ) -> SemaphoreDescription:
        self.described.append(name)
        if self.before_describe is not None:
            self.before_describe(name)
        if name not in self.sems:
            raise NotFoundError(name)
        return self.sems[name]

    async def watch_prefix(
        self, prefix: str, *, data: bool, owners: bool, waiters: bool
    ) -> PrefixStream:
        feed = PrefixFeed()
        self.feeds.append(feed)

        async def disarm() -> None:
            pass

        return PrefixStream(feed, disarm=disarm)

    # -- the session the cache opens ------------------------------------------------------

    async def open(self) -> Any:
        if self.refusals:
            self.refusals -= 1
            raise UnavailableError("the store is unreachable")
        self.opened += 1
        return _Session(self, self.opened)


class _Session:
    def __init__(self, store: Store, sid: int) -> None:
        self.store, self.id = store, sid

    def _backend_session(self) -> Store:
        return self.store

    async def close(self) -> None:
        pass


async def opened(store: Store, *, max_size: int = 100) -> Cache:
    open_session = cast(Callable[[], Awaitable[tenure.Session]], store.open)
    cache = Cache(cast(Any, store), open_session, "n", "c/", max_size=max_size, owners=True)
    await within(cache._start())
    return cache


async def test_a_pushed_state_older_than_the_listing_is_read_back() -> None:
    store = Store()
    store.sems["c/a"] = view("c/a", b"new")

    def pushed_while_listing(name: str) -> None:
        if store.described == ["c/a"]:  # the listing's describe: a push came before it
            store.feeds[0].put("c/a", view("c/a", b"old"))

    store.before_describe = pushed_while_listing
    cache = await opened(store)
    try:
        await eventually(lambda: _true(store.described == ["c/a", "c/a"]), "the read back of c/a")
        await settle()
        assert cache.get("c/a") == view("c/a", b"new")  # not the older pushed state
        store.feeds[0].put("c/a", view("c/a", b"newer"))  # later pushes are applied
        changes = cache.changes()
        store.feeds[0].put("c/a", view("c/a", b"newest"))
        assert (await within(anext(changes))).view == view("c/a", b"newest")
        assert store.described == ["c/a", "c/a"]
    finally:
        await cache.aclose()


async def test_a_lost_session_is_replaced_after_the_store_comes_back() -> None:
    store = Store()
    store.sems["c/a"] = view("c/a", b"1")
    cache = await opened(store)
    try:
        changes = cache.changes()
        store.refusals = 2  # two tries of the next open fail
        store.sems["c/a"] = view("c/a", b"2")
        store.sems["c/b"] = view("c/b", b"b")
        store.feeds[0].fail(SessionExpiredError("expired"))
        told: dict[str, SemaphoreDescription | None] = {}
        while len(told) < 2:
            change = await within(anext(changes))
            told[change.name] = change.view
        assert told == {"c/a": view("c/a", b"2"), "c/b": view("c/b", b"b")}
        assert (store.opened, store.refusals, len(store.feeds)) == (2, 0, 2)
    finally:
        await cache.aclose()


async def test_an_unreachable_store_at_entry_is_said_at_once() -> None:
    store = Store()
    store.refusals = 1
    with pytest.raises(UnavailableError, match="unreachable"):
        await opened(store)


async def test_a_state_that_differs_only_in_an_owners_since_is_no_change() -> None:
    store = Store()
    store.sems["c/a"] = view("c/a", b"1", since=100.0)
    cache = await opened(store)
    try:
        changes = cache.changes()
        store.sems["c/a"] = view("c/a", b"1", since=100.000002)  # another reply's stamp
        store.sems["c/b"] = view("c/b", b"b")
        store.feeds[0].reset()  # listed again: c/a the same, c/b new
        change = await within(anext(changes))
        assert change.name == "c/b"  # c/a was not told
        shown = cache.get("c/a")
        assert shown is not None
        assert shown.data == b"1"
    finally:
        await cache.aclose()


async def test_a_consumer_far_behind_ends_and_the_others_go_on() -> None:
    store = Store()
    cache = await opened(store, max_size=2)
    try:
        slow, quick = cache.changes(), cache.changes()
        for i in range(5):  # more than twice max_size names, and a deletion each
            store.feeds[0].put(f"c/{i}", view(f"c/{i}", b"x"))
            assert (await within(anext(quick))).name == f"c/{i}"
            store.feeds[0].put(f"c/{i}", SemaphoreDescription.missing(f"c/{i}"))
            assert (await within(anext(quick))).view is None
        with pytest.raises(LimitExceededError, match="fell more than 4 names behind"):
            await within(anext(slow))
        assert cache.items() == []
    finally:
        await cache.aclose()


def _true(value: bool) -> Awaitable[bool]:
    async def answer() -> bool:
        return value

    return answer()
