"""max_hold: a grant that ends a time of the engine's clock after it was made, whatever
its session does (Acquire's ``max_hold``, a node's ``max_hold``; issue 50)."""

from __future__ import annotations

import math

import pytest

from tenure._core import Acquire, NodeConfig, Release, Renew
from tenure._core.effects import LeaseLost
from tenure._core.snapshot import SNAPSHOT_VERSION, dump, load, resume
from tenure._core.values import MAX_COUNT, MAX_HOLD_SECONDS
from tenure.errors import ErrorCode, InvalidArgumentError

from .support import (
    acquire,
    create_semaphore,
    granted,
    lost,
    make_engine,
    open_session,
    owners_of,
    settled,
)


def test_a_grant_ends_at_its_max_hold_and_its_waiter_gets_a_greater_token() -> None:
    engine = make_engine()
    a, b = open_session(engine), open_session(engine)
    first = acquire(engine, a, "job", MAX_COUNT, ephemeral=True, max_hold=5.0)
    assert first.lease_ttl is None  # no TTL to renew: the client runs no keeper
    acquire(engine, b, "job", MAX_COUNT, ephemeral=True, request_id=9)
    settled(engine)
    engine.tick(4.9)
    assert settled(engine) == []
    engine.tick(5.0)
    effects = settled(engine)
    (gone,) = lost(effects)
    assert (gone.session_id, gone.token, gone.code) == (a, first.token, ErrorCode.LEASE_LOST)
    assert "max_hold" in gone.message
    (grant,) = granted(effects)
    assert (grant.session_id, grant.request_id) == (b, 9)
    assert first.token is not None
    assert grant.token > first.token
    assert a in engine.sessions  # the session lives on: only the grant ended


def test_a_release_before_max_hold_leaves_no_end_behind() -> None:
    engine = make_engine()
    a, b = open_session(engine), open_session(engine)
    acquire(engine, a, "job", ephemeral=True, max_hold=5.0)
    assert engine.apply(Release(a, "job"), 1.0)
    later = acquire(engine, b, "job", ephemeral=True, now=2.0)
    engine.tick(10.0)
    assert settled(engine) == []
    assert owners_of(engine, b, "job") == [(b, 1)]
    assert later.token is not None


def test_renewals_end_at_max_hold_and_a_ttl_shorter_still_ends_it_first() -> None:
    engine = make_engine()
    a = open_session(engine)
    create_semaphore(engine, a, "p", 1)
    acquire(engine, a, "p", lease_ttl=4.0, max_hold=6.0)
    assert engine.apply(Renew(a, "p"), 3.0) == 4.0  # its TTL, as always
    assert engine.next_deadline() == 6.0  # not 7.0: the max_hold's end
    assert engine.apply(Renew(a, "p", 100.0), 5.0) == 100.0
    assert engine.next_deadline() == 6.0
    engine.tick(6.0)
    assert len(lost(settled(engine))) == 1
    b = open_session(engine)
    acquire(engine, b, "p", lease_ttl=1.0, max_hold=6.0, now=10.0)
    engine.tick(11.0)  # the TTL, not renewed, comes first
    (gone,) = lost(settled(engine))
    assert "expired without renewal" in gone.message


def test_the_nodes_max_hold_bounds_every_grant_and_an_acquires_may_only_shorten_it() -> None:
    engine = make_engine(NodeConfig(max_hold=10.0))
    a = open_session(engine)
    acquire(engine, a, "default", ephemeral=True)
    acquire(engine, a, "longer", ephemeral=True, max_hold=60.0)
    acquire(engine, a, "shorter", ephemeral=True, max_hold=2.0)
    engine.tick(2.0)
    assert [e.name for e in lost(settled(engine))] == ["shorter"]
    engine.tick(10.0)
    assert sorted(e.name for e in lost(settled(engine))) == ["default", "longer"]


def test_a_restate_in_place_and_an_upgrade_keep_the_holds_end() -> None:
    engine = make_engine()
    a, b = open_session(engine), open_session(engine)
    create_semaphore(engine, a, "pool", 3)
    acquire(engine, a, "pool", 2, max_hold=10.0)
    acquire(engine, a, "pool", 1, data=b"less", now=3.0)  # in place: same grant
    acquire(engine, b, "pool", 2, now=3.0)  # holds the other 2
    upgrade = acquire(engine, a, "pool", 3, max_hold=100.0, now=4.0)  # queues
    assert upgrade.token is None
    engine.apply(Release(b, "pool"), 5.0)
    settled(engine)  # the upgrade granted (a new token), ending still at 10
    engine.tick(9.9)
    assert settled(engine) == []
    engine.tick(10.0)
    assert len(lost(settled(engine))) == 1


def test_a_waiters_bound_starts_at_its_grant() -> None:
    engine = make_engine()
    a, b = open_session(engine), open_session(engine)
    acquire(engine, a, "job", MAX_COUNT, ephemeral=True)
    acquire(engine, b, "job", MAX_COUNT, ephemeral=True, max_hold=5.0, now=1.0)
    engine.apply(Release(a, "job"), 4.0)  # b granted at 4: ends at 9
    settled(engine)
    engine.tick(8.9)
    assert settled(engine) == []
    engine.tick(9.0)
    assert len(lost(settled(engine))) == 1


@pytest.mark.parametrize("bad", [0, -1.0, math.nan, math.inf, MAX_HOLD_SECONDS + 1, "5", True])
def test_a_bad_max_hold_is_refused_naming_it_and_changes_nothing(bad: object) -> None:
    engine = make_engine()
    a = open_session(engine)
    with pytest.raises(InvalidArgumentError, match="max_hold"):
        engine.apply(Acquire(a, "job", 1, 5, ephemeral=True, max_hold=bad), 0.0)  # type: ignore[arg-type]
    assert "job" not in engine.nodes["n"].semaphores
    with pytest.raises(InvalidArgumentError, match="max_hold"):
        NodeConfig(max_hold=bad).validated()  # type: ignore[arg-type]
    assert NodeConfig(max_hold=MAX_HOLD_SECONDS).validated().max_hold == MAX_HOLD_SECONDS


def test_a_bound_survives_a_snapshot_and_a_restart_keeps_the_time_it_had_left() -> None:
    engine = make_engine()
    a, b = open_session(engine), open_session(engine)
    acquire(engine, a, "held", ephemeral=True, max_hold=10.0, now=1.0)
    acquire(engine, a, "queued", MAX_COUNT, ephemeral=True)
    acquire(engine, b, "queued", MAX_COUNT, ephemeral=True, max_hold=7.0, now=2.0)
    engine.tick(3.0)
    data = dump(engine)
    assert data["version"] == SNAPSHOT_VERSION
    (plain,) = data["nodes"]
    assert plain["max_holds"] == [[11.0, None], [7.0]]
    restored = load(data)
    assert dump(restored) == data
    resume(restored, 100.0)  # 97 s later on another clock: the downtime is not counted
    restored.tick(107.9)
    assert lost(settled(restored)) == []
    restored.tick(108.0)  # 11 - 3 = 8 s after the restart
    assert [e.name for e in lost(settled(restored))] == ["held"]
    restored.apply(Release(a, "queued"), 109.0)
    settled(restored)  # b granted at 109: ends 7 s later
    restored.tick(115.9)
    assert lost(settled(restored)) == []
    restored.tick(116.0)
    assert [e.name for e in lost(settled(restored))] == ["queued"]


def test_a_snapshot_without_bounds_has_no_key_and_an_older_one_loads_with_none() -> None:
    engine = make_engine()
    a = open_session(engine)
    acquire(engine, a, "job", ephemeral=True)
    data = dump(engine)
    (plain,) = data["nodes"]
    assert "max_holds" not in plain
    data["version"] = 10
    assert load(data).nodes["n"].semaphores["job"].owner(a).ends is None  # type: ignore[union-attr]


def test_a_lease_lost_at_max_hold_is_kept_for_a_reattach_as_other_endings() -> None:
    engine = make_engine()
    a = open_session(engine)
    acquire(engine, a, "job", ephemeral=True, max_hold=1.0)
    engine.tick(1.0)
    (gone,) = lost(settled(engine))
    assert isinstance(gone, LeaseLost)
    assert [type(m) for m in engine.sessions[a].missed.values()] == [LeaseLost]
