"""The prefix watch's feed and stream (backends/_prefix.py): coalescing, resets, the end."""

from __future__ import annotations

import asyncio

import pytest

from tenure._core.values import SemaphoreDescription
from tenure.backends import PrefixChange, PrefixReset
from tenure.backends._prefix import PrefixFeed, PrefixStream
from tenure.errors import SessionExpiredError


def state(name: str, data: bytes) -> SemaphoreDescription:
    return SemaphoreDescription(name, 1, 0, data, False)


async def take_now(stream: PrefixStream) -> object:
    return await asyncio.wait_for(anext(stream), 1.0)


def stream_of(feed: PrefixFeed, **kwargs: object) -> PrefixStream:
    async def nothing() -> None:
        pass

    return PrefixStream(feed, disarm=kwargs.pop("disarm", nothing), **kwargs)  # type: ignore[arg-type]


async def test_news_coalesces_per_name_in_the_order_names_first_changed() -> None:
    feed = PrefixFeed()
    stream = stream_of(feed)
    feed.put("a", state("a", b"1"))
    feed.put("b", state("b", b"1"))
    feed.put("a", state("a", b"2"))  # replaces a's, keeps its place
    assert feed.pending() == {"a", "b"}
    assert await take_now(stream) == PrefixChange("a", state("a", b"2"))
    assert await take_now(stream) == PrefixChange("b", state("b", b"1"))
    assert feed.pending() == frozenset()


async def test_a_read_back_pending_is_not_replaced_by_a_pushed_state() -> None:
    feed = PrefixFeed()
    feed.put("a")  # read it back: that reads this state or a later one
    feed.put("a", state("a", b"2"))
    assert await take_now(stream_of(feed)) == PrefixChange("a", None)


async def test_a_reset_replaces_what_was_pending_and_comes_first() -> None:
    feed = PrefixFeed()
    stream = stream_of(feed)
    feed.put("a", state("a", b"1"))
    feed.reset()
    feed.put("b")
    assert await take_now(stream) == PrefixReset()
    assert await take_now(stream) == PrefixChange("b")


async def test_too_many_names_pending_become_a_reset() -> None:
    feed = PrefixFeed(limit=3)
    for name in "abcd":
        feed.put(name)
    assert feed.pending() == frozenset()
    assert await take_now(stream_of(feed)) == PrefixReset()


async def test_a_reset_that_needs_it_re_arms_before_it_is_yielded() -> None:
    feed = PrefixFeed()
    armed: list[str] = []

    async def rearm() -> None:
        armed.append("again")

    stream = stream_of(feed, rearm=rearm)
    feed.reset()  # (a reset the store's watch survived: no re-arming)
    assert await take_now(stream) == PrefixReset()
    assert armed == []
    feed.reset(rearm=True)
    assert await take_now(stream) == PrefixReset()
    assert armed == ["again"]


async def test_closed_while_re_arming_it_disarms_what_was_armed() -> None:
    feed = PrefixFeed()
    disarmed: list[int] = []
    arming = asyncio.Event()
    go_on = asyncio.Event()

    async def rearm() -> None:
        arming.set()
        await go_on.wait()

    async def disarm() -> None:
        disarmed.append(1)

    stream = stream_of(feed, rearm=rearm, disarm=disarm)
    feed.reset(rearm=True)
    taking = asyncio.ensure_future(anext(stream))
    await arming.wait()
    await stream.aclose()
    go_on.set()
    with pytest.raises(StopAsyncIteration):
        await taking
    assert disarmed == [1, 1]  # by aclose, and again for the watch armed meanwhile


async def test_the_sessions_loss_ends_it_and_a_close_stops_a_waiting_consumer() -> None:
    feed = PrefixFeed()
    stream = stream_of(feed)
    waiting = asyncio.ensure_future(anext(stream))
    await asyncio.sleep(0)
    feed.fail(SessionExpiredError("gone"))
    with pytest.raises(SessionExpiredError, match="gone"):
        await waiting
    other = PrefixFeed()
    stream = stream_of(other)
    waiting = asyncio.ensure_future(anext(stream))
    await asyncio.sleep(0)
    await stream.aclose()
    with pytest.raises(StopAsyncIteration):
        await waiting
    other.put("late")  # nothing after the close counts
    assert other.pending() == frozenset()
