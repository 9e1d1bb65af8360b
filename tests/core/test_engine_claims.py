"""ClaimName and ReleaseClaim: a name claimed once per slot, for at least and at most a
time of the engine's clock (tenure._core.claims, tenure._core.handlers.claims)."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tenure._core import (
    ClaimName,
    ClaimRecord,
    CloseSession,
    DeleteSemaphore,
    DescribeSemaphore,
    NodeConfig,
    ReleaseClaim,
    UpdateSemaphore,
)
from tenure._core.claims import (
    MAX_CLAIM_SECONDS,
    check_claim_times,
    claim_data,
    parse_claim,
)
from tenure._core.invariants import check_invariants
from tenure._core.snapshot import SNAPSHOT_VERSION, dump, load, resume
from tenure.errors import (
    InvalidArgumentError,
    LimitExceededError,
    NotFoundError,
    PreconditionFailedError,
)

from .support import (
    NODE,
    acquire,
    create_semaphore,
    describe,
    fired,
    lost,
    make_engine,
    open_session,
    settled,
    snapshot,
)

T0 = 1_750_000_000.0  # UNIX seconds of the host's wall clock
A, B, C = "a" * 32, "b" * 32, "c" * 32


def claim(
    engine: object,
    session: int,
    name: str,
    claim_id: str,
    at_least: float,
    at_most: float,
    now: float,
    data: bytes = b"",
) -> ClaimRecord:
    return engine.apply(  # type: ignore[attr-defined,no-any-return]
        ClaimName(session, name, claim_id, at_least, at_most, data, T0 + now), now
    )


def test_a_free_name_is_claimed_and_its_semaphore_records_the_claim() -> None:
    engine = make_engine()
    s = open_session(engine)
    earlier = acquire(engine, s, "m", ephemeral=True).token
    assert earlier is not None
    got = claim(engine, s, "nightly", A, 60, 600, now=1.0, data=b"task-17")
    assert got == ClaimRecord(A, got.token, T0 + 1.0, 60.0, 600.0, None, s, b"task-17")
    assert got.token > earlier  # from the fencing counter of every grant
    desc = describe(engine, s, "nightly")
    assert (desc.limit, desc.ephemeral, desc.owners, desc.waiters) == (1, False, (), ())
    assert parse_claim("nightly", desc.data) == got
    assert desc.data.startswith(b"claim " + A.encode() + b" ")
    later = acquire(engine, s, "m2", ephemeral=True).token
    assert later is not None
    assert later > got.token
    check_invariants(engine)


def test_a_claimed_name_answers_the_live_claim_and_a_retry_is_answered_with_it() -> None:
    engine = make_engine()
    one, two = open_session(engine), open_session(engine)
    first = claim(engine, one, "job", A, 10, 100, now=0.0)
    refused = claim(engine, two, "job", B, 10, 100, now=5.0)
    assert refused == first  # the live one: its id is not B's
    retried = claim(engine, one, "job", A, 99, 99, now=6.0, data=b"other")
    assert retried == first  # the same claim, whatever else the retry says
    check_invariants(engine)


def test_a_release_keeps_the_name_until_at_least_after_the_grant() -> None:
    engine = make_engine()
    one, two = open_session(engine), open_session(engine)
    first = claim(engine, one, "job", A, 10, 100, now=0.0)
    assert engine.apply(ReleaseClaim(NODE, "job", A, T0 + 3.0), 3.0)
    record = parse_claim("job", describe(engine, one, "job").data)
    assert record == dataclasses.replace(first, released_at=T0 + 3.0)
    assert claim(engine, two, "job", B, 10, 100, now=9.9).id == A  # still claimed
    assert not engine.apply(ReleaseClaim(NODE, "job", A, T0 + 9.9), 9.9)  # released already
    engine.tick(10.0)
    with pytest.raises(NotFoundError):
        describe(engine, one, "job")  # ended: the semaphore went
    again = claim(engine, two, "job", B, 10, 100, now=10.0)
    assert (again.id, again.token > first.token) == (B, True)
    check_invariants(engine)


def test_a_release_after_at_least_ends_the_claim_at_once() -> None:
    engine = make_engine()
    one = open_session(engine)
    claim(engine, one, "job", A, 10, 100, now=0.0)
    assert engine.apply(ReleaseClaim(NODE, "job", A, T0 + 20.0), 20.0)
    with pytest.raises(NotFoundError):
        describe(engine, one, "job", now=20.0)
    assert claim(engine, one, "job", B, 0, 1, now=20.0).id == B
    # at_least 0: a release ends it at once.
    assert engine.apply(ReleaseClaim(NODE, "job", B, T0 + 20.5), 20.5)
    assert claim(engine, one, "job", C, 0, 1, now=20.5).id == C
    check_invariants(engine)


def test_at_most_ends_a_claim_whose_holder_lives_on_and_its_session_end_does_not() -> None:
    engine = make_engine()
    one, two = open_session(engine), open_session(engine)
    claim(engine, one, "a", A, 1, 30, now=0.0)
    claim(engine, one, "b", B, 1, 60, now=0.0)
    engine.apply(CloseSession(one), 1.0)  # the producer goes; its claims stay
    assert claim(engine, two, "a", C, 1, 30, now=29.9).id == A
    assert claim(engine, two, "a", C, 1, 30, now=30.0).id == C  # ended at 30, by the engine
    assert claim(engine, two, "b", C, 1, 30, now=59.0).id == B
    settled(engine)


def test_releases_that_shorten_nothing_say_so() -> None:
    engine = make_engine()
    one = open_session(engine)
    assert not engine.apply(ReleaseClaim(NODE, "job", A, T0), 0.0)  # never claimed
    claim(engine, one, "job", A, 5, 10, now=0.0)
    assert not engine.apply(ReleaseClaim(NODE, "job", B, T0), 0.0)  # another's id
    engine.tick(10.0)
    assert not engine.apply(ReleaseClaim(NODE, "job", A, T0 + 10), 10.0)  # ended
    with pytest.raises(NotFoundError):
        engine.apply(ReleaseClaim("nowhere", "job", A, T0), 10.0)
    with pytest.raises(InvalidArgumentError, match="claim_id"):
        engine.apply(ReleaseClaim(NODE, "job", "A" * 32, T0), 10.0)


def test_only_a_free_semaphore_or_an_ended_claims_can_be_claimed() -> None:
    engine = make_engine()
    s = open_session(engine)
    create_semaphore(engine, s, "plain", 1, data=b"42")
    with pytest.raises(PreconditionFailedError, match="not a claim"):
        claim(engine, s, "plain", A, 1, 2, now=0.0)
    acquire(engine, s, "held", ephemeral=True)
    with pytest.raises(PreconditionFailedError, match="held or awaited"):
        claim(engine, s, "held", A, 1, 2, now=0.0)
    # A claim's record whose claim is over (its data written by hand) is free.
    old = ClaimRecord(B, 1, T0 - 100, 1.0, 2.0, None, s, b"")
    create_semaphore(engine, s, "old", 1, data=claim_data(old))
    assert claim(engine, s, "old", A, 1, 2, now=0.0).id == A
    check_invariants(engine)


def test_the_end_deletes_the_semaphore_and_its_watchers_see_it() -> None:
    engine = make_engine()
    s = open_session(engine)
    claim(engine, s, "job", A, 1, 5, now=0.0)
    engine.apply(DescribeSemaphore(s, "job", watch_data=True), 1.0)
    settled(engine)
    engine.tick(5.0)
    (event,) = fired(settled(engine))
    assert event.description is not None
    assert (event.name, event.description.exists) == ("job", False)


def test_a_holder_of_a_claims_semaphore_loses_it_when_the_claim_ends() -> None:
    engine = make_engine()
    s = open_session(engine)
    claim(engine, s, "job", A, 1, 5, now=0.0)
    acquire(engine, s, "job", now=1.0)
    engine.tick(5.0)
    (gone,) = lost(settled(engine))
    assert (gone.name, "claim of 'job' ended" in gone.message) == ("job", True)


def test_deleting_or_rewriting_a_claims_semaphore_ends_the_claim() -> None:
    engine = make_engine()
    s = open_session(engine)
    claim(engine, s, "gone", A, 1, 50, now=0.0)
    engine.apply(DeleteSemaphore(s, "gone"), 1.0)
    assert claim(engine, s, "gone", B, 1, 50, now=1.0).id == B
    claim(engine, s, "kept", A, 1, 50, now=0.0)
    engine.apply(UpdateSemaphore(s, "kept", b"mine now"), 1.0)
    assert not engine.apply(ReleaseClaim(NODE, "kept", A, T0 + 1), 1.0)
    with pytest.raises(PreconditionFailedError, match="not a claim"):
        claim(engine, s, "kept", B, 1, 50, now=2.0)
    engine.tick(50.0)  # its timer goes; the semaphore, not a claim's now, stays
    assert describe(engine, s, "kept", now=50.0).data == b"mine now"
    assert "kept" not in engine.nodes[NODE].claims
    check_invariants(engine)


def test_max_claims_counts_live_claims_released_ones_too() -> None:
    engine = make_engine(NodeConfig(max_claims=2))
    s = open_session(engine)
    claim(engine, s, "a", A, 5, 50, now=0.0)
    claim(engine, s, "b", B, 5, 50, now=0.0)
    engine.apply(ReleaseClaim(NODE, "b", B, T0 + 1), 1.0)  # ends at 5: counted until then
    with pytest.raises(LimitExceededError, match=r"max_claims \(2\) reached on node 'n'"):
        claim(engine, s, "c", C, 5, 50, now=1.0)
    assert claim(engine, s, "c", C, 5, 50, now=5.0).id == C
    assert claim(engine, s, "a", C, 5, 50, now=5.0).id == A  # a claimed name: no new claim


def test_max_semaphores_and_max_data_size_apply_to_claims() -> None:
    engine = make_engine(NodeConfig(max_semaphores=1, max_data_size=4))
    s = open_session(engine)
    with pytest.raises(LimitExceededError, match="max_data_size"):
        claim(engine, s, "a", A, 1, 5, now=0.0, data=b"12345")
    claim(engine, s, "a", A, 1, 5, now=0.0, data=b"1234")
    with pytest.raises(LimitExceededError, match="max_semaphores"):
        claim(engine, s, "b", B, 1, 5, now=0.0)


@pytest.mark.parametrize(
    ("at_least", "at_most", "message"),
    [
        (10, 5, "must not exceed at_most"),
        (-1, 5, "at_least must be a finite"),
        (1, math.inf, "at_most must be a finite"),
        (math.nan, 5, "at_least must be a finite"),
        (0, 0, "at_most must be above 0"),
        (1, MAX_CLAIM_SECONDS + 1, "MAX_CLAIM_SECONDS"),
        (True, 5, "at_least must be a number"),
        ("1", 5, "at_least must be a number"),
    ],
)
def test_bad_times_are_refused(at_least: object, at_most: object, message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        check_claim_times(at_least, at_most)
    engine = make_engine()
    s = open_session(engine)
    with pytest.raises(InvalidArgumentError, match=message):
        engine.apply(ClaimName(s, "x", A, at_least, at_most, b"", T0), 0.0)  # type: ignore[arg-type]
    assert "x" not in engine.nodes[NODE].semaphores


@pytest.mark.parametrize("claim_id", ["", "a" * 31, "A" * 32, "g" * 32, "a" * 33, 7])
def test_bad_ids_are_refused(claim_id: object) -> None:
    engine = make_engine()
    s = open_session(engine)
    with pytest.raises(InvalidArgumentError, match="claim_id"):
        engine.apply(ClaimName(s, "x", claim_id, 1, 2, b"", T0), 0.0)  # type: ignore[arg-type]


def test_a_refused_claim_changes_nothing() -> None:
    engine = make_engine(NodeConfig(max_claims=1))
    s = open_session(engine)
    claim(engine, s, "kept", A, 1, 50, now=0.0)
    engine.apply(UpdateSemaphore(s, "kept", b"mine now"), 1.0)  # a stale timer stays
    create_semaphore(engine, s, "plain", 1)
    engine.take_effects()
    before = snapshot(engine)
    for name, at_most in (("plain", 5.0), ("new", 5.0), ("new", -1.0), ("kept", 5.0)):
        with pytest.raises((PreconditionFailedError, LimitExceededError, InvalidArgumentError)):
            claim(engine, s, name, B, 1, at_most, now=1.0)
    assert snapshot(engine) == before
    assert engine.take_effects() == []


# -- the record's codec ------------------------------------------------------------------


@given(
    token=st.integers(1, 2**64 - 1),
    granted=st.floats(0, 4e9),
    times=st.tuples(st.floats(0, MAX_CLAIM_SECONDS), st.floats(0, MAX_CLAIM_SECONDS)),
    released=st.none() | st.floats(0, 4e9),
    session=st.integers(0, 2**64 - 1),
    data=st.binary(max_size=20),
)
def test_a_record_reads_back_as_written(
    token: int,
    granted: float,
    times: tuple[float, float],
    released: float | None,
    session: int,
    data: bytes,
) -> None:
    least, most = sorted(times)
    most = most or 1.0
    record = ClaimRecord(A, token, granted, least, most, released, session, data)
    assert parse_claim("x", claim_data(record)) == record


@pytest.mark.parametrize(
    "data",
    [
        b"claim",
        b"claim " + A.encode() + b" 1 5.0 1.0 2.0 - 3",  # eight words, not nine
        b"claim " + A.encode() + b" 1 5.0 1.0 2.0 - 3 - x",  # ten
        b"claim " + A.encode() + b" -1 5.0 1.0 2.0 - 3 -",  # a negative token
        b"claim " + A.encode() + b" 1 nan 1.0 2.0 - 3 -",
        b"claim " + A.encode() + b" 1 5.0 3.0 2.0 - 3 -",  # at_least > at_most
        b"claim " + A.encode() + b" 1 5.0 1.0 2.0 - 3 abc",  # odd hex
        b"claim " + A.encode() + b" 1 5.0 1.0 2.0 x 3 -",
        b"claim " + A.encode().upper() + b" 1 5.0 1.0 2.0 - 3 -",
        b"limiter 1 2 3",
    ],
)
def test_what_is_not_a_record_is_refused(data: bytes) -> None:
    with pytest.raises(PreconditionFailedError, match="not a claim"):
        parse_claim("x", data)


def test_records_of_every_store_read_back() -> None:
    # As Lua's %.17g and PostgreSQL's float8 text write them.
    lua = b"claim " + A.encode() + b" 7 1750000000.25 60 600 - 12 7461736b"
    assert parse_claim("x", lua) == ClaimRecord(A, 7, 1750000000.25, 60.0, 600.0, None, 12, b"task")
    pg = b"claim " + A.encode() + b" 7 1750000000.25 60 600 1750000001.5 12 -"
    assert parse_claim("x", pg).released_at == 1750000001.5


# -- snapshots -------------------------------------------------------------------------------


def test_claims_survive_a_snapshot_and_a_resume_leaves_out_the_downtime() -> None:
    engine = make_engine()
    s = open_session(engine)
    claim(engine, s, "a", A, 10, 100, now=0.0)
    claim(engine, s, "b", B, 10, 100, now=0.0)
    engine.apply(ReleaseClaim(NODE, "b", B, T0 + 4), 4.0)
    data = dump(engine)
    assert data["version"] == SNAPSHOT_VERSION
    (plain,) = data["nodes"]
    assert plain["claims"][:5] == ["a", A, 1, 10.0, 100.0]
    restored = load(data)
    resume(restored, 1000.0)  # a new process, at 1000 on its clock: 996 s later
    timers = restored.nodes[NODE].claims
    assert (timers["a"].least_until, timers["a"].ends_at) == (1006.0, 1096.0)
    assert (timers["b"].least_until, timers["b"].ends_at) == (1006.0, 1006.0)
    s2 = open_session(restored, now=1000.0)
    assert claim(restored, s2, "b", C, 1, 5, now=1005.9).id == B
    assert claim(restored, s2, "b", C, 1, 5, now=1006.0).id == C
    assert claim(restored, s2, "a", C, 1, 5, now=1095.9).id == A
    check_invariants(restored)


def test_a_version_8_snapshot_loads_with_no_claims() -> None:
    engine = make_engine()
    s = open_session(engine)
    create_semaphore(engine, s, "x", 1)
    data = dump(engine)
    data["version"] = 8
    assert load(data).nodes[NODE].claims == {}


def test_load_refuses_claims_that_do_not_add_up() -> None:
    engine = make_engine()
    claim(engine, open_session(engine), "a", A, 1, 5, now=0.0)
    data = dump(engine)
    data["nodes"][0]["claims"] = data["nodes"][0]["claims"][:4]
    with pytest.raises(InvalidArgumentError, match="malformed"):
        load(data)
    data["nodes"][0]["claims"] = ["a", "not an id", 1, 1.0, 5.0]
    with pytest.raises(InvalidArgumentError, match="claim_id"):
        load(data)


# -- the rule, against a model ----------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    steps=st.lists(
        st.tuples(
            st.floats(0, 3),  # time passing before the step
            st.sampled_from(["claim", "release"]),
            st.sampled_from(["x", "y"]),
            st.sampled_from([A, B, C]),
            st.tuples(st.sampled_from([0.0, 1.0, 2.5]), st.sampled_from([1.0, 3.0, 6.0])),
        ),
        max_size=40,
    )
)
def test_claims_follow_the_rule(
    steps: list[tuple[float, str, str, str, tuple[float, float]]],
) -> None:
    """At most one claim of a name at a time; each ends at its at_most, or once
    released at the later of the release and its at_least (a model of the rule)."""
    engine = make_engine()
    s = open_session(engine)
    model: dict[str, tuple[str, float, float, bool]] = {}  # name: id, least, end, released
    now = 0.0
    for wait, op, name, claim_id, (least, most) in steps:
        now += wait
        model = {n: c for n, c in model.items() if c[2] > now}  # ended by now
        if op == "claim":
            if least > most:
                least = most
            got = claim(engine, s, name, claim_id, least, most, now=now)
            if name in model:
                assert got.id == model[name][0]
            else:
                assert got.id == claim_id
                model[name] = (claim_id, now + least, now + most, False)
        else:
            done = engine.apply(ReleaseClaim(NODE, name, claim_id, T0 + now), now)
            live = model.get(name)
            expect = live is not None and live[0] == claim_id and not live[3]
            assert done == expect
            if expect and live is not None:
                end = max(now, live[1])
                if end <= now:
                    del model[name]
                else:
                    model[name] = (claim_id, live[1], end, True)
        assert set(engine.nodes[NODE].claims) == set(model)
        check_invariants(engine)
