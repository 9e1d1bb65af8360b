"""limits' storage against a real ``tenure serve``: limits' own strategies and checks,
many processes' hits counted once, records that the store deletes when over, a lost
session, a forked child.

One server for the module (each test keeps to a node of its own). The windows are
timed by a clock of the test's (``clock=``), moved past a window's end instead of
sleeping; the deletion of records over is waited for on the real clock (bounded).
"""

from __future__ import annotations

import asyncio
import faulthandler
import multiprocessing
import queue
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme
from limits import RateLimitItemPerHour, RateLimitItemPerMinute, RateLimitItemPerSecond
from limits.aio import strategies as aio_strategies
from limits.errors import StorageError
from limits.storage import storage_from_string
from limits.strategies import (
    FixedWindowRateLimiter,
    MovingWindowRateLimiter,
    RateLimiter,
    SlidingWindowCounterRateLimiter,
)

import tenure.sync
from tenure.contrib.limits import AsyncTenureStorage, TenureStorage
from tenure.errors import LimitExceededError, PreconditionFailedError, UnavailableError
from tests.server.wire import ServerProcess

STRATEGIES: list[type[RateLimiter]] = [
    FixedWindowRateLimiter,
    MovingWindowRateLimiter,
    SlidingWindowCounterRateLimiter,
]
#: Bound of every wait on the real clock, in seconds.
PATIENCE = 15.0


class Clock:
    """A wall clock the test moves (UNIX seconds)."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with ServerProcess(tmp_path_factory.mktemp("limits") / "data", "--fsync", "off") as server:
        yield server


@pytest.fixture
def url(server: ServerProcess) -> str:
    """The storage URL, on a node of this test's."""
    return f"tenure://127.0.0.1:{server.port}?node=t-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def storages(url: str) -> Iterator[list[TenureStorage]]:
    """Storages the test makes (``make(...)``), closed at its end."""
    made: list[TenureStorage] = []
    yield made
    for storage in made:
        storage.close()


def make(made: list[TenureStorage], url: str, **options: object) -> TenureStorage:
    storage = TenureStorage(url, **options)  # type: ignore[arg-type]
    made.append(storage)
    return storage


def semaphores(url: str) -> list[tenure.SemaphoreSummary]:
    node = url.rpartition("node=")[2]
    with tenure.sync.connect(url.partition("?")[0]) as client:
        return client.list_semaphores(node)


# -- limits' own strategies and checks ------------------------------------------------


@pytest.mark.parametrize("strategy", STRATEGIES, ids=lambda s: s.__name__)
def test_each_strategy_allows_its_limit_and_again_once_the_window_is_over(
    url: str, storages: list[TenureStorage], strategy: type[RateLimiter]
) -> None:
    clock = Clock()
    limiter = strategy(make(storages, url, clock=clock))
    limit = RateLimitItemPerMinute(3)
    assert limiter.get_window_stats(limit, "k").remaining == 3
    assert [limiter.hit(limit, "k") for _ in range(4)] == [True, True, True, False]
    assert not limiter.test(limit, "k")
    assert limiter.get_window_stats(limit, "k").remaining == 0
    assert limiter.hit(limit, "other")  # another key, another count
    # A sliding window counter still weighs the last window for a second one.
    clock.now += 121 if strategy is SlidingWindowCounterRateLimiter else 61
    assert limiter.test(limit, "k")
    assert limiter.get_window_stats(limit, "k").remaining == 3
    assert [limiter.hit(limit, "k") for _ in range(4)] == [True, True, True, False]
    limiter.clear(limit, "k")
    assert limiter.get_window_stats(limit, "k").remaining == 3
    assert limiter.hit(limit, "k", cost=3)
    assert not limiter.hit(limit, "k", cost=1)


def test_limits_storage_checks(url: str, storages: list[TenureStorage]) -> None:
    # limits' tests/test_storage.py, TestConcreteStorages, without its sleeps.
    clock = Clock()
    storage = make(storages, url, clock=clock)
    assert storage.check()
    limit = RateLimitItemPerMinute(10)
    assert storage.incr(limit.key_for(), limit.get_expiry(), amount=1) == 1
    assert storage.incr(limit.key_for(), limit.get_expiry(), amount=10) == 11
    assert storage.get_expiry(limit.key_for()) == pytest.approx(clock.now + 60)
    storage.clear(limit.key_for())
    assert storage.get(limit.key_for()) == 0
    assert not storage.acquire_entry("m", 10, 60, amount=11)
    assert storage.acquire_entry("m", 10, 60, amount=1)
    assert not storage.acquire_entry("m", 10, 60, amount=10)
    second = RateLimitItemPerSecond(1)
    storage.incr(second.key_for(), second.get_expiry())
    clock.now += 1.1
    assert storage.get(second.key_for()) == 0
    assert storage.acquire_sliding_window_entry("s", 1, 1)
    assert storage.get_sliding_window("s", 1)[-1] == pytest.approx(2)
    # reset clears every record of the storage (limits' test_storage_reset: 20).
    storage.reset()
    limit2 = RateLimitItemPerMinute(10, namespace="OTHER")
    for i in range(10):
        storage.incr(limit.key_for(str(i)), limit.get_expiry())
        storage.incr(limit2.key_for(str(i)), limit2.get_expiry())
    assert storage.reset() == 20
    assert storage.get(limit.key_for("3")) == 0


async def test_the_async_storage_runs_limits_async_strategies(url: str) -> None:
    clock = Clock()
    storage = storage_from_string("async+" + url, clock=clock)  # type: ignore[arg-type]
    assert isinstance(storage, AsyncTenureStorage)
    try:
        assert await storage.check()
        limit = RateLimitItemPerHour(2)
        for strategy in (
            aio_strategies.FixedWindowRateLimiter,
            aio_strategies.MovingWindowRateLimiter,
            aio_strategies.SlidingWindowCounterRateLimiter,
        ):
            limiter = strategy(storage)
            key = strategy.__name__
            assert [await limiter.hit(limit, key) for _ in range(3)] == [True, True, False]
            assert (await limiter.get_window_stats(limit, key)).remaining == 0
            await limiter.clear(limit, key)
            assert await limiter.test(limit, key)
            assert await limiter.hit(limit, key)
        assert await storage.reset() == 3
    finally:
        await storage.close()


# -- shared, counted once -------------------------------------------------------------


@pytest.mark.parametrize("strategy", STRATEGIES, ids=lambda s: s.__name__)
def test_hits_from_many_threads_of_two_processes_are_each_counted_once(
    url: str, storages: list[TenureStorage], strategy: type[RateLimiter]
) -> None:
    # Two storages: two connections and sessions, as two processes have.
    limiters = [strategy(make(storages, url)) for _ in range(2)]
    limit = RateLimitItemPerHour(25)
    granted: list[bool] = []
    start = threading.Barrier(8)

    def hits(limiter: RateLimiter) -> None:
        start.wait(timeout=PATIENCE)
        for _ in range(5):
            granted.append(limiter.hit(limit, "shared"))

    threads = [threading.Thread(target=hits, args=(limiters[i % 2],)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=PATIENCE)
    assert len(granted) == 40
    assert granted.count(True) == 25
    assert limiters[0].get_window_stats(limit, "shared").remaining == 0


def test_a_record_is_deleted_by_the_store_once_its_window_is_over(
    url: str, storages: list[TenureStorage]
) -> None:
    limiter = MovingWindowRateLimiter(make(storages, url))  # on the real clock
    assert limiter.hit(RateLimitItemPerSecond(5), "brief")
    (found,) = semaphores(url)
    assert found.ephemeral
    assert found.owners == 1  # this storage's hold keeps it
    deadline = time.monotonic() + PATIENCE
    while semaphores(url):
        assert time.monotonic() < deadline, "the record outlived its window"
        time.sleep(0.05)


def test_a_record_lives_while_any_process_that_wrote_it_holds_it(
    url: str, storages: list[TenureStorage]
) -> None:
    first, second = (make(storages, url, clock=Clock()) for _ in range(2))
    limit = RateLimitItemPerMinute(10)
    key = limit.key_for("shared")
    assert first.incr(key, 60) == 1
    assert second.incr(key, 60) == 2
    (found,) = semaphores(url)
    assert found.owners == 2
    first.close()  # its session ends: the record stays, the other holds it
    assert second.get(key) == 2
    assert second.incr(key, 60) == 3
    second.close()  # the last holder gone: the store deletes it
    assert semaphores(url) == []
    assert make(storages, url).get(key) == 0


def test_a_storage_whose_session_is_killed_opens_another(
    url: str, storages: list[TenureStorage]
) -> None:
    clock = Clock()
    first, second = (make(storages, url, clock=clock) for _ in range(2))
    assert first.incr("k", 60) == 1
    assert second.incr("k", 60) == 2
    node = url.rpartition("node=")[2]
    with tenure.sync.connect(url.partition("?")[0]) as admin:
        found = [s for s in admin.list_sessions(node) if s.description == "limits storage"]
        assert len(found) == 2
        admin.kill_session(node, found[0].session_id)
    # Whichever was killed: both go on counting (the other one's hold kept the record).
    assert first.incr("k", 60) == 3
    assert second.incr("k", 60) == 4


#: Bound of the forked child's work, in seconds: past it the child writes every
#: thread's stack and exits, and the test fails with them. (Generous: on a busy machine
#: the child's connection, node, session and hold are a dozen round trips.)
CHILD_PATIENCE = 4 * PATIENCE


def _hit_in_child(
    storage: TenureStorage, key: str, answer: multiprocessing.Queue[int], stacks: Path
) -> None:
    with stacks.open("w") as file:
        faulthandler.dump_traceback_later(CHILD_PATIENCE, exit=True, file=file)
        answer.put(storage.incr(key, 60))
        storage.close()
        faulthandler.cancel_dump_traceback_later()


def test_a_forked_child_uses_a_connection_of_its_own(
    url: str, storages: list[TenureStorage], tmp_path: Path
) -> None:
    storage = make(storages, url)
    assert storage.incr("forked", 60) == 1  # connected before the fork
    context = multiprocessing.get_context("fork")
    answer: multiprocessing.Queue[int] = context.Queue()
    stacks = tmp_path / "child-stacks.txt"
    child = context.Process(target=_hit_in_child, args=(storage, "forked", answer, stacks))
    child.start()
    try:
        counted = answer.get(timeout=CHILD_PATIENCE + PATIENCE)
    except queue.Empty:
        child.join(timeout=PATIENCE)
        pytest.fail(f"the forked child did not answer; its threads then:\n{stacks.read_text()}")
    assert counted == 2
    child.join(timeout=PATIENCE)
    assert child.exitcode == 0
    assert storage.incr("forked", 60) == 3  # the parent's connection and session are intact


# -- limits and errors ----------------------------------------------------------------


def test_a_moving_window_too_large_for_the_nodes_data_says_which_limit(
    url: str, storages: list[TenureStorage]
) -> None:
    node = url.rpartition("node=")[2]
    with tenure.sync.connect(url.partition("?")[0]) as admin:
        admin.create_node(node, max_data_size=200)
    clock = Clock()
    storage = make(storages, url, clock=clock)
    granted = 0
    refused: LimitExceededError | None = None
    while refused is None and granted < 100:
        try:
            assert storage.acquire_entry("big", 100, 60)
            granted += 1
            clock.now += 0.01  # (hits of one millisecond would share an entry)
        except LimitExceededError as error:
            refused = error
    assert "max_data_size (200)" in str(refused)
    assert granted == 13  # "limits moving" and 14 bytes a hit: 13 + 13 * 14 <= 200
    assert storage.get_moving_window("big", 100, 60)[1] == granted  # the refused one did nothing


def test_data_that_is_no_record_is_refused_and_wrapped_when_asked(
    url: str, storages: list[TenureStorage]
) -> None:
    node = url.rpartition("node=")[2]
    with tenure.sync.connect(url.partition("?")[0]) as admin:
        admin.create_node(node)
        with admin.session(node) as session:
            session.semaphore("limits/taken").create(1, b"someone else's")
            session.semaphore("limits/held").create(1)
            # Refused, not waited for (it is full) nor held.
            with (
                session.semaphore("limits/held").acquire(),
                pytest.raises(PreconditionFailedError, match="persistent"),
            ):
                make(storages, url).acquire_entry("held", 5, 60)
    with pytest.raises(PreconditionFailedError, match="not a limits record"):
        make(storages, url).incr("taken", 60)
    assert all(s.owners == 0 for s in semaphores(url))
    with pytest.raises(StorageError) as caught:
        make(storages, url, wrap_exceptions=True).get("taken")
    assert isinstance(caught.value.storage_error, PreconditionFailedError)
    assert make(storages, url).reset() == 0  # (and reset leaves it alone)


def test_a_server_gone_is_unavailable_within_the_storages_timeout(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "data", "--fsync", "off") as server:
        url = f"tenure://127.0.0.1:{server.port}"
        storage = TenureStorage(url, timeout=0.5, wrap_exceptions=True)
        try:
            assert storage.check()
            assert storage.incr("k", 60) == 1
            server.kill()
            # Not the session's recovery window (30 s) that the client would wait for.
            with pytest.raises(StorageError) as caught:
                storage.incr("k", 60)
            assert isinstance(caught.value.storage_error, UnavailableError)
            assert "within 0.5 s" in str(caught.value.storage_error)
            assert not storage.check()
        finally:
            storage.close()


def test_tenures_connects_over_tls_with_the_urls_own_options(tmp_path: Path) -> None:
    ca = trustme.CA()
    ca_file, cert, key = tmp_path / "ca.pem", tmp_path / "server.pem", tmp_path / "server.key"
    ca.cert_pem.write_to_path(str(ca_file))
    leaf = ca.issue_cert("127.0.0.1")
    for blob in leaf.cert_chain_pems:
        blob.write_to_path(str(cert), append=True)
    leaf.private_key_pem.write_to_path(str(key))
    tls = ("--tls-cert", str(cert), "--tls-key", str(key))
    with ServerProcess(tmp_path / "data", "--fsync", "off", *tls) as server:
        storage = storage_from_string(f"tenures://127.0.0.1:{server.port}?ca={ca_file}&node=tls")
        assert isinstance(storage, TenureStorage)
        try:
            assert storage.node == "tls"
            limiter = FixedWindowRateLimiter(storage)
            assert [limiter.hit(RateLimitItemPerHour(1), "k") for _ in range(2)] == [True, False]
        finally:
            storage.close()


def test_an_async_storage_stays_on_its_first_loop(url: str) -> None:
    storage = AsyncTenureStorage(url)

    async def used() -> bool:
        try:
            return await storage.check()
        finally:
            await storage.close()

    assert asyncio.run(used())
    with pytest.raises(tenure.errors.InvalidArgumentError, match="one storage per loop"):
        asyncio.run(used())
