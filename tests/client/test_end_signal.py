"""An end signal whose clean end turns out a loss (``lost_first``): a release that
crossed the store's own end of the hold (an adoption, a max_hold, a forced delete)."""

from __future__ import annotations

import pytest

from tenure.client._loss import EndSignal
from tenure.errors import LeaseLostError, LostError
from tenure.sync._held import EndSignal as SyncEndSignal

ADOPTED = LeaseLostError("adopted by another session")


@pytest.mark.parametrize("kind", [EndSignal, SyncEndSignal], ids=["async", "sync"])
def test_a_clean_end_found_lost_first_takes_the_loss_as_its_reason(
    kind: type[EndSignal] | type[SyncEndSignal],
) -> None:
    signal = kind()
    told: list[LostError | None] = []
    signal.add_callback(told.append)
    signal.lost_first(ADOPTED)  # not ended yet: nothing to turn
    assert signal.reason is None
    assert not signal.ended
    end = signal.end if isinstance(signal, EndSignal) else signal._end
    end(None)  # released
    assert told == [None]
    signal.lost_first(ADOPTED)
    assert signal.reason is ADOPTED
    assert told == [None]  # those told of the clean end are not told again
    signal.lost_first(LeaseLostError("another"))
    assert signal.reason is ADOPTED  # the first loss stays


@pytest.mark.parametrize("kind", [EndSignal, SyncEndSignal], ids=["async", "sync"])
def test_a_loss_is_not_replaced(kind: type[EndSignal] | type[SyncEndSignal]) -> None:
    signal = kind()
    expired = LeaseLostError("expired")
    (signal.end if isinstance(signal, EndSignal) else signal._end)(expired)
    signal.lost_first(ADOPTED)
    assert signal.reason is expired
