"""Semaphores: create/update/delete, ephemeral ones, acquire validation, FIFO, tokens."""

from __future__ import annotations

import math

import pytest

from tenure._core import (
    MAX_COUNT,
    Acquire,
    AcquireStatus,
    AlterNode,
    CancelAcquire,
    CloseSession,
    Command,
    CreateNode,
    CreateSemaphore,
    DeleteSemaphore,
    DescribeSemaphore,
    DropNode,
    Engine,
    NodeConfig,
    Release,
    Renew,
    SemaphoreDescription,
    SwapSemaphoreData,
    UpdateSemaphore,
)
from tenure._core.invariants import check_invariants
from tenure._core.values import MAX_NAME_BYTES
from tenure.errors import (
    AlreadyExistsError,
    ErrorCode,
    InvalidArgumentError,
    LimitExceededError,
    NotFoundError,
    PreconditionFailedError,
    SessionExpiredError,
)

from .support import (
    acquire,
    create_semaphore,
    describe,
    failed,
    granted,
    lost,
    make_engine,
    open_session,
    owner,
    owners_of,
    settled,
    snapshot,
    waiters_of,
)

BUSY, GRANTED, QUEUED = AcquireStatus.BUSY, AcquireStatus.GRANTED, AcquireStatus.QUEUED

# -- persistent semaphores ----------------------------------------------------------


def test_create_and_describe_persistent_semaphore():
    engine = make_engine()
    s = open_session(engine)
    create_semaphore(engine, s, "p", 3, data=b"cfg")
    assert describe(engine, s, "p") == SemaphoreDescription(
        name="p", limit=3, count=0, data=b"cfg", ephemeral=False
    )


def test_create_existing_semaphore_fails_and_keeps_it():
    engine = make_engine()
    s = open_session(engine)
    create_semaphore(engine, s, "p", 3, data=b"one")
    with pytest.raises(AlreadyExistsError):
        create_semaphore(engine, s, "p", 5, data=b"two")
    assert (describe(engine, s, "p").limit, describe(engine, s, "p").data) == (3, b"one")


def test_create_over_an_ephemeral_semaphore_fails():
    engine = make_engine()
    s = open_session(engine)
    acquire(engine, s, "e", ephemeral=True)
    with pytest.raises(AlreadyExistsError):
        create_semaphore(engine, s, "e", 5)
    assert describe(engine, s, "e").ephemeral


def test_persistent_semaphore_outlives_its_holders():
    engine = make_engine()
    s = open_session(engine)
    create_semaphore(engine, s, "p", 1)
    acquire(engine, s, "p")
    engine.apply(Release(s, "p"), 1.0)
    engine.apply(CloseSession(s), 2.0)
    t = open_session(engine, now=3.0)
    assert describe(engine, t, "p").count == 0


@pytest.mark.parametrize(
    "limit",
    [0, -1, True, False, 2**64, 1.0, "3", None],
)
def test_invalid_limit_is_rejected(limit):
    engine = make_engine()
    s = open_session(engine)
    with pytest.raises(InvalidArgumentError, match="limit must be"):
        create_semaphore(engine, s, "p", limit)
    assert engine.nodes["n"].semaphores == {}


def test_largest_limit_is_accepted():
    engine = make_engine()
    s = open_session(engine)
    create_semaphore(engine, s, "p", MAX_COUNT)
    assert acquire(engine, s, "p", MAX_COUNT).status is GRANTED
    assert describe(engine, s, "p").count == 2**64 - 1


BAD_NAMES = [
    pytest.param("", id="empty"),
    pytest.param("a\x01b", id="control"),
    pytest.param("line\n", id="newline"),
    pytest.param("x" * (MAX_NAME_BYTES + 1), id="too-long"),
    pytest.param("ü" * (MAX_NAME_BYTES // 2 + 1), id="too-long-utf8"),
    pytest.param(7, id="int"),
    pytest.param(None, id="none"),
]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_bad_semaphore_name_is_rejected_everywhere(name):
    engine = make_engine()
    s = open_session(engine)
    commands: list[Command[object]] = [
        CreateSemaphore(s, name, 1),
        Acquire(s, name, 1, 1, ephemeral=True),
        DescribeSemaphore(s, name),
        DescribeSemaphore(s, name, watch_data=True),
        UpdateSemaphore(s, name, b"x"),
        DeleteSemaphore(s, name),
    ]
    for command in commands:
        with pytest.raises(InvalidArgumentError, match="name"):
            engine.apply(command, 0.0)
    assert engine.nodes["n"].semaphores == {}
    assert engine.sessions[s].watches == set()


def test_longest_semaphore_name_is_accepted():
    engine = make_engine()
    s = open_session(engine)
    name = "ü" * (MAX_NAME_BYTES // 2)
    create_semaphore(engine, s, name, 1)
    assert describe(engine, s, name).name == name


def test_max_semaphores_counts_persistent_and_ephemeral():
    engine = make_engine(NodeConfig(max_semaphores=2))
    s = open_session(engine)
    create_semaphore(engine, s, "p", 1)
    acquire(engine, s, "e", ephemeral=True)
    before = snapshot(engine)
    with pytest.raises(LimitExceededError, match="max_semaphores"):
        create_semaphore(engine, s, "q", 1)
    with pytest.raises(LimitExceededError, match="max_semaphores"):
        acquire(engine, s, "f", ephemeral=True)
    assert snapshot(engine) == before
    # Existing semaphores can still be acquired at the limit.
    assert acquire(engine, s, "p").status is GRANTED
    engine.apply(Release(s, "e"), 0.0)  # the ephemeral one vanishes: room for one more
    create_semaphore(engine, s, "q", 1)


def test_max_data_size_applies_to_semaphore_and_owner_data():
    engine = make_engine(NodeConfig(max_data_size=4))
    s = open_session(engine)
    create_semaphore(engine, s, "p", 2, data=b"1234")  # exactly at the limit is fine
    with pytest.raises(LimitExceededError, match="max_data_size"):
        create_semaphore(engine, s, "q", 2, data=b"12345")
    with pytest.raises(LimitExceededError, match="max_data_size"):
        engine.apply(UpdateSemaphore(s, "p", b"12345"), 0.0)
    with pytest.raises(LimitExceededError, match="max_data_size"):
        acquire(engine, s, "p", data=b"12345")
    assert acquire(engine, s, "p", data=b"abcd").status is GRANTED
    desc = describe(engine, s, "p")
    assert desc.data == b"1234"
    assert [o.data for o in desc.owners] == [b"abcd"]
    assert "q" not in engine.nodes["n"].semaphores


@pytest.mark.parametrize("data", ["text", 5, None], ids=["str", "int", "none"])
def test_data_must_be_bytes(data):
    engine = make_engine()
    s = open_session(engine)
    with pytest.raises(InvalidArgumentError):
        create_semaphore(engine, s, "p", 1, data=data)
    create_semaphore(engine, s, "p", 1)
    with pytest.raises(InvalidArgumentError):
        engine.apply(UpdateSemaphore(s, "p", data), 0.0)
    with pytest.raises(InvalidArgumentError):
        acquire(engine, s, "p", data=data)
    assert describe(engine, s, "p").count == 0


def test_bytes_like_data_is_stored_as_bytes():
    engine = make_engine()
    s = open_session(engine)
    create_semaphore(engine, s, "p", 1, data=bytearray(b"ba"))  # type: ignore[arg-type]
    acquire(engine, s, "p", data=memoryview(b"mv"))  # type: ignore[arg-type]
    desc = describe(engine, s, "p")
    assert type(desc.data) is bytes
    assert desc.data == b"ba"
    assert type(desc.owners[0].data) is bytes
    assert desc.owners[0].data == b"mv"


def test_update_replaces_data():
    engine = make_engine()
    s = open_session(engine)
    create_semaphore(engine, s, "p", 1, data=b"old")
    engine.apply(UpdateSemaphore(s, "p", b"new"), 1.0)
    assert describe(engine, s, "p").data == b"new"
    with pytest.raises(NotFoundError):
        engine.apply(UpdateSemaphore(s, "missing", b"x"), 1.0)


def test_delete_idle_semaphore():
    engine = make_engine()
    s = open_session(engine)
    create_semaphore(engine, s, "p", 1)
    engine.apply(DeleteSemaphore(s, "p"), 1.0)
    with pytest.raises(NotFoundError):
        describe(engine, s, "p")
    with pytest.raises(NotFoundError):
        engine.apply(DeleteSemaphore(s, "p"), 1.0)
    create_semaphore(engine, s, "p", 2)  # the name is free again


def test_delete_fails_while_held_or_awaited_unless_forced():
    engine = make_engine()
    a = open_session(engine)
    b = open_session(engine)
    create_semaphore(engine, a, "held", 1)
    create_semaphore(engine, a, "awaited", 1)
    acquire(engine, a, "held")
    acquire(engine, a, "awaited")
    acquire(engine, b, "awaited")
    engine.apply(Release(a, "awaited"), 0.0)  # b now holds "awaited"
    acquire(engine, a, "awaited")  # and a waits for it
    engine.take_effects()
    before = snapshot(engine)
    for name in ("held", "awaited"):
        with pytest.raises(PreconditionFailedError, match="force"):
            engine.apply(DeleteSemaphore(b, name), 1.0)
    assert snapshot(engine) == before
    assert engine.take_effects() == []


def test_forced_delete_fails_owners_and_waiters():
    engine = make_engine()
    a = open_session(engine)
    b = open_session(engine)
    c = open_session(engine)
    create_semaphore(engine, a, "p", 2)
    token_a = acquire(engine, a, "p").token
    token_b = acquire(engine, b, "p").token
    acquire(engine, c, "p", 2, request_id=33, timeout=10.0)
    engine.take_effects()
    engine.apply(DeleteSemaphore(c, "p", force=True), 1.0)
    effects = settled(engine)
    assert sorted((e.session_id, e.token, e.code) for e in lost(effects)) == [
        (a, token_a, ErrorCode.LEASE_LOST),
        (b, token_b, ErrorCode.LEASE_LOST),
    ]
    assert [(e.session_id, e.request_id, e.code) for e in failed(effects)] == [
        (c, 33, ErrorCode.NOT_FOUND)
    ]
    assert "p" not in engine.nodes["n"].semaphores
    assert engine.next_deadline() is None  # c's timeout is stale
    # Their sessions forgot the semaphore.
    assert engine.apply(Release(a, "p"), 1.0) is False
    with pytest.raises(NotFoundError):
        acquire(engine, b, "p")
    engine.tick(20.0)
    assert engine.take_effects() == []


def test_recreated_semaphore_starts_fresh():
    engine = make_engine()
    a = open_session(engine)
    create_semaphore(engine, a, "p", 1)
    old = acquire(engine, a, "p").token
    engine.apply(DeleteSemaphore(a, "p", force=True), 0.0)
    create_semaphore(engine, a, "p", 1)
    result = acquire(engine, a, "p")
    assert result.status is GRANTED
    assert result.token is not None
    assert old is not None
    assert result.token > old


# -- ephemeral semaphores -----------------------------------------------------------


def test_acquire_missing_semaphore_without_ephemeral_is_not_found():
    engine = make_engine()
    s = open_session(engine)
    before = snapshot(engine)
    with pytest.raises(NotFoundError):
        acquire(engine, s, "nope")
    assert snapshot(engine) == before


def test_ephemeral_semaphore_appears_on_first_acquire():
    engine = make_engine()
    s = open_session(engine)
    result = acquire(engine, s, "e", 5, ephemeral=True)
    assert result.status is GRANTED
    desc = describe(engine, s, "e")
    assert (desc.limit, desc.count, desc.ephemeral, desc.data) == (MAX_COUNT, 5, True, b"")


def test_ephemeral_semaphore_vanishes_with_last_owner():
    engine = make_engine()
    a = open_session(engine)
    b = open_session(engine)
    acquire(engine, a, "e", ephemeral=True)
    acquire(engine, b, "e", ephemeral=True)
    engine.apply(Release(a, "e"), 1.0)
    assert owners_of(engine, b, "e") == [(b, 1)]
    engine.apply(Release(b, "e"), 2.0)
    assert "e" not in engine.nodes["n"].semaphores
    check_invariants(engine)


def test_ephemeral_semaphore_stays_while_someone_waits():
    engine = make_engine()
    a = open_session(engine)
    b = open_session(engine)
    acquire(engine, a, "e", MAX_COUNT, ephemeral=True)  # exclusive, like a mutex
    assert acquire(engine, b, "e", MAX_COUNT, ephemeral=True).status is QUEUED
    engine.apply(Release(a, "e"), 1.0)  # b is served; the semaphore stays
    assert owners_of(engine, b, "e") == [(b, MAX_COUNT)]
    acquire(engine, a, "e", MAX_COUNT, ephemeral=True)
    engine.apply(Release(a, "e"), 2.0)  # the last waiter leaves
    assert "e" in engine.nodes["n"].semaphores
    engine.apply(Release(b, "e"), 3.0)  # and then the last owner
    assert "e" not in engine.nodes["n"].semaphores


def test_ephemeral_semaphore_vanishes_when_the_last_lease_expires():
    engine = make_engine(NodeConfig(default_lease=1.0))
    a = open_session(engine)
    b = open_session(engine)
    acquire(engine, a, "e", MAX_COUNT, ephemeral=True)
    acquire(engine, b, "e", MAX_COUNT, ephemeral=True, timeout=5.0)
    engine.tick(1.0)  # a's lease ends; b is served
    assert owners_of(engine, b, "e") == [(b, MAX_COUNT)]
    engine.tick(2.0)  # and b's lease ends too
    assert "e" not in engine.nodes["n"].semaphores
    check_invariants(engine)


def test_ephemeral_flag_on_an_existing_semaphore_just_acquires_it():
    engine = make_engine()
    s = open_session(engine)
    create_semaphore(engine, s, "p", 2)
    acquire(engine, s, "p", 2, ephemeral=True)
    desc = describe(engine, s, "p")
    assert (desc.limit, desc.ephemeral, desc.count) == (2, False, 2)
    with pytest.raises(LimitExceededError):
        acquire(engine, s, "p", 3, ephemeral=True)


# -- acquire validation -------------------------------------------------------------


@pytest.mark.parametrize("count", [0, -1, True, False, 2**64, 1.5, "1", None])
def test_invalid_count_is_rejected(count):
    engine = make_engine()
    s = open_session(engine)
    create_semaphore(engine, s, "p", 3)
    before = snapshot(engine)
    with pytest.raises(InvalidArgumentError, match="count"):
        acquire(engine, s, "p", count)
    with pytest.raises(InvalidArgumentError, match="count"):
        acquire(engine, s, "e", count, ephemeral=True)
    assert snapshot(engine) == before


def test_count_above_the_limit_is_a_limit_error():
    engine = make_engine()
    s = open_session(engine)
    create_semaphore(engine, s, "p", 3)
    before = snapshot(engine)
    with pytest.raises(LimitExceededError, match="limit"):
        acquire(engine, s, "p", 4)
    with pytest.raises(LimitExceededError):
        acquire(engine, s, "p", 4, timeout=0)
    assert snapshot(engine) == before


@pytest.mark.parametrize("timeout", [math.nan, math.inf, -math.inf, -1.0, -1e-9, True, "1"])
def test_invalid_timeout_is_rejected(timeout):
    engine = make_engine()
    s = open_session(engine)
    create_semaphore(engine, s, "p", 1)
    before = snapshot(engine)
    with pytest.raises(InvalidArgumentError, match="timeout"):
        acquire(engine, s, "p", timeout=timeout)
    assert snapshot(engine) == before


@pytest.mark.parametrize("ttl", [0, 0.0, -1.0, math.nan, math.inf, True])
def test_invalid_lease_ttl_is_rejected(ttl):
    engine = make_engine()
    s = open_session(engine)
    create_semaphore(engine, s, "p", 1)
    before = snapshot(engine)
    with pytest.raises(InvalidArgumentError, match="lease_ttl"):
        acquire(engine, s, "p", lease_ttl=ttl)
    assert snapshot(engine) == before


# -- granting, try-acquire and FIFO -------------------------------------------------


def test_acquire_grants_when_it_fits():
    engine = make_engine()
    a = open_session(engine)
    b = open_session(engine)
    create_semaphore(engine, a, "p", 3)
    ra = acquire(engine, a, "p", 2, data=b"A")
    rb = acquire(engine, b, "p", 1, data=b"B")
    assert (ra.status, ra.count, ra.lease_ttl) == (GRANTED, 2, None)
    assert (rb.status, rb.count) == (GRANTED, 1)
    desc = describe(engine, a, "p")
    assert desc.count == 3
    assert [(o.session_id, o.count, o.data, o.token) for o in desc.owners] == [
        (a, 2, b"A", ra.token),
        (b, 1, b"B", rb.token),
    ]
    assert settled(engine) == []  # immediate grants are replies, not effects


def test_try_acquire_returns_busy_without_queueing():
    engine = make_engine()
    a = open_session(engine)
    b = open_session(engine)
    create_semaphore(engine, a, "p", 1)
    acquire(engine, a, "p")
    before = snapshot(engine)
    result = acquire(engine, b, "p", timeout=0)
    assert result.status is BUSY
    assert result.token is None
    assert snapshot(engine) == before
    assert engine.take_effects() == []
    engine.apply(Release(a, "p"), 1.0)
    assert engine.take_effects() == []  # nothing was waiting
    assert owners_of(engine, a, "p") == []


def test_try_acquire_grants_when_free():
    engine = make_engine()
    s = open_session(engine)
    create_semaphore(engine, s, "p", 1)
    assert acquire(engine, s, "p", timeout=0).status is GRANTED


def test_try_acquire_is_busy_while_anyone_queues_even_if_it_fits():
    engine = make_engine()
    a, b, c = (open_session(engine) for _ in range(3))
    create_semaphore(engine, a, "p", 2)
    acquire(engine, a, "p", 1)
    assert acquire(engine, b, "p", 2).status is QUEUED
    assert acquire(engine, c, "p", 1, timeout=0).status is BUSY
    assert waiters_of(engine, a, "p") == [(b, 2)]


def test_new_arrival_queues_behind_a_waiter_even_if_it_fits():
    engine = make_engine()
    a, b, c = (open_session(engine) for _ in range(3))
    create_semaphore(engine, a, "p", 3)
    acquire(engine, a, "p", 2)
    assert acquire(engine, b, "p", 3, request_id=2).status is QUEUED
    assert acquire(engine, c, "p", 1, request_id=3).status is QUEUED  # 1 is free, no barging
    assert waiters_of(engine, a, "p") == [(b, 3), (c, 1)]
    assert owners_of(engine, a, "p") == [(a, 2)]
    check_invariants(engine)


def test_large_head_blocks_smaller_waiters_until_it_is_served():
    engine = make_engine()
    a, b, c, d = (open_session(engine) for _ in range(4))
    create_semaphore(engine, a, "p", 3)
    acquire(engine, a, "p", 1)
    acquire(engine, d, "p", 1)
    acquire(engine, b, "p", 3, request_id=2)  # head: needs everything
    acquire(engine, c, "p", 1, request_id=3)
    engine.take_effects()
    engine.apply(Release(d, "p"), 1.0)  # 2 free: c would fit, but b is ahead
    assert settled(engine) == []
    assert waiters_of(engine, a, "p") == [(b, 3), (c, 1)]
    engine.apply(Release(a, "p"), 2.0)  # 3 free: b is served, c still waits
    assert [(e.session_id, e.request_id, e.count) for e in granted(settled(engine))] == [(b, 2, 3)]
    assert waiters_of(engine, a, "p") == [(c, 1)]
    engine.apply(Release(b, "p"), 3.0)
    assert [(e.session_id, e.request_id) for e in granted(settled(engine))] == [(c, 3)]


def test_one_release_serves_several_waiters_in_order():
    engine = make_engine()
    a, b, c, d = (open_session(engine) for _ in range(4))
    create_semaphore(engine, a, "p", 3)
    acquire(engine, a, "p", 3)
    acquire(engine, b, "p", 1, request_id=2)
    acquire(engine, c, "p", 2, request_id=3)
    acquire(engine, d, "p", 1, request_id=4)  # will not fit after b and c
    engine.take_effects()
    engine.apply(Release(a, "p"), 1.0)
    grants = granted(settled(engine))
    assert [(g.session_id, g.request_id) for g in grants] == [(b, 2), (c, 3)]
    assert grants[0].token < grants[1].token
    assert waiters_of(engine, a, "p") == [(d, 1)]


def test_waiter_data_becomes_owner_data():
    engine = make_engine()
    a = open_session(engine)
    b = open_session(engine)
    create_semaphore(engine, a, "p", 1)
    acquire(engine, a, "p")
    acquire(engine, b, "p", data=b"waiting-b")
    assert [w.data for w in describe(engine, a, "p").waiters] == [b"waiting-b"]
    engine.apply(Release(a, "p"), 1.0)
    assert owner(engine, a, "p", b).data == b"waiting-b"


# -- re-acquire: update in place, upgrade ---------------------------------------------


def test_reacquire_with_fewer_tokens_updates_in_place_keeping_the_token():
    engine = make_engine()
    a = open_session(engine)
    create_semaphore(engine, a, "p", 3)
    first = acquire(engine, a, "p", 3, data=b"v1")
    again = acquire(engine, a, "p", 2, data=b"v2")
    assert (again.status, again.token, again.count) == (GRANTED, first.token, 2)
    info = owner(engine, a, "p", a)
    assert (info.count, info.data, info.token) == (2, b"v2", first.token)
    assert describe(engine, a, "p").count == 2
    same = acquire(engine, a, "p", 2, data=b"v2")  # restating is fine too
    assert same.token == first.token
    assert settled(engine) == []


def test_shrinking_in_place_skips_the_queue_and_serves_the_head():
    engine = make_engine()
    a = open_session(engine)
    b = open_session(engine)
    create_semaphore(engine, a, "p", 3)
    acquire(engine, a, "p", 3)
    acquire(engine, b, "p", 2, request_id=5)
    engine.take_effects()
    assert acquire(engine, a, "p", 1).status is GRANTED  # not queued behind b
    assert [(e.session_id, e.request_id) for e in granted(settled(engine))] == [(b, 5)]
    assert sorted(owners_of(engine, a, "p")) == [(a, 1), (b, 2)]


def test_shrinking_in_place_works_at_the_waiter_limit():
    engine = make_engine(NodeConfig(max_waiters=1))
    a = open_session(engine)
    b = open_session(engine)
    create_semaphore(engine, a, "p", 3)
    acquire(engine, a, "p", 3)
    acquire(engine, b, "p", 3)
    assert acquire(engine, a, "p", 2).status is GRANTED


def test_upgrade_that_fits_at_once_gets_a_new_token():
    engine = make_engine()
    a = open_session(engine)
    create_semaphore(engine, a, "p", 3)
    first = acquire(engine, a, "p", 1)
    bigger = acquire(engine, a, "p", 3)
    assert bigger.status is GRANTED
    assert bigger.token is not None
    assert first.token is not None
    assert bigger.token > first.token
    assert owners_of(engine, a, "p") == [(a, 3)]
    assert owner(engine, a, "p", a).token == bigger.token


def test_upgrade_queues_keeping_the_old_hold_and_is_granted_with_a_new_token():
    engine = make_engine()
    a = open_session(engine)
    b = open_session(engine)
    create_semaphore(engine, a, "p", 3)
    old = acquire(engine, a, "p", 1, data=b"old").token
    acquire(engine, b, "p", 2)
    assert acquire(engine, a, "p", 3, request_id=9, data=b"new").status is QUEUED
    # While queued, the old hold stays, with its token.
    assert owner(engine, a, "p", a).token == old
    assert waiters_of(engine, a, "p") == [(a, 3)]
    assert describe(engine, a, "p").count == 3
    engine.apply(Release(b, "p"), 1.0)
    (grant,) = granted(settled(engine))
    assert (grant.session_id, grant.request_id, grant.count) == (a, 9, 3)
    assert old is not None
    assert grant.token > old
    info = owner(engine, a, "p", a)
    assert (info.count, info.data, info.token) == (3, b"new", grant.token)
    assert describe(engine, a, "p").count == 3


def test_owners_stay_in_grant_order_after_an_upgrade():
    # SemaphoreDescription: "owners are in grant order". An upgrade is a new grant
    # (new, larger token), so it belongs after every earlier grant; today the
    # upgraded owner keeps the place of its old hold (Semaphore.set_owner).
    engine = make_engine()
    a, b = open_session(engine), open_session(engine)
    create_semaphore(engine, a, "p", 3)
    acquire(engine, a, "p", 1)
    acquire(engine, b, "p", 1)
    upgraded = acquire(engine, a, "p", 2)
    assert upgraded.status is GRANTED
    owners = describe(engine, a, "p").owners
    assert [o.token for o in owners] == sorted(o.token for o in owners)
    assert [o.session_id for o in owners] == [b, a]


def test_upgrade_waits_its_turn_behind_earlier_waiters():
    engine = make_engine()
    a, b = open_session(engine), open_session(engine)
    create_semaphore(engine, a, "p", 2)
    acquire(engine, a, "p", 1)
    acquire(engine, b, "p", 1)
    c = open_session(engine)
    acquire(engine, c, "p", 1, request_id=3)  # queued first
    acquire(engine, a, "p", 2, request_id=4)  # upgrade queued behind c
    assert waiters_of(engine, a, "p") == [(c, 1), (a, 2)]
    engine.take_effects()
    engine.apply(Release(b, "p"), 1.0)
    assert [(g.session_id, g.request_id) for g in granted(settled(engine))] == [(c, 3)]


def test_timed_out_upgrade_keeps_the_old_hold():
    engine = make_engine()
    a, b = open_session(engine), open_session(engine)
    create_semaphore(engine, a, "p", 2)
    old = acquire(engine, a, "p", 1).token
    acquire(engine, b, "p", 1)
    acquire(engine, a, "p", 2, request_id=4, timeout=3.0)
    engine.take_effects()
    engine.tick(3.0)
    assert [(e.request_id, e.code) for e in failed(settled(engine))] == [(4, ErrorCode.TIMEOUT)]
    assert owner(engine, a, "p", a).token == old
    assert describe(engine, a, "p").count == 2


# -- supersede, release, cancel -----------------------------------------------------


def test_second_acquire_of_a_waiting_session_supersedes_the_first():
    engine = make_engine()
    a, b, c = (open_session(engine) for _ in range(3))
    create_semaphore(engine, a, "p", 2)
    acquire(engine, a, "p", 2)
    acquire(engine, b, "p", 2, request_id=1)
    acquire(engine, c, "p", 1, request_id=2)
    engine.take_effects()
    assert acquire(engine, b, "p", 1, request_id=3).status is QUEUED
    (cancelled,) = failed(settled(engine))
    assert (cancelled.session_id, cancelled.request_id, cancelled.code) == (
        b,
        1,
        ErrorCode.CANCELLED,
    )
    assert waiters_of(engine, a, "p") == [(c, 1), (b, 1)]  # b went to the back
    engine.apply(Release(a, "p"), 1.0)
    assert [(g.session_id, g.request_id) for g in granted(settled(engine))] == [(c, 2), (b, 3)]


def test_superseding_try_acquire_cancels_and_reports_busy():
    engine = make_engine()
    a, b = open_session(engine), open_session(engine)
    create_semaphore(engine, a, "p", 1)
    acquire(engine, a, "p")
    acquire(engine, b, "p", request_id=1)
    engine.take_effects()
    assert acquire(engine, b, "p", request_id=2, timeout=0).status is BUSY
    assert [(e.request_id, e.code) for e in failed(settled(engine))] == [(1, ErrorCode.CANCELLED)]
    assert waiters_of(engine, a, "p") == []


def test_superseding_acquire_that_fits_is_granted_at_once():
    engine = make_engine()
    a, b = open_session(engine), open_session(engine)
    create_semaphore(engine, a, "p", 3)
    acquire(engine, a, "p", 2)
    acquire(engine, b, "p", 3, request_id=1)  # the only waiter
    engine.take_effects()
    assert acquire(engine, b, "p", 1, request_id=2).status is GRANTED
    assert [(e.request_id, e.code) for e in failed(settled(engine))] == [(1, ErrorCode.CANCELLED)]
    assert sorted(owners_of(engine, a, "p")) == [(a, 2), (b, 1)]


def test_release_of_a_waiter_cancels_it_and_serves_the_next():
    engine = make_engine()
    a, b, c = (open_session(engine) for _ in range(3))
    create_semaphore(engine, a, "p", 2)
    acquire(engine, a, "p", 1)
    acquire(engine, b, "p", 2, request_id=1)
    acquire(engine, c, "p", 1, request_id=2)
    engine.take_effects()
    assert engine.apply(Release(b, "p"), 1.0) is True
    effects = settled(engine)
    assert [(e.session_id, e.request_id, e.code) for e in failed(effects)] == [
        (b, 1, ErrorCode.CANCELLED)
    ]
    assert [(g.session_id, g.request_id) for g in granted(effects)] == [(c, 2)]


def test_release_of_an_upgrading_owner_drops_hold_and_waiter():
    engine = make_engine()
    a, b = open_session(engine), open_session(engine)
    create_semaphore(engine, a, "p", 2)
    acquire(engine, a, "p", 1)
    acquire(engine, b, "p", 1)
    acquire(engine, a, "p", 2, request_id=7)
    engine.take_effects()
    assert engine.apply(Release(a, "p"), 1.0) is True
    assert [(e.request_id, e.code) for e in failed(settled(engine))] == [(7, ErrorCode.CANCELLED)]
    assert owners_of(engine, b, "p") == [(b, 1)]
    assert waiters_of(engine, b, "p") == []


def test_release_with_nothing_to_release_returns_false():
    engine = make_engine()
    s = open_session(engine)
    create_semaphore(engine, s, "p", 1)
    before = snapshot(engine)
    assert engine.apply(Release(s, "p"), 0.0) is False
    assert engine.apply(Release(s, "missing"), 0.0) is False
    assert snapshot(engine) == before
    assert engine.take_effects() == []


def test_cancel_acquire_withdraws_only_the_named_request_and_keeps_the_hold():
    engine = make_engine()
    a, b = open_session(engine), open_session(engine)
    create_semaphore(engine, a, "p", 2)
    token = acquire(engine, a, "p", 1).token
    acquire(engine, b, "p", 1)
    acquire(engine, a, "p", 2, request_id=7)  # upgrade
    engine.take_effects()
    before = snapshot(engine)
    assert engine.apply(CancelAcquire(a, "p", 6), 1.0) is False  # not that request
    assert engine.apply(CancelAcquire(a, "missing", 7), 1.0) is False
    assert snapshot(engine) == before
    assert engine.apply(CancelAcquire(a, "p", 7), 1.0) is True
    assert [(e.session_id, e.request_id, e.code) for e in failed(settled(engine))] == [
        (a, 7, ErrorCode.CANCELLED)
    ]
    assert owner(engine, a, "p", a).token == token
    assert waiters_of(engine, a, "p") == []
    assert engine.apply(CancelAcquire(a, "p", 7), 1.0) is False


def test_cancel_acquire_of_head_serves_the_next_waiter():
    engine = make_engine()
    a, b, c = (open_session(engine) for _ in range(3))
    create_semaphore(engine, a, "p", 2)
    acquire(engine, a, "p", 1)
    acquire(engine, b, "p", 2, request_id=1)
    acquire(engine, c, "p", 1, request_id=2)
    engine.take_effects()
    assert engine.apply(CancelAcquire(b, "p", 1), 1.0) is True
    assert [(g.session_id, g.request_id) for g in granted(settled(engine))] == [(c, 2)]


def test_cancel_acquire_of_the_last_waiter_removes_an_idle_ephemeral_semaphore():
    engine = make_engine()
    a, b = open_session(engine), open_session(engine)
    acquire(engine, a, "e", MAX_COUNT, ephemeral=True)
    acquire(engine, b, "e", 1, ephemeral=True, request_id=3)
    engine.apply(Release(a, "e"), 0.0)  # b is granted
    assert engine.apply(CancelAcquire(b, "e", 3), 1.0) is False  # no longer queued
    engine.apply(Release(b, "e"), 1.0)
    assert "e" not in engine.nodes["n"].semaphores


# -- max_waiters --------------------------------------------------------------------


def test_max_waiters_is_enforced_and_named():
    engine = make_engine(NodeConfig(max_waiters=2))
    a, b, c, d = (open_session(engine) for _ in range(4))
    create_semaphore(engine, a, "p", 1)
    acquire(engine, a, "p")
    acquire(engine, b, "p")
    acquire(engine, c, "p")
    before = snapshot(engine)
    with pytest.raises(LimitExceededError, match="max_waiters"):
        acquire(engine, d, "p")
    assert snapshot(engine) == before
    # A try-acquire never queues, so it is not refused.
    assert acquire(engine, d, "p", timeout=0).status is BUSY
    # A waiting session may restate its acquire at the limit (it supersedes itself).
    assert acquire(engine, c, "p", timeout=5.0).status is QUEUED
    # An owner's upgrade would queue, so it is refused at the limit.
    create_semaphore(engine, a, "q", 2)
    engine.apply(AlterNode("n", {"max_waiters": 1}), 0.0)
    acquire(engine, a, "q", 1)
    acquire(engine, b, "q", 1)
    acquire(engine, c, "q", 1)
    with pytest.raises(LimitExceededError, match="max_waiters"):
        acquire(engine, a, "q", 2)


# -- fencing tokens -----------------------------------------------------------------


def test_tokens_strictly_increase_across_semaphores_and_nodes():
    engine = make_engine()
    engine.apply(CreateNode("m"), 0.0)
    a = open_session(engine, "n")
    b = open_session(engine, "m")
    create_semaphore(engine, a, "p", 1)
    create_semaphore(engine, b, "p", 1)
    tokens: list[int] = []
    for i in range(3):
        for sid, name in ((a, "p"), (b, "p"), (a, "e"), (b, "e")):
            result = acquire(engine, sid, name, ephemeral=True, now=float(i))
            assert result.token is not None
            tokens.append(result.token)
            engine.apply(Release(sid, name), float(i))
    assert tokens == sorted(set(tokens))


def test_tokens_keep_increasing_after_a_node_is_dropped_and_recreated():
    engine = make_engine()
    a = open_session(engine)
    create_semaphore(engine, a, "p", 1)
    first = acquire(engine, a, "p").token
    engine.apply(DropNode("n", force=True), 1.0)
    engine.apply(CreateNode("n"), 2.0)
    b = open_session(engine, now=2.0)
    create_semaphore(engine, b, "p", 1, now=2.0)
    second = acquire(engine, b, "p", now=2.0).token
    assert first is not None
    assert second is not None
    assert second > first


def test_queued_grant_tokens_exceed_every_earlier_token():
    engine = make_engine()
    a, b = open_session(engine), open_session(engine)
    create_semaphore(engine, a, "p", 1)
    t1 = acquire(engine, a, "p").token
    acquire(engine, b, "p")
    t2 = acquire(engine, a, "other", ephemeral=True).token
    engine.take_effects()
    engine.apply(Release(a, "p"), 1.0)
    (grant,) = granted(engine.take_effects())
    assert t1 is not None
    assert t2 is not None
    assert grant.token > t2 > t1


# -- rule 1: failed commands change nothing -----------------------------------------


def _populated() -> tuple[Engine, int, int, int]:
    engine = make_engine(NodeConfig(max_waiters=2, max_watches_per_session=1, max_data_size=8))
    a, b, c = (open_session(engine) for _ in range(3))
    create_semaphore(engine, a, "p", 2, data=b"d")
    acquire(engine, a, "p", 2, lease_ttl=5.0)
    acquire(engine, b, "p", 1, timeout=4.0)
    acquire(engine, c, "p", 2)
    acquire(engine, c, "e", 3, ephemeral=True)
    engine.apply(DescribeSemaphore(b, "p", watch_owners=True), 0.0)
    engine.take_effects()
    return engine, a, b, c


FAILING = [
    (lambda a, b, c: CreateSemaphore(a, "p", 1), AlreadyExistsError),
    (lambda a, b, c: CreateSemaphore(a, "q", 1, b"123456789"), LimitExceededError),
    (lambda a, b, c: Acquire(a, "p", 3, 1), LimitExceededError),
    (lambda a, b, c: Acquire(a, "nope", 1, 1), NotFoundError),
    (lambda a, b, c: Acquire(a, "p", 1, 1, data=b"123456789"), LimitExceededError),
    (lambda a, b, c: Acquire(a, "p", 1, 1, timeout=-1.0), InvalidArgumentError),
    (lambda a, b, c: Acquire(999, "p", 1, 1), SessionExpiredError),
    (lambda a, b, c: Renew(b, "p"), NotFoundError),
    (lambda a, b, c: Renew(c, "e"), PreconditionFailedError),
    (lambda a, b, c: Renew(a, "p", 0.0), InvalidArgumentError),
    (lambda a, b, c: UpdateSemaphore(a, "p", b"123456789"), LimitExceededError),
    (lambda a, b, c: DeleteSemaphore(a, "p"), PreconditionFailedError),
    (lambda a, b, c: DeleteSemaphore(a, "nope", force=True), NotFoundError),
    (lambda a, b, c: DescribeSemaphore(b, "p", watch_data=True), LimitExceededError),
    (lambda a, b, c: DescribeSemaphore(a, "nope"), NotFoundError),
]


@pytest.mark.parametrize(("make", "error"), FAILING)
def test_failed_command_leaves_state_unchanged(make, error):
    engine, a, b, c = _populated()
    before = snapshot(engine)
    with pytest.raises(error):
        engine.apply(make(a, b, c), 1.0)
    assert snapshot(engine) == before
    assert engine.take_effects() == []
    check_invariants(engine)


def test_swap_of_data_compares_then_replaces_in_one_step():
    engine = make_engine(NodeConfig(max_data_size=4))
    s = open_session(engine)
    create_semaphore(engine, s, "p", 1, data=b"v1")
    assert engine.apply(SwapSemaphoreData(s, "p", b"v2", b"v3"), 0.0) is False
    assert describe(engine, s, "p").data == b"v1"
    assert engine.apply(SwapSemaphoreData(s, "p", b"v1", b"v2"), 0.0) is True
    assert describe(engine, s, "p").data == b"v2"
    # The new data is checked whatever the outcome: a bad argument is not a False.
    with pytest.raises(LimitExceededError, match="max_data_size"):
        engine.apply(SwapSemaphoreData(s, "p", b"no", b"12345"), 0.0)
    with pytest.raises(NotFoundError):
        engine.apply(SwapSemaphoreData(s, "missing", b"", b"x"), 0.0)
    check_invariants(engine)
