"""A node frozen for its move between cells (tenure._core.node_moves, tenure._core.moving):
it takes no command and none of its deadlines comes due, so every copy taken while it
is frozen is the same; its attached sessions are told to look elsewhere; a thaw
serves it again with every timer keeping what it had left when it froze; the target
takes its copy in frozen; and the journal's records of each step replay to the same
state."""

from __future__ import annotations

import pytest

from tenure._core import (
    AcquireFailed,
    CreateNode,
    DescribeNode,
    DetachSession,
    Engine,
    Granted,
    ListNodes,
    Release,
    SessionEnded,
)
from tenure._core.invariants import check_invariants
from tenure._core.node_moves import (
    SESSION_ID_BLOCK,
    drop_moved_node,
    export_node,
    freeze_node,
    import_moved_node,
    reserve_session_block,
    thaw_node,
)
from tenure._core.snapshot import dump, load
from tenure.errors import (
    ErrorCode,
    NotFoundError,
    PreconditionFailedError,
    UnavailableError,
)
from tenure.server._durability.records import (
    DROP_MOVED_RECORD,
    FREEZE_RECORD,
    IMPORT_RECORD,
    SESSION_BLOCK_RECORD,
    THAW_RECORD,
    apply_move,
    apply_record,
    move_record,
)

from .support import NODE, acquire, create_semaphore, describe, make_engine, open_session


def busy_node(lease_ttl: float | None = 10.0) -> tuple[Engine, int, int]:
    """An engine whose node holds ``s`` by a session with a lease (TTL ``lease_ttl``) and
    has a second session waiting for it (timeout 20 s); the holder's and the waiter's
    ids."""
    engine = make_engine()
    holder = open_session(engine, timeout=30.0)
    waiter = open_session(engine, timeout=30.0)
    create_semaphore(engine, holder, "s", 1)
    assert acquire(engine, holder, "s", lease_ttl=lease_ttl).token is not None
    assert acquire(engine, waiter, "s", timeout=20.0).token is None
    engine.take_effects()
    return engine, holder, waiter


def test_a_frozen_node_takes_no_command_and_other_nodes_are_served() -> None:
    engine, holder, _ = busy_node()
    engine.apply(CreateNode("other"), 1.0)
    freeze_node(engine, NODE, "b", 1.0)
    for command in (DescribeNode(NODE), Release(holder, "s"), DetachSession(holder)):
        with pytest.raises(UnavailableError, match="moving between this cell and cell 'b'"):
            engine.apply(command, 2.0)
    other = open_session(engine, "other", now=2.0)
    assert acquire(engine, other, "t", now=2.0, ephemeral=True).token is not None
    assert list(engine.apply(ListNodes(), 2.0).names) == [NODE, "other"]
    check_invariants(engine)


def test_a_freeze_tells_each_attached_session_to_look_elsewhere() -> None:
    engine, holder, waiter = busy_node()
    engine.apply(DetachSession(waiter), 0.5)
    freeze_node(engine, NODE, "b", 1.0)
    told = engine.take_effects()
    assert [(e.session_id, e.code) for e in told if isinstance(e, SessionEnded)] == [
        (holder, ErrorCode.WRONG_CELL)
    ]
    assert "moving to cell 'b'" in told[0].message  # type: ignore[union-attr]
    freeze_node(engine, NODE, "b", 2.0)  # (again, for the same move: nothing more)
    assert engine.take_effects() == []
    with pytest.raises(PreconditionFailedError, match="moving with cell 'b' already"):
        freeze_node(engine, NODE, "c", 2.0)
    with pytest.raises(NotFoundError):
        freeze_node(engine, "nobody", "b", 2.0)


def test_no_deadline_of_a_frozen_node_comes_due_and_its_copy_stays_the_same() -> None:
    engine, _, _ = busy_node()
    freeze_node(engine, NODE, "b", 1.0)
    engine.take_effects()
    copy = export_node(engine, NODE)
    assert engine.tick(1_000.0) == 0  # (lease, wait and both sessions' windows: frozen)
    assert engine.take_effects() == []
    assert export_node(engine, NODE) == copy
    assert copy["now"] == 1.0  # (as of the time it froze)
    with pytest.raises(PreconditionFailedError, match="not frozen"):
        export_node(load(dump(engine)), "nothing")


def test_a_thaw_keeps_what_each_timer_had_left_when_the_node_froze() -> None:
    engine, holder, waiter = busy_node(lease_ttl=None)
    freeze_node(engine, NODE, "b", 5.0)
    engine.tick(500.0)
    thaw_node(engine, NODE, 500.0)
    assert NODE not in engine.moving
    check_invariants(engine)
    # Each session detached, with a whole recovery window from the thaw.
    assert {engine.sessions[s].expires_at for s in (holder, waiter)} == {530.0}
    # The waiter had 15 s of its 20 left when the node froze.
    assert engine.tick(514.9) == 0
    engine.apply(DetachSession(holder), 514.9)
    assert engine.tick(515.0) == 1
    assert [e.code for e in engine.take_effects() if isinstance(e, AcquireFailed)] == [
        ErrorCode.TIMEOUT
    ]
    thaw_node(engine, NODE, 600.0)  # (not frozen: nothing)


def test_a_thaw_starts_each_lease_afresh() -> None:
    engine, _, waiter = busy_node(lease_ttl=10.0)
    freeze_node(engine, NODE, "b", 9.0)
    thaw_node(engine, NODE, 100.0)
    engine.take_effects()
    assert engine.tick(109.9) == 0  # (a holder could not renew while it was frozen)
    assert engine.tick(110.0) == 1
    assert [e.session_id for e in engine.take_effects() if isinstance(e, Granted)] == [waiter]


def test_the_target_takes_the_copy_in_frozen_and_thaws_it_above_the_mark() -> None:
    source, holder, waiter = busy_node()
    mark = source.last_token
    source.last_session_id = SESSION_ID_BLOCK - 10  # (the ids below are the source's)
    freeze_node(source, NODE, "b", 1.0)
    copy = export_node(source, NODE)
    target = Engine()
    reserve_session_block(target, 1)
    assert target.last_session_id == SESSION_ID_BLOCK
    import_moved_node(target, copy, "a", 3.0)
    import_moved_node(target, copy, "a", 4.0)  # (sent again: taken as it is)
    assert target.moving == {NODE: ("a", 3.0)}
    with pytest.raises(UnavailableError):
        target.apply(DescribeNode(NODE), 4.0)
    drop_moved_node(source, NODE)
    drop_moved_node(source, NODE)  # (again: nothing)
    assert NODE not in source.nodes
    assert not source.moving
    assert not source.sessions
    thaw_node(target, NODE, 5.0)
    check_invariants(target)
    assert [o.session_id for o in describe(target, holder, "s", now=5.0).owners] == [holder]
    target.apply(Release(holder, "s"), 5.0)
    granted = [e for e in target.take_effects() if isinstance(e, Granted)]
    assert [(g.session_id, g.token > mark) for g in granted] == [(waiter, True)]


def test_a_snapshot_keeps_the_frozen_nodes() -> None:
    engine, _, _ = busy_node()
    freeze_node(engine, NODE, "b", 2.0)
    again = load(dump(engine))
    assert again.moving == {NODE: ("b", 2.0)}
    assert dump(again) == dump(engine)


def test_each_steps_record_replays_to_the_same_state() -> None:
    source, _, _ = busy_node()
    replica = load(dump(source))
    steps: list[tuple[int, float, object, str]] = [
        (SESSION_BLOCK_RECORD, 1.0, 2, ""),
        (FREEZE_RECORD, 2.0, NODE, "b"),
        (THAW_RECORD, 3.0, NODE, ""),
        (FREEZE_RECORD, 4.0, NODE, "b"),
        (DROP_MOVED_RECORD, 5.0, NODE, ""),
    ]
    for kind, now, subject, cell in steps:
        apply_move(source, kind, now, subject, cell)
        apply_record(replica, move_record(kind, now, subject, cell), "a record", "a test")
        assert dump(replica) == dump(source)
    assert source.last_session_id == 2 * SESSION_ID_BLOCK
    assert not source.nodes
    target, copy = Engine(), export_node(*_frozen_copy())
    reserve_session_block(target, 1)
    replica = load(dump(target))
    apply_move(target, IMPORT_RECORD, 1.0, copy, "a")
    apply_record(replica, move_record(IMPORT_RECORD, 1.0, copy, "a"), "an import", "a test")
    assert dump(replica) == dump(target)
    assert target.moving == {NODE: ("a", 1.0)}


def test_a_step_that_is_none_is_refused() -> None:
    with pytest.raises(ValueError, match="not a step of a node's move"):
        apply_move(Engine(), FREEZE_RECORD, 1.0, 7, "b")
    with pytest.raises(ValueError, match="not a step of a node's move"):
        apply_move(Engine(), SESSION_BLOCK_RECORD, 1.0, -1, "")


def _frozen_copy() -> tuple[Engine, str]:
    engine, _, _ = busy_node()
    freeze_node(engine, NODE, "b", 0.5)
    return engine, NODE
