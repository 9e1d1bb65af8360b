"""A release sent at once (``EagerRelease``): the session core's side of it.

``StoreSession.release`` starts the release and returns its answer's future; a
store that can send at once (``tenure://``, ``memory://``) sends it before
``release`` returns. Pinned here against a scripted store: what is sent when, when
the hold's number is free again, what happens when the first send is not answered,
and that a failure nobody waits for is logged rather than lost. And a release sent
from the session's task by a store that sends it once a call (``SendsReleaseOnce``:
``postgres://``): nothing held on its one send is the grant's loss, on a second no
loss.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from tenure.backends._store import EagerRelease, SendsReleaseOnce
from tenure.errors import (
    LeaseLostError,
    NotFoundError,
    PermissionDeniedError,
    SessionExpiredError,
    UnavailableError,
)
from tests.backends.test_session_core import ScriptedStore, _held, _session, _soon


class EagerStore(ScriptedStore):
    """A scripted store that sends releases at once: each ``release_now`` records the
    send and returns a future the test settles (None while ``ready`` is False)."""

    def __init__(self) -> None:
        super().__init__()
        self.ready = True
        self.sent_now: list[tuple[str, int]] = []
        self.futures: list[asyncio.Future[bool]] = []

    def release_now(self, name: str, hold: int) -> asyncio.Future[bool] | None:
        if not self.ready:
            return None
        self.sent_now.append((name, hold))
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self.futures.append(future)
        return future


async def test_the_scripted_eager_store_is_an_eager_release() -> None:
    assert isinstance(EagerStore(), EagerRelease)
    assert not isinstance(ScriptedStore(), EagerRelease)


async def test_the_release_is_sent_before_release_returns() -> None:
    store = EagerStore()
    session = _session(store)
    grant = await _held(session, store)
    answer = session.release("m", grant)
    assert store.sent_now == [("m", 0)]  # in the caller's turn: nothing awaited yet
    assert ("m", 0) not in session.ledger.held
    assert session.ledger.free_hold("m") == 1  # still being released
    store.futures[0].set_result(True)
    assert await answer is True
    assert session.ledger.free_hold("m") == 0
    assert store.ops("release") == []  # nothing sent the slow way


async def test_nobody_need_wait_for_the_answer() -> None:
    store = EagerStore()
    session = _session(store)
    grant = await _held(session, store)
    session.release("m", grant)  # dropped on the floor, as leaving ``async with`` does
    store.futures[0].set_result(True)
    await _soon(lambda: session.ledger.free_hold("m") == 0, "the release answered")


async def test_a_first_send_not_answered_is_sent_again_until_answered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("tenure.backends._session.RETRY_MIN", 0.001)
    store = EagerStore()
    session = _session(store)
    grant = await _held(session, store)
    store.answers["release"] = [UnavailableError("still down"), True]
    answer = session.release("m", grant)
    store.futures[0].set_exception(UnavailableError("lost with the connection"))
    assert await answer is True
    assert store.ops("release") == [("m", 0), ("m", 0)]
    assert session.ledger.free_hold("m") == 0


async def test_a_store_not_ready_sends_from_a_task() -> None:
    store = EagerStore()
    store.ready = False
    session = _session(store)
    grant = await _held(session, store)
    store.answers["release"] = [True]
    answer = session.release("m", grant)
    assert store.ops("release") == []  # not yet: the task has not run
    assert await answer is True
    assert store.ops("release") == [("m", 0)]


async def test_a_waiter_hears_the_sessions_end_while_the_release_is_tried() -> None:
    store = EagerStore()
    session = _session(store)
    grant = await _held(session, store)
    store.answers["release"] = [asyncio.Event()]  # the second try hangs
    answer = session.release("m", grant)
    store.futures[0].set_exception(UnavailableError("lost with the connection"))
    await _soon(lambda: bool(store.ops("release")), "the release sent again")
    session.lose(SessionExpiredError("expired"))
    with pytest.raises(SessionExpiredError):
        await answer


async def test_a_failure_nobody_waits_for_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    store = EagerStore()
    session = _session(store)
    grant = await _held(session, store)
    session.release("m", grant)
    with caplog.at_level(logging.WARNING, logger="tenure.client"):
        store.futures[0].set_exception(NotFoundError("no semaphore 'm'"))
        await _soon(lambda: session.ledger.free_hold("m") == 0, "the release ended")
    assert "release of ('m', 0) failed: no semaphore 'm'" in caplog.text


async def test_a_refusal_that_comes_after_the_sessions_end_is_its_loss_unlogged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # tenure://'s server refuses a release that reaches it after a kill (it has
    # forgotten the session), right behind the SessionEnded push: the end gave the
    # hold back, so the release had nothing left to do.
    store = EagerStore()
    session = _session(store)
    grant = await _held(session, store)
    answer = session.release("m", grant)
    session.lose(SessionExpiredError("killed"))
    with caplog.at_level(logging.WARNING, logger="tenure.client"):
        store.futures[0].set_exception(PermissionDeniedError("session 1 is not attached"))
        with pytest.raises(SessionExpiredError, match="killed"):
            await answer
    assert session.ledger.free_hold("m") == 0
    assert caplog.text == ""


class OnceStore(ScriptedStore):
    """A scripted store whose release is sent once a call (``SendsReleaseOnce``)."""

    release_sent_once = True


async def test_a_release_sent_once_from_the_task_that_finds_nothing_is_the_loss() -> None:
    # The store ended the grant first (adopted, its max_hold passed): the release,
    # answered on its one send, finds nothing held (docs/guarantees.md 6g).
    store = OnceStore()
    assert isinstance(store, SendsReleaseOnce)
    session = _session(store)
    grant = await _held(session, store)
    store.answers["release"] = [False]
    with pytest.raises(LeaseLostError, match="had ended before its release reached"):
        await session.release("m", grant)
    assert session.ledger.free_hold("m") == 0


async def test_a_release_sent_again_that_finds_nothing_is_no_loss(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Its first send may have been applied before its answer was lost.
    monkeypatch.setattr("tenure.backends._session.RETRY_MIN", 0.001)
    store = OnceStore()
    session = _session(store)
    grant = await _held(session, store)
    store.answers["release"] = [UnavailableError("lost after sending"), False]
    assert await session.release("m", grant) is False
    assert store.ops("release") == [("m", 0), ("m", 0)]


async def test_a_store_that_may_resend_within_a_call_says_no_loss() -> None:
    # (tenure://'s slow path, etcd://: a call sends again by itself after a lost answer)
    store = ScriptedStore()
    assert not isinstance(store, SendsReleaseOnce)
    session = _session(store)
    grant = await _held(session, store)
    store.answers["release"] = [False]
    assert await session.release("m", grant) is False


async def test_a_release_sent_at_once_then_from_the_task_that_finds_nothing_is_no_loss(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The send at once may have been applied before the connection was lost: the
    # task's first send is the release's second.
    monkeypatch.setattr("tenure.backends._session.RETRY_MIN", 0.001)

    class EagerOnceStore(EagerStore):
        release_sent_once = True

    store = EagerOnceStore()
    session = _session(store)
    grant = await _held(session, store)
    store.answers["release"] = [False]
    answer = session.release("m", grant)
    store.futures[0].set_exception(UnavailableError("lost with the connection"))
    assert await answer is False
