"""YDB's Python SDK, its sync coordination client, against a real ``tenure serve --ydb-port``.

Each test drives the SDK exactly as a user does (``CoordinationClient``, sessions,
semaphores); what the SDK does not show (who waits, who owns) is read back with
describes, from the same session or another client's. Racing holders are threads;
a critical section is checked with a shared counter, never with timing.
``test_sdk_aio.py`` runs the same through ``ydb.aio``; a cut connection is in
``test_sdk_reconnect.py``, ``tenure://``, restarts and session timeouts in
``test_sdk_state.py``.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import ydb
from ydb.coordination import CoordinationClient

from tests.server.wire import WAIT
from tests.ydb_face.conftest import DATABASE, unique
from tests.ydb_face.sdkkit import (
    BOUNDED,
    FULL_AFTER_GRACE,
    FULL_CONFIG,
    GRACE_ONLY,
    OTHER_CONFIG,
    Threads,
    owners_of,
    poll,
    waiting,
)


@pytest.fixture
def client(driver: ydb.Driver) -> CoordinationClient:
    """The SDK's sync coordination client on the module server."""
    return CoordinationClient(driver)


@pytest.fixture
def path(client: CoordinationClient) -> str:
    """A fresh node (YDB's defaults), by its YDB path."""
    made = f"{DATABASE}/{unique()}"
    client.create_node(made, settings=BOUNDED)
    return made


@pytest.fixture
def threads() -> Iterator[Threads]:
    """Threads joined at the end of the test (their failures raised)."""
    made = Threads()
    yield made
    made.join()


# -- nodes -------------------------------------------------------------------------------


def test_node_lifecycle_round_trips_the_config(client: CoordinationClient) -> None:
    path = f"{DATABASE}/{unique()}"
    client.create_node(path, FULL_CONFIG, settings=BOUNDED)
    assert client.describe_node(path, settings=BOUNDED) == FULL_CONFIG
    # An existing node: SUCCESS (as YDB's scheme answers), and its config is kept.
    client.create_node(path, OTHER_CONFIG, settings=BOUNDED)
    assert client.describe_node(path, settings=BOUNDED) == FULL_CONFIG
    client.alter_node(path, GRACE_ONLY, settings=BOUNDED)
    assert client.describe_node(path, settings=BOUNDED) == FULL_AFTER_GRACE
    client.delete_node(path, settings=BOUNDED)
    with pytest.raises(ydb.issues.SchemeError):
        client.describe_node(path, settings=BOUNDED)
    with pytest.raises(ydb.issues.SchemeError):
        client.delete_node(path, settings=BOUNDED)
    with pytest.raises(ydb.issues.SchemeError):
        client.alter_node(path, GRACE_ONLY, settings=BOUNDED)


def test_describe_of_a_missing_node_is_a_scheme_error(client: CoordinationClient) -> None:
    with pytest.raises(ydb.issues.SchemeError, match="does not exist"):
        client.describe_node(f"{DATABASE}/{unique('never')}", settings=BOUNDED)


# -- semaphores --------------------------------------------------------------------------


def test_describe_of_a_missing_semaphore_is_not_found(
    client: CoordinationClient, path: str
) -> None:
    with client.session(path) as session:
        described = session.semaphore("never-created").describe(timeout=WAIT)
        # The SDK does not raise: its result carries YDB's status.
        assert described.status == ydb.StatusCode.NOT_FOUND
        assert (described.name, described.limit, described.owners) == ("", 0, [])
        # An update is an error the SDK raises (its status is NOT_FOUND).
        with pytest.raises(ydb.issues.Error, match=str(ydb.StatusCode.NOT_FOUND.value)):
            session.semaphore("never-created").update(b"data", timeout=WAIT)
        # The session goes on: neither call created the semaphore.
        assert session.semaphore("never-created").describe(timeout=WAIT).status == (
            ydb.StatusCode.NOT_FOUND
        )


def test_semaphore_data_update_and_describe(client: CoordinationClient, path: str) -> None:
    with client.session(path) as mine, client.session(path) as theirs:
        semaphore = mine.semaphore("config", 4)
        with semaphore:
            semaphore.update(b"v1", timeout=WAIT)
            described = semaphore.describe(timeout=WAIT)
            assert described.status == ydb.StatusCode.SUCCESS
            assert (described.name, described.limit, described.count) == ("config", 4, 1)
            assert (described.data, described.ephemeral, described.waiters) == (b"v1", False, [])
            semaphore.update(b"v2", timeout=WAIT)
            # Another session sees the same data and the same owner.
            seen = theirs.semaphore("config", 4).describe(timeout=WAIT)
            assert (seen.data, owners_of(seen)) == (b"v2", owners_of(described))
        # Released: the data stays with the semaphore.
        seen = theirs.semaphore("config", 4).describe(timeout=WAIT)
        assert (seen.data, seen.count, seen.owners) == (b"v2", 0, [])


def test_multi_count_semaphore_queues_what_does_not_fit(
    client: CoordinationClient, path: str, threads: Threads
) -> None:
    with (
        client.session(path) as one,
        client.session(path) as two,
        client.session(path) as three,
    ):
        single, double = one.semaphore("pool", 3), two.semaphore("pool", 3)
        single.acquire(1, timeout=WAIT)
        double.acquire(2, timeout=WAIT)
        full = single.describe(timeout=WAIT)
        assert (full.limit, full.count, [c for _, c in owners_of(full)]) == (3, 3, [1, 2])
        with pytest.raises(ydb.issues.Error, match="acquire"):  # more than the limit
            three.semaphore("pool", 3).acquire(4, timeout=WAIT)
        third = three.semaphore("pool", 3)
        granted = threading.Event()

        def take() -> None:
            third.acquire(1, timeout=2 * WAIT)
            granted.set()

        threads.start(take)
        queued = poll(lambda: single.describe(timeout=WAIT).waiters or None, "the third waits")
        assert [w.count for w in queued] == [1]
        assert not granted.is_set()  # it waits, as the describe says
        single.release(timeout=WAIT)
        assert granted.wait(WAIT), "the third was not granted after a release"
        after = double.describe(timeout=WAIT)
        assert (after.count, sorted(c for _, c in owners_of(after)), after.waiters) == (
            3,
            [1, 2],
            [],
        )
        third.release(timeout=WAIT)
        double.release(timeout=WAIT)
        assert double.describe(timeout=WAIT).count == 0


def test_a_later_smaller_waiter_does_not_pass_an_earlier_one(
    client: CoordinationClient, path: str, threads: Threads
) -> None:
    with (
        client.session(path) as one,
        client.session(path) as two,
        client.session(path) as three,
    ):
        holder = one.semaphore("fifo-pool", 3)
        holder.acquire(2, timeout=WAIT)
        big, small = two.semaphore("fifo-pool", 3), three.semaphore("fifo-pool", 3)
        small_granted = threading.Event()

        def take_small() -> None:
            small.acquire(1, timeout=2 * WAIT)
            small_granted.set()

        threads.start(lambda: big.acquire(2, timeout=2 * WAIT))
        poll(lambda: waiting(holder, 1), "the big request waits")
        # One token is free, but YDB's queue is strict FIFO: the small one waits too.
        threads.start(take_small)
        poll(lambda: waiting(holder, 2), "the small request waits behind it")
        assert [w.count for w in holder.describe(timeout=WAIT).waiters] == [2, 1]
        assert not small_granted.is_set()
        holder.release(timeout=WAIT)
        threads.join()
        after = holder.describe(timeout=WAIT)
        assert (after.count, sorted(c for _, c in owners_of(after))) == (3, [1, 2])


# -- racing holders ----------------------------------------------------------------------


def test_two_sessions_racing_hold_the_lock_one_at_a_time(
    client: CoordinationClient, path: str, threads: Threads
) -> None:
    rounds = 6
    guard = threading.Lock()
    inside = [0]  # holders inside the critical section now
    most = [0]
    turns: list[str] = []

    def holder(who: str) -> None:
        with client.session(path) as session:
            lock = session.semaphore("lock")
            for _ in range(rounds):
                lock.acquire(timeout=2 * WAIT)
                with guard:
                    inside[0] += 1
                    most[0] = max(most[0], inside[0])
                    turns.append(who)
                described = lock.describe(timeout=WAIT)
                assert (described.count, len(described.owners)) == (1, 1)
                with guard:
                    inside[0] -= 1  # before the release: the next grant follows it
                lock.release(timeout=WAIT)

    threads.start(lambda: holder("a"))
    threads.start(lambda: holder("b"))
    threads.join()
    assert most[0] == 1
    assert sorted(turns) == ["a"] * rounds + ["b"] * rounds


def test_waiters_are_granted_in_arrival_order(
    client: CoordinationClient, path: str, threads: Threads
) -> None:
    order: list[str] = []
    with client.session(path) as first:
        lock = first.semaphore("fifo")
        lock.acquire(timeout=WAIT)

        def waiter(who: str) -> None:
            with client.session(path) as session:
                mine = session.semaphore("fifo")
                mine.acquire(timeout=2 * WAIT)
                order.append(who)  # before the release: the next grant follows it
                mine.release(timeout=WAIT)

        for who, queued in (("b", 1), ("c", 2)):
            threads.start(functools.partial(waiter, who))
            poll(functools.partial(waiting, lock, queued), f"{who} waits")
        assert order == []
        lock.release(timeout=WAIT)
        threads.join()
    assert order == ["b", "c"]


def test_one_lock_from_two_handles_of_one_session(client: CoordinationClient, path: str) -> None:
    with client.session(path) as session, client.session(path) as other:
        first, second = session.semaphore("twice"), session.semaphore("twice")
        first.acquire(timeout=WAIT)
        held = owners_of(first.describe(timeout=WAIT))
        # YDB's rule: the second acquire restates the session's hold (no second owner,
        # no second token, no waiting).
        second.acquire(timeout=WAIT)
        assert owners_of(second.describe(timeout=WAIT)) == held
        assert [count for _, count in held] == [1]
        # A release from either handle releases the session's one hold.
        second.release(timeout=WAIT)
        assert first.describe(timeout=WAIT).owners == []
        # So another session takes it at once.
        theirs = other.semaphore("twice")
        theirs.acquire(timeout=WAIT)
        taken = owners_of(theirs.describe(timeout=WAIT))
        assert len(taken) == 1
        assert taken != held
        first.release(timeout=WAIT)  # not the holder: changes nothing
        assert owners_of(theirs.describe(timeout=WAIT)) == taken
        theirs.release(timeout=WAIT)


def test_a_second_handle_supersedes_the_first_while_it_waits(
    client: CoordinationClient, path: str, threads: Threads
) -> None:
    outcomes: dict[str, str] = {}

    def take(semaphore: Any, which: str) -> None:
        try:
            semaphore.acquire(timeout=2 * WAIT)
            outcomes[which] = "acquired"
        except ydb.issues.Error as error:
            outcomes[which] = str(error)

    with client.session(path) as holder, client.session(path) as session:
        lock = holder.semaphore("queued-twice")
        lock.acquire(timeout=WAIT)
        threads.start(functools.partial(take, session.semaphore("queued-twice"), "first"))
        poll(functools.partial(waiting, lock, 1), "the first handle waits")
        threads.start(functools.partial(take, session.semaphore("queued-twice"), "second"))
        # YDB's rule: the session asks again, so its earlier request is answered
        # ABORTED ("superseded"), which the SDK raises; the session still waits once.
        poll(lambda: outcomes.get("first"), "the first handle's answer")
        assert str(ydb.StatusCode.ABORTED.value) in outcomes["first"]
        assert len(lock.describe(timeout=WAIT).waiters) == 1
        lock.release(timeout=WAIT)
        threads.join()
        assert outcomes["second"] == "acquired"
        assert [count for _, count in owners_of(lock.describe(timeout=WAIT))] == [1]
        session.semaphore("queued-twice").release(timeout=WAIT)
        assert lock.describe(timeout=WAIT).owners == []
