"""OfferHold and AdoptHold: a hold moved to another session under a new token
(tenure._core.handlers.handoffs)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tenure._core import (
    AcquireStatus,
    AdoptHold,
    CreateSession,
    DescribeSession,
    Engine,
    OfferHold,
    Release,
)
from tenure._core.handlers.handoffs import digest_of
from tenure._core.invariants import check_invariants
from tenure._core.quotas import TRACKED, Quota
from tenure._core.session import KEY_DIGEST_BYTES
from tenure._core.snapshot import dump, load
from tenure.errors import (
    InvalidArgumentError,
    LeaseLostError,
    LimitExceededError,
    NotFoundError,
    PreconditionFailedError,
)

from .support import (
    KEY,
    NODE,
    acquire,
    create_semaphore,
    describe,
    lost,
    make_engine,
    open_session,
    settled,
    snapshot,
)

SECRET = b"s" * 16


def offered(
    name: str = "s", limit: int = 3, count: int = 2, data: bytes = b"job-7"
) -> tuple[Engine, int, int, int]:
    """An engine where session A holds ``count`` tokens of ``name`` and offered them."""
    engine = make_engine()
    a, b = open_session(engine), open_session(engine)
    create_semaphore(engine, a, name, limit)
    token = acquire(engine, a, name, count, data=data).token
    assert token is not None
    assert engine.apply(OfferHold(a, name, digest_of(SECRET)), 0.0).token == token
    settled(engine)
    return engine, a, b, token


def test_adopt_moves_the_hold_with_its_count_and_data_under_a_greater_token() -> None:
    engine, a, b, token = offered()
    result = engine.apply(AdoptHold(b, "s", a, 0, token, SECRET, hold=0), 1.0)
    assert result.status is AcquireStatus.GRANTED
    assert result.count == 2
    assert result.token is not None
    assert result.token > token
    effects = settled(engine)
    (gone,) = lost(effects)
    assert (gone.session_id, gone.token, gone.name) == (a, token, "s")
    (owner,) = describe(engine, b, "s").owners
    assert (owner.session_id, owner.count, owner.data, owner.token) == (
        b,
        2,
        b"job-7",
        result.token,
    )
    # The old session's loss is kept for a re-attach, as any loss it did not cause.
    state = engine.apply(DescribeSession(a), 1.0)
    assert [m.token for m in state.missed if hasattr(m, "token")] == [token]


def test_adopting_twice_fails_and_the_first_adopter_keeps_the_hold() -> None:
    engine, a, b, token = offered()
    c = open_session(engine)
    engine.apply(AdoptHold(b, "s", a, 0, token, SECRET), 1.0)
    before = snapshot(engine)
    with pytest.raises(LeaseLostError, match="cannot be adopted"):
        engine.apply(AdoptHold(c, "s", a, 0, token, SECRET), 1.0)
    assert snapshot(engine) == before


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda e, a, b, t: AdoptHold(b, "s", a, 0, t, b"x" * 16), id="wrong secret"),
        pytest.param(lambda e, a, b, t: AdoptHold(b, "s", a, 0, t + 1, SECRET), id="wrong token"),
        pytest.param(lambda e, a, b, t: AdoptHold(b, "s", a, 1, t, SECRET), id="wrong hold"),
        pytest.param(lambda e, a, b, t: AdoptHold(b, "s", b, 0, t, SECRET), id="wrong holder"),
        pytest.param(lambda e, a, b, t: AdoptHold(b, "t", a, 0, t, SECRET), id="wrong name"),
    ],
)
def test_a_hand_off_that_is_not_the_offered_one_is_refused_and_changes_nothing(
    change: Callable[[Engine, int, int, int], AdoptHold],
) -> None:
    engine, a, b, token = offered()
    before = snapshot(engine)
    with pytest.raises(LeaseLostError):
        engine.apply(change(engine, a, b, token), 1.0)
    assert snapshot(engine) == before


def test_a_released_or_upgraded_hold_cannot_be_adopted_and_a_restated_one_can() -> None:
    engine, a, b, token = offered()
    engine.apply(Release(a, "s"), 1.0)
    with pytest.raises(LeaseLostError):
        engine.apply(AdoptHold(b, "s", a, 0, token, SECRET), 1.0)
    engine, a, b, token = offered()
    acquire(engine, a, "s", 3)  # (an upgrade: a new token, a new grant)
    with pytest.raises(LeaseLostError):
        engine.apply(AdoptHold(b, "s", a, 0, token, SECRET), 1.0)
    engine, a, b, token = offered()
    acquire(engine, a, "s", 1, data=b"job-8")  # (in place: the same token, the offer kept)
    adopted = engine.apply(AdoptHold(b, "s", a, 0, token, SECRET), 1.0)
    assert adopted.count == 1
    (owner,) = describe(engine, b, "s").owners
    assert (owner.session_id, owner.data) == (b, b"job-8")


def test_offering_again_replaces_the_offer() -> None:
    engine, a, b, token = offered()
    engine.apply(OfferHold(a, "s", digest_of(b"t" * 16)), 0.0)
    with pytest.raises(LeaseLostError):
        engine.apply(AdoptHold(b, "s", a, 0, token, SECRET), 1.0)
    assert engine.apply(AdoptHold(b, "s", a, 0, token, b"t" * 16), 1.0).count == 2


def test_waiters_keep_their_place_and_nothing_more_is_granted() -> None:
    engine, a, b, token = offered(limit=2)
    c = open_session(engine)
    d = open_session(engine)
    acquire(engine, c, "s", 1, timeout=None)
    acquire(engine, d, "s", 2, timeout=None)
    settled(engine)
    engine.apply(AdoptHold(b, "s", a, 0, token, SECRET), 1.0)
    assert [w.session_id for w in describe(engine, b, "s").waiters] == [c, d]
    assert not [e for e in settled(engine) if type(e).__name__ == "Granted"]


def test_the_adopters_hold_number_must_be_free() -> None:
    engine, a, b, token = offered()
    acquire(engine, b, "s", 1)
    with pytest.raises(PreconditionFailedError, match="adopt as another hold"):
        engine.apply(AdoptHold(b, "s", a, 0, token, SECRET, hold=0), 1.0)
    assert engine.apply(AdoptHold(b, "s", a, 0, token, SECRET, hold=1), 1.0).count == 2


def test_offering_what_is_not_held_and_bad_arguments_are_refused() -> None:
    engine, a, b, token = offered()
    with pytest.raises(NotFoundError):
        engine.apply(OfferHold(b, "s", digest_of(SECRET)), 0.0)
    with pytest.raises(InvalidArgumentError, match="32 bytes"):
        engine.apply(OfferHold(a, "s", b"short"), 0.0)
    with pytest.raises(InvalidArgumentError, match="secret"):
        engine.apply(AdoptHold(b, "s", a, 0, token, b""), 0.0)


def test_an_offer_survives_a_snapshot_and_a_describe_never_shows_it() -> None:
    engine, a, b, token = offered()
    shown = repr(describe(engine, b, "s"))
    assert repr(digest_of(SECRET)) not in shown
    assert "offer" not in shown
    again = load(dump(engine))
    assert snapshot(again) == snapshot(engine)
    assert again.apply(AdoptHold(b, "s", a, 0, token, SECRET), 1.0).count == 2


def test_an_adopted_hold_and_its_data_count_against_the_adopters_quota() -> None:
    """The adopter's owner takes the hold and its data (refused past its quota, nothing
    moved); the holder's gives them back."""
    engine = make_engine()
    engine.ledger.quotas = {"small": Quota(data_bytes=KEY_DIGEST_BYTES + 5)}  # (its key's)

    def opened(actor: str) -> int:
        engine.actor = actor
        try:
            return engine.apply(CreateSession(NODE, KEY), 0.0).session_id
        finally:
            engine.actor = ""

    def usage(owner: str) -> dict[str, int]:
        return dict(zip(TRACKED, engine.ledger.of(owner).counts, strict=True))

    holder, adopter, small = opened("big"), opened("other"), opened("small")
    token = acquire(engine, holder, "m", 1, ephemeral=True, data=b"d" * 10).token
    assert token is not None
    engine.apply(OfferHold(holder, "m", digest_of(SECRET)), 0.0)
    before = snapshot(engine)
    with pytest.raises(LimitExceededError, match="'small' is over its quota data_bytes"):
        engine.apply(AdoptHold(small, "m", holder, 0, token, SECRET), 1.0)
    assert snapshot(engine) == before  # refused: nothing moved
    assert (usage("big")["holds"], usage("big")["data_bytes"] >= 10) == (1, True)
    engine.apply(AdoptHold(adopter, "m", holder, 0, token, SECRET), 1.0)
    assert usage("big")["holds"] == 0
    assert usage("other")["holds"] == 1
    check_invariants(engine)
