"""@tenure.sync.locked: a plain function run holding a mutex named from its call.

The twin of tests/client/test_locked.py (which covers the name templates in full):
threads share the process's default session, each a caller of its own; a loss
cannot cancel a blocking function: it sets the lock's ``lost`` event, and the call
raises the loss once the function has returned.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pytest

import tenure
import tenure.sync
from tenure.errors import InvalidArgumentError, PreconditionFailedError, SessionExpiredError
from tests.sync.conftest import wait_for_waiters

NODE = "locked"


@pytest.fixture(autouse=True)
def client(monkeypatch: pytest.MonkeyPatch) -> Iterator[tenure.sync.Client]:
    """The default backend: a memory:// name of this test's own, node NODE."""
    monkeypatch.delenv("TENURE_URL", raising=False)
    monkeypatch.delenv("TENURE_NODE", raising=False)
    tenure.configure(f"memory://sync-locked-{uuid.uuid4().hex}", node=NODE)
    client = tenure.sync.default_client()
    client.create_node(NODE)
    yield client
    tenure.sync.close_default_client()
    tenure.configure()


def test_threads_take_turns_in_the_one_default_session(client: tenure.sync.Client) -> None:
    release, holding = threading.Event(), threading.Event()
    results: dict[str, tuple[int, int]] = {}

    @tenure.sync.locked("report-{report_id}")
    def build(report_id: int, step: str) -> None:
        lock = tenure.sync.current_lock()
        results[step] = (lock.token, lock.session.id)
        if step == "first":
            holding.set()
            assert release.wait(30)

    first = threading.Thread(target=build, args=(1, "first"))
    first.start()
    # The first thread holds the lock and is in its body before the second asks (a
    # wait for no waiters passed at once: under load the second could be granted
    # first, or the first not yet in its body when the results were looked at).
    assert holding.wait(30)
    session = tenure.sync.default_session()
    queued = threading.Thread(target=build, args=(1, "queued"))
    queued.start()
    wait_for_waiters(session, "report-1", 1)  # the other thread queues, in the same session
    build(2, "other")  # another name runs meanwhile
    assert set(results) == {"first", "other"}
    release.set()
    first.join(30)
    queued.join(30)
    assert results["first"][0] < results["other"][0] < results["queued"][0]
    assert {session_id for _, session_id in results.values()} == {session.id}


def test_blocking_false_skips_and_timeout_raises(client: tenure.sync.Client) -> None:
    ran: list[str] = []

    @tenure.sync.locked("ledger-{book}", blocking=False)
    def skipping(book: str) -> str:
        ran.append(book)
        return book

    @tenure.sync.locked("ledger-{book}", timeout=0.05)
    def patient(book: str) -> None:
        ran.append("patient")

    with client.session(NODE) as other, other.mutex("ledger-a"):
        assert skipping("a") is None
        with pytest.raises(TimeoutError):
            patient("a")
        assert skipping("b") == "b"
    assert skipping("a") == "a"
    assert ran == ["b", "a"]


def test_a_loss_sets_lost_and_is_raised_once_the_function_returns(
    client: tenure.sync.Client,
) -> None:
    seen: list[bool] = []
    lost: list[int] = []

    @tenure.sync.locked("job")
    def job() -> str:
        lock = tenure.sync.current_lock()
        lost.append(lock.session.id)
        client.kill_session(NODE, lock.session.id)
        seen.append(lock.lost.wait(30))  # it cannot be cancelled: it sees the event
        with pytest.raises(SessionExpiredError):
            lock.check()
        return "finished"

    with pytest.raises(SessionExpiredError):
        job()
    assert seen == [True]

    @tenure.sync.locked("job")
    def again() -> int:
        return tenure.sync.current_lock().session.id

    renewed = again()  # a new default session: a loss does not fail every later call
    assert renewed != lost[0]
    assert renewed == tenure.sync.default_session().id


def test_faces_are_not_mixed_and_reentrant_nests_per_thread() -> None:
    async def coroutine_function() -> None: ...

    def generator() -> Iterator[int]:
        yield 1

    with pytest.raises(TypeError, match=r"decorate an async function with tenure.locked"):
        tenure.sync.locked("x")(coroutine_function)
    with pytest.raises(TypeError, match="generator"):
        tenure.sync.locked("x")(generator)
    with pytest.raises(InvalidArgumentError, match=r"client must be a tenure.sync.Client"):
        tenure.sync.locked("x", client="memory://")  # type: ignore[call-overload]
    with pytest.raises(InvalidArgumentError, match="names no parameter"):
        tenure.sync.locked("x-{y}")(lambda z: z)

    @tenure.sync.locked("sneaky")
    def sneaky() -> object:
        return coroutine_function()  # a coroutine returned: closed, refused

    with pytest.raises(TypeError, match="returned a coroutine"):
        sneaky()

    @tenure.sync.locked("tree-{node_id}", reentrant=True)
    def walk(node_id: str, depth: int) -> list[int]:
        token = tenure.sync.current_lock().token
        return [token] + (walk(node_id, depth - 1) if depth else [])

    tokens = walk("root", 2)
    assert len(tokens) == 3
    assert len(set(tokens)) == 1
    with pytest.raises(PreconditionFailedError, match=r"no @tenure.sync.locked function"):
        tenure.sync.current_lock()


def test_the_default_session_is_replaced_once_closed(client: tenure.sync.Client) -> None:
    first = tenure.sync.default_session()
    assert tenure.sync.default_session(NODE) is first
    assert first.description == "tenure default session"
    first.close()
    second = tenure.sync.default_session()
    assert second is not first
    assert not second.ended
    tenure.sync.close_default_client()
    assert second.ended
    # A new default client (a new memory:// engine: the last client of the name closed).
    tenure.sync.default_client().create_node(NODE)
    third = tenure.sync.default_session()
    assert third is not second
    assert not third.ended
