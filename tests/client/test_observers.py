"""Observers (client/_observers.py): what a client tells of its acquires and holds.

On ``memory://`` with a FakeClock: each acquire told once before it is sent and once
at its end (granted with its leases, or failed with its error), lock_all as one
acquire, a hold's end through ``lease.lost``; owner data offered only where the caller
gave none; an observer's error kept from the acquire; the process's observers told
first, for clients made before too; the sync face's calls in the caller's context.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import AsyncIterator, Callable, Iterator
from functools import partial
from typing import Any

import pytest

import tenure
import tenure.sync
from tenure import MAX_COUNT, Attempt, Lease
from tenure.errors import InvalidArgumentError, LostError, SessionExpiredError
from tenure.testing import FakeClock, disconnect
from tenure.testing.conformance.support import eventually


class Told:
    """An observer that writes down what it is told, in order."""

    def __init__(self, offer: bytes = b"") -> None:
        self.offer = offer
        self.events: list[tuple[Any, ...]] = []
        self.order: list[str] | None = None  # (shared by observers: who was told first)
        self.label = ""
        self.attempts: list[Attempt] = []
        self.offered: list[bool | None] = []  # what each offer_data answered

    def acquire_started(self, attempt: Attempt) -> Told.Watch:
        self.attempts.append(attempt)
        if self.order is not None:
            self.order.append(self.label)
        offered = attempt.offer_data(self.offer) if self.offer else None
        self.offered.append(offered)
        self.events.append(("started", attempt.names, offered))
        return Told.Watch(self, attempt)

    class Watch:
        def __init__(self, told: Told, attempt: Attempt) -> None:
            self.told, self.attempt = told, attempt

        def granted(self, leases: tuple[Lease, ...]) -> None:
            self.told.events.append(("granted", tuple((x.name, x.token) for x in leases)))
            for lease in leases:
                lease.lost.add_callback(partial(self.ended, lease.name, lease.token))

        def ended(self, name: str, token: int, reason: LostError | None) -> None:
            self.told.events.append(("ended", name, token, reason))

        def failed(self, error: BaseException) -> None:
            self.told.events.append(("failed", self.attempt.names, type(error)))


def last(told: Told) -> tuple[Any, ...]:
    """What ``told`` heard last."""
    return told.events[-1]


async def until(condition: Callable[[], bool], what: str) -> None:
    """Wait (bounded) until ``condition()`` holds."""

    async def check() -> bool:
        return condition()

    await eventually(check, what)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def told() -> Told:
    return Told()


@pytest.fixture
async def client(clock: FakeClock, told: Told) -> AsyncIterator[tenure.Client]:
    async with tenure.connect("memory://observers", clock=clock, observers=[told]) as client:
        await client.create_node("app")
        yield client


@pytest.fixture
def process_observer() -> Iterator[Told]:
    observer = Told()
    tenure.add_observer(observer)
    yield observer
    tenure.remove_observer(observer)


async def test_an_acquire_is_told_before_it_is_sent_and_its_hold_when_it_ends(
    client: tenure.Client, told: Told
) -> None:
    assert client.observers == (told,)
    async with client.session("app") as session:
        async with session.mutex("job").lock(timeout=5) as lock:
            assert told.events == [("started", ("job",), None), ("granted", (("job", 1),))]
        attempt = told.attempts[0]
        assert (attempt.node, attempt.session_id, attempt.names) == ("app", session.id, ("job",))
        assert (attempt.count, attempt.timeout, attempt.kind) == (MAX_COUNT, 5, tenure.Lock)
        assert attempt.data == b""
        assert last(told) == ("ended", "job", lock.token, None)
        # A semaphore's acquire: its count and kind.
        await session.semaphore("pool").create(3)
        lease = await session.acquire("pool", 2)
        assert told.attempts[-1].count == 2
        assert told.attempts[-1].kind is Lease
        assert last(told) == ("granted", (("pool", lease.token),))


async def test_failures_are_told_with_their_error(
    client: tenure.Client, told: Told, clock: FakeClock
) -> None:
    async with client.session("app") as first, client.session("app") as second:
        await first.mutex("job").lock()
        assert await second.mutex("job").try_lock() is None
        assert last(told) == ("failed", ("job",), TimeoutError)
        waiting = asyncio.create_task(second.mutex("job").lock(timeout=10))
        await until(lambda: len(told.events) == 5, "the waiting acquire told")
        await clock.advance(11)
        with pytest.raises(TimeoutError):
            await waiting
        assert last(told) == ("failed", ("job",), TimeoutError)
        cancelled = asyncio.create_task(second.mutex("job").lock())
        await until(lambda: len(told.events) == 7, "the acquire to cancel told")
        cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        assert last(told) == ("failed", ("job",), asyncio.CancelledError)
        # Refused before anything is sent (the task asks again): not an acquire.
        with pytest.raises(tenure.errors.PreconditionFailedError):
            await first.mutex("job").lock()
        assert len(told.events) == 8


async def test_a_lost_hold_ends_with_its_error(
    client: tenure.Client, told: Told, clock: FakeClock
) -> None:
    session = await client.session("app", recovery_window=5)
    lock = await session.mutex("job").lock()
    disconnect(session)
    await clock.advance(6)
    await until(lambda: told.events[-1][0] == "ended", "the loss told")
    ended = told.events[-1]
    assert ended[:3] == ("ended", "job", lock.token)
    assert isinstance(ended[3], SessionExpiredError)
    assert isinstance(ended[3], LostError)


async def test_lock_all_is_one_acquire_granted_its_locks_in_order(
    client: tenure.Client, told: Told
) -> None:
    async with client.session("app") as session:
        async with session.lock_all(["b", "a", "c"]) as held:
            assert told.events[0] == ("started", ("b", "a", "c"), None)
            assert told.events[1] == (
                "granted",
                (("b", held.tokens["b"]), ("a", held.tokens["a"]), ("c", held.tokens["c"])),
            )
            assert told.attempts[0].kind is tenure.Lock
        assert sorted(event[1] for event in told.events[2:]) == ["a", "b", "c"]


async def test_a_reentrant_mutex_is_one_acquire_however_deep(
    client: tenure.Client, told: Told
) -> None:
    async with client.session("app") as session:
        mutex = session.mutex("job", reentrant=True)
        async with mutex, mutex, mutex:
            pass
    assert [event[0] for event in told.events] == ["started", "granted", "ended"]


async def test_offered_data_goes_only_where_the_caller_gave_none(clock: FakeClock) -> None:
    first, second = Told(offer=b"trace-1"), Told(offer=b"trace-2")
    async with tenure.connect("memory://", clock=clock, observers=[first, second]) as client:
        await client.create_node("app")
        async with client.session("app") as session:
            lock = await session.mutex("job").lock()
            # The first observer's offer is sent; the second's comes too late.
            assert (first.offered, second.offered) == ([True], [False])
            assert lock.data == b"trace-1"
            described = await session.mutex("job").describe()
            assert described.owner is not None
            assert described.owner.data == b"trace-1"
            await lock.release()
            # The caller's data, and a recipe's (a group member's record), are kept.
            lock = await session.mutex("job").lock(data=b"mine")
            assert lock.data == b"mine"
            assert first.offered[-1] is False
            await session.group("workers").join("w1", data=b"w")
            record = first.attempts[-1].data
            assert record.startswith(b"member ")
            assert first.offered[-1] is False
    with pytest.raises(InvalidArgumentError, match="offered data"):
        Attempt("app", 1, ("x",), 1, None, Lease, b"").offer_data("text")  # type: ignore[arg-type]


async def test_an_observer_that_raises_changes_nothing_for_the_acquire(
    clock: FakeClock, told: Told
) -> None:
    class Broken:
        def acquire_started(self, attempt: Attempt) -> Broken:
            if attempt.names == ("first",):
                raise RuntimeError("broken at the start")
            return self

        def granted(self, leases: tuple[Lease, ...]) -> None:
            raise RuntimeError("broken at the grant")

        def failed(self, error: BaseException) -> None:
            raise RuntimeError("broken at the failure")

    reported: list[str] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, context: reported.append(str(context["exception"])))
    try:
        observers: list[Any] = [Broken(), told]
        async with tenure.connect("memory://", clock=clock, observers=observers) as client:
            await client.create_node("app")
            async with client.session("app") as session, client.session("app") as other:
                await session.mutex("first").lock()
                await session.mutex("second").lock()
                assert await other.mutex("second").try_lock() is None
    finally:
        loop.set_exception_handler(None)
    assert reported == ["broken at the start", "broken at the grant", "broken at the failure"]
    assert [event[0] for event in told.events[:5]] == [
        "started",
        "granted",
        "started",
        "granted",
        "started",
    ]


async def test_the_process_observers_hear_every_client_first(
    client: tenure.Client, told: Told
) -> None:
    async with client.session("app") as session:
        observer = Told()
        tenure.add_observer(observer)
        tenure.add_observer(observer)  # (once is enough)
        try:
            order: list[str] = []
            observer.order, observer.label = order, "process"
            told.order, told.label = order, "client"
            # A session opened before the observer was added tells it too.
            await session.mutex("job").lock()
            assert order == ["process", "client"]
            assert [event[0] for event in observer.events] == ["started", "granted"]
        finally:
            assert tenure.remove_observer(observer) is True
        assert tenure.remove_observer(observer) is False
        await session.mutex("other").lock()
        assert len(observer.events) == 2


def test_what_is_not_an_observer_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="observers must be a list"):
        tenure.connect("memory://", observers="told")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="no acquire_started"):
        tenure.connect("memory://", observers=[object()])  # type: ignore[list-item]
    with pytest.raises(InvalidArgumentError, match="no acquire_started"):
        tenure.add_observer(object())  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="no acquire_started"):
        tenure.sync.connect("memory://", observers=[42])  # type: ignore[list-item]


#: What the caller set before a sync call, read by the observer on the portal thread.
REQUEST: contextvars.ContextVar[str] = contextvars.ContextVar("request", default="none")


def test_a_sync_call_runs_in_its_callers_context() -> None:
    seen: list[str] = []

    class Reader:
        def acquire_started(self, attempt: Attempt) -> None:
            seen.append(REQUEST.get())

    with tenure.sync.connect("memory://", observers=[Reader()]) as client:
        assert len(client.observers) == 1
        client.create_node("app")
        with client.session("app") as session:
            REQUEST.set("request-1")
            with session.mutex("job"):
                pass
            REQUEST.set("request-2")
            session.semaphore("pool").create(2)
            session.acquire("pool").release()
    assert seen == ["request-1", "request-2"]
    # What the call's task set stays in its copy: the calling thread's is unchanged.
    assert REQUEST.get() == "request-2"
