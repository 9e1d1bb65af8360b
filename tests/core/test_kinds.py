"""Which recipe a semaphore is (:mod:`tenure._core.kinds`): each kind from the shape
its recipe writes, look-alike data that must stay a plain semaphore, the facts as
JSON and text, and the real recipes on ``memory://`` classified from what they wrote."""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

import tenure
from tenure._core.barrier_data import barrier_progress
from tenure._core.claims import ClaimRecord, claim_data, parse_claim
from tenure._core.counter_data import counter_value
from tenure._core.kind_render import kind_json, kind_text
from tenure._core.kinds import (
    BarrierKind,
    ClaimKind,
    CounterKind,
    GroupKind,
    Kind,
    LimiterKind,
    LimiterLevel,
    PlainKind,
    RWLockKind,
    classify,
    classify_description,
    parties_data,
)
from tenure._core.members import GROUP_DATA, member_record, members_of
from tenure._core.rates import Bucket, bucket_data, parse_bucket
from tenure._core.values import MAX_COUNT, SemaphoreDescription
from tenure.errors import PreconditionFailedError


@dataclass(frozen=True)
class Hold:
    """An owner as classify reads it."""

    count: int
    token: int = 1
    data: bytes = b""


@dataclass(frozen=True)
class Ask:
    """A waiter as classify reads it."""

    count: int


def shape(
    *,
    limit: int,
    ephemeral: bool = False,
    data: bytes = b"",
    owners: tuple[Hold, ...] = (),
    waiters: tuple[Ask, ...] = (),
) -> Kind:
    return classify(
        "s", limit=limit, ephemeral=ephemeral, data=data, owners=owners, waiters=waiters
    )


READER, WRITER = Hold(1), Hold(MAX_COUNT)
SEMAPHORE = PlainKind("semaphore")


# -- readers-writer locks and mutexes ---------------------------------------------------


def test_readers_holding_and_writers_and_readers_waiting() -> None:
    found = shape(
        limit=MAX_COUNT,
        ephemeral=True,
        owners=(READER, READER, READER),
        waiters=(Ask(MAX_COUNT), Ask(1), Ask(1)),
    )
    assert found == RWLockKind(readers=3, writer=False, readers_waiting=2, writers_waiting=1)
    assert kind_text(found, 0.0) == "rwlock: 3 readers holding, 1 writer and 2 readers waiting"
    assert kind_json(found) == {
        "kind": "rwlock",
        "readers": 3,
        "writer": False,
        "readers_waiting": 2,
        "writers_waiting": 1,
    }


def test_a_writer_holding_with_readers_waiting_is_an_rwlock() -> None:
    found = shape(limit=MAX_COUNT, ephemeral=True, owners=(WRITER,), waiters=(Ask(1),))
    assert found == RWLockKind(readers=0, writer=True, readers_waiting=1, writers_waiting=0)
    assert kind_text(found, 0.0) == "rwlock: a writer holding, 1 reader waiting"


def test_whole_holds_only_are_a_mutex_and_other_ephemeral_shapes_a_semaphore() -> None:
    mutex = shape(limit=MAX_COUNT, ephemeral=True, owners=(WRITER,), waiters=(Ask(MAX_COUNT),))
    assert mutex == PlainKind("mutex")
    assert kind_text(mutex, 0.0) == ""
    assert kind_json(mutex) == {"kind": "mutex"}
    # A hold of 2 tokens is neither a reader's nor a writer's.
    assert shape(limit=MAX_COUNT, ephemeral=True, owners=(READER, Hold(2))) == SEMAPHORE
    assert shape(limit=MAX_COUNT, ephemeral=True, waiters=(Ask(3),)) == SEMAPHORE
    assert shape(limit=MAX_COUNT, ephemeral=True) == SEMAPHORE  # nobody at all
    # Readers' counts on a persistent semaphore: somebody's pool, not an rwlock.
    assert shape(limit=MAX_COUNT, owners=(READER, READER), data=b"pool") == SEMAPHORE
    assert shape(limit=10, owners=(READER,)) == SEMAPHORE


def test_a_missing_semaphore_is_a_free_mutex() -> None:
    assert classify_description(SemaphoreDescription.missing("m")) == PlainKind("mutex")


# -- rate limiters ----------------------------------------------------------------------


def test_a_rate_limiter_and_its_level_at_the_time_given() -> None:
    data = bucket_data(Bucket(50.0, 100.0, 1000.0))
    found = shape(limit=1, data=data)
    assert found == LimiterKind(50.0, 100.0, 1000.0)
    # Long past its TAT: the whole burst may go.
    assert found.level(2000.0) == LimiterLevel(available=100.0, backlog=0.0, full_in=0.0)
    # 1 s before its TAT: 50 units reserved ahead, 50 may go.
    assert found.level(999.0) == LimiterLevel(available=50.0, backlog=0.0, full_in=1.0)
    # 3.2 s before: 160 units ahead, 60 past the burst: 1.2 s until they have gone.
    level = found.level(996.8)
    assert level.available == 0.0
    assert level.backlog == pytest.approx(1.2)
    assert level.full_in == pytest.approx(3.2)
    assert (
        kind_text(found, 996.8) == "rate limiter: 50/s, burst 100, backlog 1.2 s (none available)"
    )
    assert kind_text(found, 999.5) == "rate limiter: 50/s, burst 100, 75 available now"
    assert kind_json(found) == {"kind": "rate_limiter", "rate": 50.0, "burst": 100.0, "tat": 1000.0}
    assert kind_json(found, 999.0) == {
        "kind": "rate_limiter",
        "rate": 50.0,
        "burst": 100.0,
        "tat": 1000.0,
        "available": 50.0,
        "backlog": 0.0,
        "full_in": 1.0,
    }


@pytest.mark.parametrize(
    "data",
    [
        b"limiter 50 100",  # three words
        b"limiter 50 100 0 ",  # a trailing space
        b"limiter  50 100 0",
        b"limiter nan 100 0",
        b"limiter 50 inf 0",
        b"limiter -1 100 0",
        b"limiter 50 100 nan",
        b"limiter 50 100 x",
        b"limiter 0 100 0",
        b"limiters 50 100 0",
        b"Limiter 50 100 0",
    ],
)
def test_limiter_look_alikes_are_semaphores(data: bytes) -> None:
    assert shape(limit=1, data=data) == SEMAPHORE


def test_a_limiter_held_awaited_or_of_another_limit_is_a_semaphore() -> None:
    data = bucket_data(Bucket(5.0, 10.0, 0.0))
    assert shape(limit=1, data=data, owners=(READER,)) == SEMAPHORE
    assert shape(limit=1, data=data, waiters=(Ask(1),)) == SEMAPHORE
    assert shape(limit=2, data=data) == SEMAPHORE
    assert shape(limit=MAX_COUNT, ephemeral=True, data=data, owners=(READER,)) != LimiterKind(
        5.0, 10.0, 0.0
    )


# -- claims -----------------------------------------------------------------------------

CLAIM = ClaimRecord("a" * 32, 17, 1000.0, 60.0, 600.0, None, 3, b"host-a pid 42")


def test_a_claim_and_what_it_has_left_at_the_time_given() -> None:
    found = shape(limit=1, data=claim_data(CLAIM))
    assert found == ClaimKind(CLAIM)
    assert kind_text(found, 1010.0) == "claim: token 17, 9 min 50 s left (at least 50.0 s)"
    assert kind_text(found, 1070.0) == "claim: token 17, 8 min 50 s left"
    assert kind_text(found, 1600.0) == "claim: token 17, ended"  # (the store deletes it now)
    released = ClaimKind(dataclasses.replace(CLAIM, released_at=1020.0))
    assert kind_text(released, 1030.0) == "claim: token 17, released, 30.0 s left"
    assert kind_json(released) == {
        "kind": "claim",
        "id": "a" * 32,
        "token": 17,
        "granted_at": 1000.0,
        "at_least": 60.0,
        "at_most": 600.0,
        "released_at": 1020.0,
        "session_id": 3,
        "data": "host-a pid 42",
        "ends_at": 1060.0,
    }
    assert kind_json(released, 1030.0)["left"] == 30.0
    assert kind_json(found, 1000.0)["left"] == 600.0


@pytest.mark.parametrize(
    "data",
    [
        claim_data(CLAIM) + b" ",
        claim_data(CLAIM).replace(b"claim ", b"claims "),
        claim_data(CLAIM).replace(b" 17 ", b" x "),
        claim_data(dataclasses.replace(CLAIM, data=b"")).replace(b" -", b" --"),
        b"claim " + b"a" * 32,
    ],
)
def test_claim_look_alikes_are_semaphores(data: bytes) -> None:
    assert shape(limit=1, data=data) == SEMAPHORE


def test_a_claim_held_awaited_or_of_another_limit_is_a_semaphore() -> None:
    data = claim_data(CLAIM)
    assert shape(limit=1, data=data, owners=(READER,)) == SEMAPHORE
    assert shape(limit=1, data=data, waiters=(Ask(1),)) == SEMAPHORE
    assert shape(limit=2, data=data) == SEMAPHORE


# -- barriers ---------------------------------------------------------------------------


def test_a_barrier_counts_the_arrivals_after_the_last_round() -> None:
    four = parties_data(4)
    owners = (Hold(1, 7, four), Hold(1, 9, four), Hold(1, 10, four))
    found = shape(limit=MAX_COUNT, data=b"7 7", owners=owners)
    # Token 7 was let through by round 7 (it still holds its arrival): not counted.
    assert found == BarrierKind(rounds=7, last=7, arrived=2, parties=4)
    assert kind_text(found, 0.0) == "barrier: 2/4 arrived, 7 rounds passed"
    assert kind_json(found) == {
        "kind": "barrier",
        "rounds": 7,
        "last": 7,
        "arrived": 2,
        "parties": 4,
    }


def test_a_new_barrier_and_arrivals_that_do_not_say_their_parties() -> None:
    assert shape(limit=MAX_COUNT, data=b"0 0") == BarrierKind(0, 0, 0, None)
    # An older client's arrival said "waiting": the parties are not known.
    older = shape(limit=MAX_COUNT, data=b"1 3", owners=(Hold(1, 4, b"waiting"),))
    assert older == BarrierKind(1, 3, 1, None)
    assert kind_text(older, 0.0) == "barrier: 1/? arrived, 1 round passed"
    # Two numbers of parties at once: not said either.
    mixed = (Hold(1, 4, parties_data(2)), Hold(1, 5, parties_data(3)))
    assert shape(limit=MAX_COUNT, data=b"0 0", owners=mixed) == BarrierKind(0, 0, 2, None)
    assert shape(limit=MAX_COUNT, data=b"0 0", owners=(Hold(1, 4, b"parties 0"),)) == (
        BarrierKind(0, 0, 1, None)
    )


@pytest.mark.parametrize(
    "data", [b"3", b"3 5 7", b"3  5", b" 3 5", b"+3 5", b"-1 5", b"03 5", b"3 5\n", b"3 x", b""]
)
def test_barrier_look_alikes_are_semaphores(data: bytes) -> None:
    assert shape(limit=MAX_COUNT, data=data) == SEMAPHORE


def test_a_barrier_shape_with_a_bigger_hold_or_a_waiter_or_ephemeral_is_not_one() -> None:
    assert shape(limit=MAX_COUNT, data=b"0 0", owners=(Hold(2, 3),)) == SEMAPHORE
    assert shape(limit=MAX_COUNT, data=b"0 0", waiters=(Ask(1),)) == SEMAPHORE
    assert shape(limit=5, data=b"0 0") == SEMAPHORE
    assert not isinstance(
        shape(limit=MAX_COUNT, ephemeral=True, data=b"0 0", owners=(READER,)), BarrierKind
    )


# -- counters and latches ---------------------------------------------------------------


@pytest.mark.parametrize("value", [0, 41, -7, 2**63 - 1, -(2**63)])
def test_a_counter_or_latch_is_its_value(value: int) -> None:
    found = shape(limit=1, data=str(value).encode())
    assert found == CounterKind(value)
    assert kind_json(found) == {"kind": "counter", "value": value}
    assert kind_text(found, 0.0) == f"counter or latch: {value}"


@pytest.mark.parametrize(
    "data",
    [
        b"+3",
        b"03",
        b"-0",
        b"3.0",
        b"3 ",
        b" 3",
        b"3_0",
        "٣".encode(),
        b"9223372036854775808",  # 2**63: past 64 signed bits
        b"-9223372036854775809",
        b"",
        b"-",
        b"x",
    ],
)
def test_counter_look_alikes_are_semaphores(data: bytes) -> None:
    assert shape(limit=1, data=data) == SEMAPHORE


def test_a_counter_held_awaited_or_of_another_limit_is_a_semaphore() -> None:
    assert shape(limit=1, data=b"5", owners=(READER,)) == SEMAPHORE
    assert shape(limit=1, data=b"5", waiters=(Ask(1),)) == SEMAPHORE
    assert shape(limit=3, data=b"5") == SEMAPHORE


# -- groups -------------------------------------------------------------------------------


def member(
    token: int, member_id: str, *, state: str = "joined", weight: float | None = None
) -> Hold:
    record = member_record(member_id, b"data", weight=weight, state=state)  # type: ignore[arg-type]
    return Hold(1, token, record)


def test_a_group_names_its_members_in_join_order() -> None:
    owners = (
        member(3, "worker-1"),
        member(5, "worker-2", weight=2),
        member(6, "worker-1"),  # a second record of worker-1: not the member
        member(7, "worker-3", state="joining"),
        Hold(1, 8, b"not a member"),
    )
    found = shape(limit=1000, data=GROUP_DATA, owners=owners)
    assert found == GroupKind(("worker-1", "worker-2"), 1, 1000, 1)
    assert kind_text(found, 0.0) == (
        "group: 2 of at most 1000 members (worker-1, worker-2), 1 in its partition, 1 joining"
    )
    assert kind_json(found) == {
        "kind": "group",
        "members": 2,
        "ids": ["worker-1", "worker-2"],
        "joining": 1,
        "max_members": 1000,
        "partition_members": 1,
    }


def test_an_empty_group_and_a_large_one() -> None:
    empty = shape(limit=5, data=GROUP_DATA)
    assert empty == GroupKind((), 0, 5, 0)
    assert kind_text(empty, 0.0) == "group: 0 of at most 5 members"
    many = shape(limit=100, data=GROUP_DATA, owners=tuple(member(t, f"m{t}") for t in range(12)))
    assert kind_text(many, 0.0) == (
        "group: 12 of at most 100 members (m0, m1, m2, m3, m4, m5, m6, m7, m8, m9, 2 more)"
    )


def test_group_look_alikes_are_not_groups() -> None:
    owners = (member(3, "a"),)
    ephemeral = shape(limit=MAX_COUNT, ephemeral=True, data=GROUP_DATA, owners=owners)
    assert not isinstance(ephemeral, GroupKind)  # (one reader's hold: an rwlock)
    for data in (b"group ", b"Group", b"groups", b""):
        assert not isinstance(shape(limit=10, data=data, owners=owners), GroupKind)


# -- the classifier agrees with the recipes' own parsers, and never raises ---------------


@given(
    data=st.one_of(
        st.just(GROUP_DATA),
        st.binary(max_size=40),
        st.from_regex(rb"[-+ 0-9]{1,12}", fullmatch=True),
        st.from_regex(rb"[-+0-9]{1,6} [-+0-9]{1,6}", fullmatch=True),
        st.from_regex(
            rb"limiter [-+.0-9a-z]{1,6} [-+.0-9a-z]{1,6} [-+.0-9a-z]{1,6}", fullmatch=True
        ),
        st.from_regex(rb"claim [0-9a-f]{32}( [-.0-9a-f]{1,4}){6} [-0-9a-f]{1,4}", fullmatch=True),
    ),
    limit=st.sampled_from([1, 2, MAX_COUNT]),
    ephemeral=st.booleans(),
    counts=st.lists(st.sampled_from([1, 2, MAX_COUNT]), max_size=4),
    owner_data=st.lists(
        st.one_of(
            st.just(b"parties 2"),
            st.binary(max_size=12),
            st.builds(
                lambda i, state, weight: member_record(i, b"", weight=weight, state=state),
                st.sampled_from(["a", "b", "c d"]),
                st.sampled_from(["joining", "joined"]),
                st.sampled_from([None, 1, 2.5]),
            ),
        ),
        min_size=4,
        max_size=4,
    ),
)
def test_any_shape_is_classified_without_raising_and_as_the_recipes_read_it(
    data: bytes, limit: int, ephemeral: bool, counts: list[int], owner_data: list[bytes]
) -> None:
    owners = tuple(
        Hold(count, token, owner_data[token - 1]) for token, count in enumerate(counts, 1)
    )
    found = shape(limit=limit, ephemeral=ephemeral, data=data, owners=owners)
    if isinstance(found, GroupKind):
        assert found.members == tuple(members_of(owners))  # as the group recipe reads them
    if not ephemeral and data == GROUP_DATA:
        assert isinstance(found, GroupKind)
    if isinstance(found, CounterKind):
        assert counter_value("s", data) == found.value  # the counter reads the same value
    if isinstance(found, BarrierKind):
        assert barrier_progress("s", data) == (found.rounds, found.last)
        if all(d == b"parties 2" for d in owner_data[: len(counts)]) and found.arrived:
            assert found.parties == 2
    if isinstance(found, LimiterKind):
        bucket = parse_bucket("s", data)
        assert (bucket.rate, bucket.burst, bucket.tat) == (found.rate, found.burst, found.tat)
    if isinstance(found, ClaimKind):
        assert parse_claim("s", data) == found.record  # the claim's own codec reads the same
    if not ephemeral and limit == 1 and not owners and data.startswith(b"claim "):
        try:
            parse_claim("s", data)
        except PreconditionFailedError:
            assert not isinstance(found, ClaimKind)
        else:
            assert isinstance(found, ClaimKind)
    if not ephemeral and limit == 1 and not owners and data:
        # What the counter recipe accepts as a value is a counter here, and only that
        # (a limiter's data is its own kind).
        try:
            counter_value("s", data)
        except PreconditionFailedError:
            assert not isinstance(found, CounterKind)
        else:
            assert isinstance(found, CounterKind)
    assert isinstance(kind_text(found, 0.0), str)
    assert kind_json(found, 0.0)["kind"] == getattr(found, "kind", None)


# -- the real recipes, on memory:// -------------------------------------------------------


async def test_each_recipe_is_classified_from_what_it_wrote() -> None:
    async with tenure.connect("memory://") as client:
        await client.create_node("app")
        async with (
            client.session("app") as one,
            client.session("app") as two,
            client.session("app") as three,
        ):

            async def kind(name: str) -> Kind:
                found = await one.semaphore(name).describe(owners=True, waiters=True)
                return classify_description(found)

            readers = [await s.rwlock("rw").read() for s in (one, three)]
            writing = asyncio.ensure_future(two.rwlock("rw").write())
            await asyncio.sleep(0.05)
            assert await kind("rw") == RWLockKind(2, False, 0, 1)
            for reader in readers:
                await reader.release()
            await (await writing).release()

            async with one.mutex("m"):
                assert await kind("m") == PlainKind("mutex")

            limiter = one.rate_limiter("api", rate=10.0, burst=20)
            await limiter.acquire(5)
            found = await kind("api")
            assert isinstance(found, LimiterKind)
            assert (found.rate, found.burst) == (10.0, 20.0)
            assert kind_json(found, found.tat - 0.5)["available"] == 15.0

            counter = one.counter("jobs")
            await counter.add(41)
            assert await kind("jobs") == CounterKind(41)
            latch = one.latch("warmup", count=3)
            await latch.count_down()
            assert await kind("warmup") == CounterKind(2)

            barrier = one.barrier("stage", parties=3)
            waiting = [
                asyncio.ensure_future(s.barrier("stage", parties=3).wait(timeout=5))
                for s in (one, two)
            ]
            await asyncio.sleep(0.05)
            assert await kind("stage") == BarrierKind(0, 0, 2, 3)
            await barrier.wait(timeout=5)  # the third: the round goes
            await asyncio.gather(*waiting)
            found = await kind("stage")
            assert isinstance(found, BarrierKind)
            assert (found.rounds, found.arrived, found.parties) == (1, 0, None)

            await one.semaphore("pool").create(limit=3, data=b"41")
            assert await kind("pool") == SEMAPHORE

            await one.group("workers", max_members=10).join("w-1")
            part = await two.group("workers").partition("w-2", weight=2)
            assert await kind("workers") == GroupKind(("w-1", "w-2"), 0, 10, 1)
            await part.leave()
            assert await kind("workers") == GroupKind(("w-1",), 0, 10, 0)
            claim = await one.claim("nightly", at_least=60.0, at_most=600.0, data=b"host-a")
            assert claim is not None
            found = await kind("nightly")
            assert isinstance(found, ClaimKind)
            assert (found.record.id, found.record.token) == (claim.id, claim.token)
            assert found.left(claim.granted_at + 1.0) == 599.0
