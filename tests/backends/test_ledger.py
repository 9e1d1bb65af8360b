"""The ledger's rules for agreeing with the engine after a re-attach (no I/O)."""

from __future__ import annotations

import pytest

from tenure._core import (
    AcquireFailed,
    CancelAcquire,
    HeldGrant,
    LeaseLost,
    QueuedAcquire,
    Release,
    SessionState,
)
from tenure.backends._base import Grant
from tenure.backends._ledger import HoldLedger
from tenure.errors import ErrorCode, LeaseLostError, UnavailableError

SID = 7


def page(
    holds: tuple[HeldGrant, ...] = (),
    waits: tuple[QueuedAcquire, ...] = (),
    missed: tuple[AcquireFailed | LeaseLost, ...] = (),
    next_after: str | None = None,
) -> SessionState:
    return SessionState(SID, holds, waits, missed, next_after)


async def test_an_acquire_the_engine_lists_as_waiting_is_queued() -> None:
    ledger = HoldLedger(SID)
    assert ledger.empty
    pending = ledger.open(1, "a", 0)  # its QUEUED answer was lost
    settled = ledger.settle(page(waits=(QueuedAcquire("a", 1, 1),)), "")
    assert not pending.future.done()
    assert pending.queued
    assert not ledger.empty
    assert settled.lost == []
    assert settled.drop == []


async def test_a_hold_with_a_token_the_client_has_not_seen_is_the_grant() -> None:
    ledger = HoldLedger(SID)
    pending = ledger.open(1, "a", 0)
    ledger.settle(page(holds=(HeldGrant("a", 42, 3, 9.0),)), "")
    assert pending.future.result() == Grant(42, 3, 9.0)
    assert ledger.take(1, ("a", 0), pending.future.result()) == Grant(42, 3, 9.0)
    assert ledger.held == {("a", 0): Grant(42, 3, 9.0)}


async def test_a_hold_being_released_is_not_a_new_grant() -> None:
    ledger = HoldLedger(SID)
    ledger.releasing["a", 0] = Grant(42, 1)
    pending = ledger.open(1, "a", 0)
    settled = ledger.settle(page(holds=(HeldGrant("a", 42, 1),)), "")
    assert not pending.future.done()  # not answered: its caller sends it again
    assert settled.drop == []  # and the Release in flight takes care of the hold


async def test_an_acquire_that_may_never_have_arrived_is_left_to_send_again() -> None:
    ledger = HoldLedger(SID)
    pending = ledger.open(1, "a", 0)
    assert ledger.settle(page(), "").drop == []
    assert not pending.future.done()
    assert not pending.queued


async def test_a_queued_acquire_granted_and_lost_again_raises_the_loss() -> None:
    ledger = HoldLedger(SID)
    pending = ledger.open(1, "a", 0)
    pending.queued = True
    gone = LeaseLost(SID, "a", 42, ErrorCode.LEASE_LOST, "semaphore 'a' was deleted")
    ledger.settle(page(missed=(gone,)), "")
    with pytest.raises(LeaseLostError, match="deleted"):
        pending.future.result()


async def test_a_queued_acquire_with_no_trace_fails_rather_than_waits_for_ever() -> None:
    ledger = HoldLedger(SID)
    pending = ledger.open(1, "a", 0)
    pending.queued = True
    ledger.settle(page(), "")
    with pytest.raises(UnavailableError, match="how it ended was lost"):
        pending.future.result()


async def test_a_held_grant_the_engine_does_not_list_is_lost() -> None:
    ledger = HoldLedger(SID)
    ledger.held.update({("a", 0): Grant(5, 1), ("b", 0): Grant(6, 1), ("c", 0): Grant(7, 1)})
    settled = ledger.settle(page(holds=(HeldGrant("a", 5, 1), HeldGrant("b", 60, 1))), "")
    assert [(place, token) for place, token, _ in settled.lost] == [(("b", 0), 6), (("c", 0), 7)]
    assert all(isinstance(error, LeaseLostError) for _, _, error in settled.lost)
    assert settled.drop == [Release(SID, "b", 0)]  # token 60: nobody asked for it
    for place, token, error in settled.lost:  # the session tells them lost
        assert ledger.lose(place, token, error)
    assert ledger.held == {("a", 0): Grant(5, 1)}


async def test_what_nobody_asked_for_is_dropped() -> None:
    ledger = HoldLedger(SID)
    pending = ledger.open(2, "a", 0)  # a newer acquire of "a", not applied yet
    settled = ledger.settle(
        page(
            holds=(HeldGrant("z", 9, 1),),
            waits=(QueuedAcquire("a", 1, 1), QueuedAcquire("b", 3, 1)),
        ),
        "",
    )
    assert settled.drop == [
        Release(SID, "z", 0),
        CancelAcquire(SID, "a", 1, 0),
        CancelAcquire(SID, "b", 3, 0),
    ]
    assert not pending.future.done()


async def test_a_page_settles_only_the_semaphores_it_covers() -> None:
    ledger = HoldLedger(SID)
    ledger.held.update({("a", 0): Grant(1, 1), ("m", 0): Grant(2, 1), ("z", 0): Grant(3, 1)})
    early, late = ledger.open(10, "b", 0), ledger.open(11, "y", 0)
    early.queued = late.queued = True
    settled = ledger.settle(page(next_after="n"), "c")  # covers ("c", "n"]
    assert [place for place, _, _ in settled.lost] == [("m", 0)]
    assert not early.future.done()
    assert not late.future.done()
    settled = ledger.settle(page(holds=(HeldGrant("z", 3, 1),)), "n")  # the last page
    assert settled.lost == []
    with pytest.raises(UnavailableError):
        late.future.result()
    assert not early.future.done()


async def test_a_grant_lost_before_its_caller_took_it_is_raised_by_take() -> None:
    ledger = HoldLedger(SID)
    pending = ledger.open(1, "a", 0)
    ledger.granted(1, Grant(42, 1))
    error = LeaseLostError("semaphore 'a' was deleted")
    assert ledger.lose(("a", 0), 42, error) is False  # nobody holds it yet: its acquire raises
    with pytest.raises(LeaseLostError):
        ledger.take(1, ("a", 0), pending.future.result())
    assert ledger.held == {}


async def test_pushes_are_idempotent() -> None:
    ledger = HoldLedger(SID)
    pending = ledger.open(1, "a", 0)
    ledger.granted(1, Grant(42, 1))
    ledger.granted(1, Grant(43, 1))
    ledger.failed(1, TimeoutError())
    assert pending.future.result() == Grant(42, 1)
    ledger.take(1, ("a", 0), Grant(42, 1))
    error = LeaseLostError("lost")
    assert ledger.lose(("a", 0), 42, error) is True
    assert ledger.lose(("a", 0), 42, error) is False


async def test_holds_of_one_semaphore_are_told_apart_by_number() -> None:
    ledger = HoldLedger(SID)
    assert ledger.free_hold("a") == 0
    first = ledger.open(1, "a", ledger.free_hold("a"))
    second = ledger.open(2, "a", ledger.free_hold("a"))  # a second task of the session
    assert (first.hold, second.hold) == (0, 1)
    ledger.take(1, ("a", 0), Grant(40, 1))
    ledger.close(1)
    second.queued = True
    # On re-attach: hold 1 was granted meanwhile; hold 0 is still held as it was.
    settled = ledger.settle(page(holds=(HeldGrant("a", 40, 1), HeldGrant("a", 41, 1, None, 1))), "")
    assert second.future.result() == Grant(41, 1, None, 1)
    assert (settled.lost, settled.drop) == ([], [])
    ledger.take(2, ("a", 1), second.future.result())
    ledger.close(2)
    assert ledger.free_hold("a") == 2
    ledger.releasing["a", 0] = ledger.held.pop(("a", 0))
    assert ledger.free_hold("a") == 2  # not until its Release is answered
    del ledger.releasing["a", 0]
    assert ledger.free_hold("a") == 0
    assert ledger.free_hold("b") == 0


async def test_a_grant_lost_while_its_release_was_on_its_way_is_its_release_s_answer() -> None:
    # The store ended the grant (adopted by another session, its max_hold passed,
    # deleted by force) before it applied the release: the release gives nothing back,
    # and its answer is the loss (the simulation's seed 2 with 6 clients).
    ledger = HoldLedger(SID)
    pending = ledger.open(1, "a", 0)
    ledger.granted(1, Grant(42, 1))
    ledger.take(1, ("a", 0), pending.future.result())
    ledger.releasing[("a", 0)] = ledger.held.pop(("a", 0))  # (what a release does first)
    error = LeaseLostError("handed off")
    assert ledger.lose(("a", 0), 41, error) is False  # (an older grant: not this one)
    assert ledger.ended_first == {}
    assert ledger.lose(("a", 0), 42, error) is False  # (not told: the answer tells it)
    assert ledger.ended_first == {("a", 0): error}
    assert ("a", 0) in ledger.releasing  # its number stays taken until the answer
    ledger.end(UnavailableError("gone"))
    assert ledger.ended_first == {}
