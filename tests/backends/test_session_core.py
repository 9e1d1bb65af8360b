"""The session core's policies, against a store adapter whose answers the test decides.

The conformance kit checks what every real backend does (``test_cancel.py`` races
real grants against cancellations); here each policy of ``backends/_session.py``
is pinned where a real store cannot be made to misbehave on cue: a withdrawal or a
release the store does not answer, a session that ends while a release is tried,
a deadline that passes, a heartbeat that fails.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from tenure._core.claims import ClaimRecord
from tenure._core.commands import RateReservation
from tenure._core.values import SemaphoreDescription
from tenure.backends._base import Grant, HeldGrant, PrefixWatchStream, WatchStream
from tenure.backends._ledger import Pending
from tenure.backends._session import StoreSession
from tenure.backends._store import QUEUED, BoundSession, Enqueued, InQueue, Withdrawal
from tenure.errors import (
    InvalidArgumentError,
    LeaseLostError,
    LostError,
    NotFoundError,
    SessionClosedError,
    SessionExpiredError,
    UnavailableError,
)
from tests.backends.listeners import Heard

WINDOW = 60.0


class ScriptedStore:
    """A store whose every answer the test sets: ``answers[op]`` is a list of what each
    call returns (an exception is raised; an asyncio.Event is waited for first, then
    the next item is taken). It is all four parts of the adapter: the session's
    Store, its Acquiring, Administering and Watching."""

    where = "the scripted store"

    def __init__(self, *, beat_period: float | None = None) -> None:
        self.beat_period = beat_period
        self.answers: dict[str, list[Any]] = {}
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.confirmed = asyncio.get_running_loop().time()
        self.stopped: LostError | None = None
        self.closed = 0
        self._requests = 0
        self.session: BoundSession

    def bind(self, session: BoundSession) -> None:
        self.session = session

    async def _answer(self, op: str, *args: Any) -> Any:
        self.calls.append((op, args))
        script = self.answers.get(op, [])
        while script and isinstance(script[0], asyncio.Event):
            await script.pop(0).wait()
        if not script:
            raise AssertionError(f"the test gave no answer for {op}{args}")
        answer = script.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def confirmed_at(self) -> float:
        return self.confirmed

    async def heartbeat(self) -> None:
        await self._answer("heartbeat")

    def new_request_id(self) -> int:
        self._requests += 1
        return self._requests

    async def enqueue(self, pending: Pending) -> Enqueued:
        result: Enqueued = await self._answer("enqueue", pending.name, pending.hold)
        return result

    async def enqueue_all(self, pendings: list[Pending]) -> list[Grant] | InQueue | None:
        places = tuple((p.name, p.hold) for p in pendings)
        result: list[Grant] | InQueue | None = await self._answer("enqueue_all", places)
        return result

    async def await_grant(self, pending: Pending) -> Grant | None:
        """As a store's wait does, it ends when the session does (its future fails)."""
        answering = asyncio.ensure_future(self._answer("await_grant", pending.name, pending.hold))
        try:
            await asyncio.wait({answering, pending.future}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not answering.done():
                answering.cancel()
        if pending.future.done():
            return pending.future.result()
        result: Grant | None = answering.result()
        return result

    async def withdraw(self, pending: Pending) -> Grant | Withdrawal:
        result: Grant | Withdrawal = await self._answer("withdraw", pending.name, pending.hold)
        return result

    async def release(self, name: str, hold: int) -> bool:
        return bool(await self._answer("release", name, hold))

    async def renew(self, name: str, grant: Grant) -> float:
        return float(await self._answer("renew", name))

    async def holds(self) -> list[HeldGrant]:
        return []

    def secret(self) -> bytes:
        return b"secret"

    async def create_semaphore(self, name: str, limit: int, data: bytes) -> None:
        await self._answer("create", name)

    async def update_semaphore(self, name: str, data: bytes) -> None:
        await self._answer("update", name)

    async def swap_semaphore_data(self, name: str, expected: bytes, data: bytes) -> bool:
        return bool(await self._answer("swap", name))

    async def reserve_units(
        self, name: str, count: float, max_wait: float | None
    ) -> RateReservation:
        granted = bool(await self._answer("reserve", name))
        return RateReservation(granted, 0.0, 0.0)

    async def claim(
        self, name: str, claim_id: str, at_least: float, at_most: float, data: bytes
    ) -> ClaimRecord:
        record: ClaimRecord = await self._answer("claim", name, claim_id)
        return record

    async def delete_semaphore(self, name: str, force: bool) -> None:
        await self._answer("delete", name)

    async def describe_semaphore(
        self, name: str, *, owners: bool, waiters: bool
    ) -> SemaphoreDescription:
        result: SemaphoreDescription = await self._answer("describe", name)
        return result

    async def watch_semaphore(
        self, name: str, *, data: bool, owners: bool, waiters: bool
    ) -> WatchStream:
        result: WatchStream = await self._answer("watch", name)
        return result

    async def watch_prefix(
        self, prefix: str, *, data: bool, owners: bool, waiters: bool
    ) -> PrefixWatchStream:
        result: PrefixWatchStream = await self._answer("watch_prefix", prefix)
        return result

    def stop(self, error: LostError) -> None:
        self.stopped = error

    async def close(self) -> None:
        self.closed += 1

    def ops(self, op: str) -> list[tuple[Any, ...]]:
        return [args for name, args in self.calls if name == op]


async def _soon(check: Callable[[], bool], what: str) -> None:
    """Until ``check()`` holds (loop turns and short sleeps; fails after a few seconds)."""
    for turn in range(5000):
        if check():
            return
        await asyncio.sleep(0 if turn < 100 else 0.001)
    raise AssertionError(f"never happened: {what}")


def _session(
    store: ScriptedStore, heard: Heard | None = None, *, withdraw_wait: float = 1.0
) -> StoreSession:
    return StoreSession(
        store,
        heard or Heard(),
        acquiring=store,
        admin=store,
        watching=store,
        scheme="test",
        node="n",
        session_id=7,
        window=WINDOW,
        withdraw_wait=withdraw_wait,
    )


async def _held(session: StoreSession, store: ScriptedStore, name: str = "m") -> Grant:
    """Hold ``name`` (granted at once, token 5, hold 0)."""
    store.answers["enqueue"] = [Grant(5, 1, None, 0)]
    grant = await session.acquire(name, count=1, data=b"", timeout=None, ephemeral=False)
    assert grant == Grant(5, 1, None, 0)
    return grant


async def _queued(session: StoreSession, store: ScriptedStore) -> asyncio.Task[Grant | None]:
    """An acquire of ``m`` queued in the store (its grant awaited until the test says)."""
    store.answers["enqueue"] = [QUEUED]
    store.answers["await_grant"] = [asyncio.Event()]  # never set: it waits
    task = asyncio.ensure_future(
        session.acquire("m", count=1, data=b"", timeout=None, ephemeral=False)
    )
    await _soon(lambda: bool(store.ops("await_grant")), "the acquire queued")
    return task


async def test_a_cancelled_acquire_is_withdrawn_before_its_caller_goes_on() -> None:
    store = ScriptedStore()
    session = _session(store)
    task = await _queued(session, store)
    store.answers["withdraw"] = [Withdrawal.WITHDRAWN]
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert store.ops("withdraw") == [("m", 0)]
    assert store.ops("release") == []
    assert session.ledger.free_hold("m") == 0  # through: the number is free again


async def test_a_cancelled_all_or_none_acquire_withdraws_every_member() -> None:
    """Each name's request is withdrawn (the store withdraws the set with the first);
    a member granted in the race is released; every hold number is free again."""
    store = ScriptedStore()
    session = _session(store)
    store.answers["enqueue_all"] = [QUEUED]
    store.answers["await_grant"] = [asyncio.Event()]  # never set: it waits
    task = asyncio.ensure_future(
        session.acquire_all(["a", "b"], count=1, data=b"", timeout=None, ephemeral=True)
    )
    await _soon(lambda: bool(store.ops("await_grant")), "the acquire queued")
    assert store.ops("enqueue_all") == [((("a", 0), ("b", 0)),)]
    store.answers["withdraw"] = [Withdrawal.WITHDRAWN, Withdrawal.UNKNOWN]
    store.answers["release"] = [False]
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sorted(store.ops("withdraw")) == [("a", 0), ("b", 0)]
    assert store.ops("release") == [("b", 0)]  # its outcome unknown: released to be sure
    assert (session.ledger.free_hold("a"), session.ledger.free_hold("b")) == (0, 0)
    assert session.ledger.held == {}


async def test_all_or_none_grants_are_held_together() -> None:
    store = ScriptedStore()
    session = _session(store)
    store.answers["enqueue_all"] = [[Grant(5, 1, None, 0), Grant(6, 1, None, 0)]]
    grants = await session.acquire_all(["a", "b"], count=1, data=b"", timeout=None, ephemeral=True)
    assert grants == [Grant(5, 1, None, 0), Grant(6, 1, None, 0)]
    assert set(session.ledger.held) == {("a", 0), ("b", 0)}
    store.answers["enqueue_all"] = [None]  # busy: nothing held, nothing pending
    assert (
        await session.acquire_all(["c", "d"], count=1, data=b"", timeout=0, ephemeral=True) is None
    )
    assert session.ledger.pending == {}


async def test_a_grant_that_raced_the_withdrawal_is_released() -> None:
    store = ScriptedStore()
    session = _session(store)
    task = await _queued(session, store)
    store.answers["withdraw"] = [Withdrawal.UNKNOWN]
    store.answers["release"] = [True]
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert store.ops("release") == [("m", 0)]
    assert session.ledger.held == {}


async def test_a_restate_that_raced_keeps_the_upgrade_as_the_hold() -> None:
    store = ScriptedStore()
    session = _session(store)
    held = await _held(session, store)
    store.answers["enqueue"] = [QUEUED]
    store.answers["await_grant"] = [asyncio.Event()]
    task = asyncio.ensure_future(session.restate("m", held, count=2, data=b"", timeout=None))
    await _soon(lambda: bool(store.ops("await_grant")), "the restate queued")
    store.answers["withdraw"] = [Grant(9, 2, None, 0)]  # the upgrade won the race
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert store.ops("release") == []
    assert session.ledger.held == {("m", 0): Grant(9, 2, None, 0)}


async def test_an_acquire_whose_outcome_is_unknown_is_withdrawn_as_a_cancelled_one() -> None:
    store = ScriptedStore()
    session = _session(store)
    store.answers["enqueue"] = [UnavailableError("the answer was lost")]
    store.answers["withdraw"] = [Withdrawal.UNKNOWN]
    store.answers["release"] = [False]
    with pytest.raises(UnavailableError):
        await session.acquire("m", count=1, data=b"", timeout=None, ephemeral=False)
    assert store.ops("withdraw") == [("m", 0)]
    assert store.ops("release") == [("m", 0)]


async def test_an_unanswered_withdrawal_goes_on_without_its_caller(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The caller waits at most withdraw_wait; the withdrawal is sent until answered,
    and the hold's number stays taken until then."""
    monkeypatch.setattr("tenure.backends._session.RETRY_MIN", 0.001)
    store = ScriptedStore()
    session = _session(store, withdraw_wait=0.01)
    task = await _queued(session, store)
    answered = asyncio.Event()
    store.answers["withdraw"] = [
        UnavailableError("unreachable"),
        UnavailableError("unreachable"),
        answered,
        Withdrawal.WITHDRAWN,
    ]
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, WINDOW / 2)  # long before the session's deadline
    assert session.ledger.free_hold("m") == 1  # hold 0 is still being withdrawn
    answered.set()
    await _soon(lambda: session.ledger.free_hold("m") == 0, "the withdrawal answered")
    assert len(store.ops("withdraw")) == 3


async def test_a_release_is_sent_until_it_is_answered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tenure.backends._session.RETRY_MIN", 0.001)
    store = ScriptedStore()
    session = _session(store)
    grant = await _held(session, store)
    store.answers["release"] = [UnavailableError("a"), UnavailableError("b"), True]
    assert await session.release("m", grant) is True
    assert len(store.ops("release")) == 3
    assert session.ledger.free_hold("m") == 0


async def test_a_claim_is_sent_again_with_its_id_until_it_is_answered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A claim whose answer was lost (the store unreachable) is sent again with the same
    claim id, which the store answers with the claim the first try made."""
    monkeypatch.setattr("tenure.backends._session.RETRY_MIN", 0.001)
    store = ScriptedStore()
    session = _session(store)
    record = ClaimRecord("c" * 32, 9, 1.0, 1.0, 2.0, None, 1, b"")
    store.answers["claim"] = [UnavailableError("lost"), UnavailableError("lost"), record]
    assert await session.claim("job", "c" * 32, 1.0, 2.0, b"") == record
    assert store.ops("claim") == [("job", "c" * 32)] * 3
    # Checked before anything is sent.
    with pytest.raises(InvalidArgumentError, match="must not exceed at_most"):
        await session.claim("job", "c" * 32, 3.0, 2.0, b"")
    with pytest.raises(InvalidArgumentError, match="claim_id"):
        await session.claim("job", "C" * 32, 1.0, 2.0, b"")
    assert len(store.ops("claim")) == 3
    session.lose(SessionExpiredError("gone"))
    with pytest.raises(SessionExpiredError):
        await session.claim("job", "c" * 32, 1.0, 2.0, b"")


async def test_a_cancelled_release_goes_on_and_keeps_the_number(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("tenure.backends._session.RETRY_MIN", 0.001)
    store = ScriptedStore()
    session = _session(store)
    grant = await _held(session, store)
    answered = asyncio.Event()
    store.answers["release"] = [answered, UnavailableError("lost with the connection"), True]
    releasing = asyncio.ensure_future(session.release("m", grant))
    await _soon(lambda: bool(store.ops("release")), "the release sent")
    releasing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await releasing
    assert session.ledger.free_hold("m") == 1  # hold 0 is still being released
    answered.set()
    await _soon(lambda: session.ledger.free_hold("m") == 0, "the release answered")
    assert len(store.ops("release")) >= 2  # sent again after the cancelled try


async def test_a_release_tried_when_the_session_ends_raises_the_loss() -> None:
    store = ScriptedStore()
    heard = Heard()
    session = _session(store, heard)
    grant = await _held(session, store)
    store.answers["release"] = [UnavailableError("down"), asyncio.Event()]  # then hangs
    releasing = asyncio.ensure_future(session.release("m", grant))
    await _soon(lambda: len(store.ops("release")) >= 2, "the release sent again")
    session.lose(SessionExpiredError("expired"))
    with pytest.raises(SessionExpiredError):
        await releasing
    assert len(heard.lost) == 1


async def test_the_local_deadline_gives_the_session_up_and_closes_it_in_the_store() -> None:
    store = ScriptedStore()
    heard = Heard()
    store.confirmed = asyncio.get_running_loop().time() - WINDOW + 0.01
    session = _session(store, heard)
    task = await _queued(session, store)
    with pytest.raises(SessionExpiredError, match="has not answered for its recovery window"):
        await asyncio.wait_for(task, 5)
    assert isinstance(session.ended, SessionExpiredError)
    assert [type(error) for error in heard.lost] == [SessionExpiredError]
    assert isinstance(store.stopped, SessionExpiredError)
    # Given up here; ended in the store as soon as it can be.
    await _soon(lambda: store.closed > 0, "the session closed in the store")


async def test_a_renewal_moves_the_deadline() -> None:
    store = ScriptedStore()
    store.confirmed = asyncio.get_running_loop().time() - WINDOW + 0.05
    session = _session(store)
    store.confirmed = asyncio.get_running_loop().time()  # renewed before the timer fires
    await asyncio.sleep(0.1)
    assert session.ended is None
    await session.close()


async def test_heartbeats_are_sent_again_and_a_loss_they_hear_ends_the_session(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("tenure.backends._liveness.RETRY_MIN", 0.001)
    store = ScriptedStore(beat_period=0.01)
    heard = Heard()
    store.answers["heartbeat"] = [
        None,
        UnavailableError("unreachable"),
        UnavailableError("unreachable"),
        None,
        SessionExpiredError("gone"),
    ]
    session = _session(store, heard)
    await _soon(lambda: session.ended is not None, "the loss heard")
    assert len(store.ops("heartbeat")) == 5
    assert [str(error) for error in heard.lost] == ["gone"]


async def test_loss_is_told_once_and_every_later_call_raises_it() -> None:
    store = ScriptedStore()
    heard = Heard()
    session = _session(store, heard)
    task = await _queued(session, store)
    session.lose(SessionExpiredError("first"))
    session.lose(SessionExpiredError("second"))
    with pytest.raises(SessionExpiredError, match="first"):
        await task
    with pytest.raises(SessionExpiredError, match="first"):
        await session.acquire("m", count=1, data=b"", timeout=None, ephemeral=False)
    with pytest.raises(SessionExpiredError, match="first"):
        await session.describe_semaphore("m", owners=False, waiters=False)
    assert [str(error) for error in heard.lost] == ["first"]
    await session.close()  # nothing more: it ended
    assert store.closed == 0


async def test_a_dropped_node_loses_grants_fails_waits_and_closes_the_session() -> None:
    store = ScriptedStore()
    heard = Heard()
    session = _session(store, heard)
    await _held(session, store, "held")
    task = await _queued(session, store)
    session.dropped()
    with pytest.raises(NotFoundError, match="dropped"):
        await task
    assert [(name, token, type(e)) for name, token, e in heard.leases] == [
        ("held", 5, LeaseLostError)
    ]
    assert [type(error) for error in heard.lost] == [SessionClosedError]


async def test_a_grant_lost_alone_is_told_once() -> None:
    store = ScriptedStore()
    heard = Heard()
    session = _session(store, heard)
    await _held(session, store)
    session.grant_lost("m", 0, 5, LeaseLostError("deleted"))
    session.grant_lost("m", 0, 5, LeaseLostError("deleted again"))
    assert [(name, token) for name, token, _ in heard.leases] == [("m", 5)]
    assert session.ledger.held == {}
