"""A standby's reads change nothing (tenure._core.stale_reads): every read of
STALE_READS, answered from a busy state, leaves it as it was, byte for byte, with no
effect and its time unmoved, even with deadlines long due; and what is not a read is
refused. A standby's watches (version 13) change nothing the log replays: armed in a
replica of the leader's state, its state stays the leader's but for the watch counter,
the leader's records fire them, and they end with a CancelWatch or their session."""

from __future__ import annotations

import msgpack
import pytest

from tenure._core import Engine, NodeConfig
from tenure._core import commands as c
from tenure._core.snapshot import dump, load
from tenure._core.stale_reads import (
    STALE_READS,
    answer_read,
    arm_watch,
    is_stale_read,
    is_standby_watch,
)
from tenure.errors import InvalidArgumentError, NotFoundError

from .support import NODE, acquire, create_semaphore, fired, make_engine, open_session


def _busy() -> tuple[Engine, int, int]:
    """Two sessions, a held mutex with a waiter, a watch, an annex, a claim's node."""
    engine = make_engine(NodeConfig())
    holder = open_session(engine, timeout=5.0)
    waiter = open_session(engine, timeout=5.0)
    create_semaphore(engine, holder, "m", 1)
    acquire(engine, holder, "m", lease_ttl=3.0, now=1.0)
    acquire(engine, waiter, "m", timeout=4.0, now=2.0)  # (queued behind the holder)
    engine.apply(c.DescribeSemaphore(waiter, "m", watch_owners=True), 2.0)
    engine.apply(c.SetNodeAnnex(NODE, "k", b"v"), 2.0)
    engine.take_effects()
    return engine, holder, waiter


def _reads(holder: int) -> list[c.Command[object]]:
    return [
        c.DescribeNode(NODE),
        c.GetNodeAnnex(NODE, "k"),
        c.DescribeSession(holder),
        c.DescribeSemaphore(holder, "m", owners=True, waiters=True),
        c.ListNodes(),
        c.ListSemaphores(NODE),
        c.ListSessions(NODE),
        c.WhyName(NODE, "m"),
        c.TopNames(NODE),
    ]


def _state(engine: Engine) -> bytes:
    return msgpack.packb(dump(engine))  # type: ignore[no-any-return]


def test_every_read_leaves_the_state_as_it_was_though_its_deadlines_are_due() -> None:
    engine, holder, _ = _busy()
    assert {type(read) for read in _reads(holder)} == STALE_READS  # (each one tried)
    before, now = _state(engine), engine.now
    assert engine.next_deadline() is not None
    for read in _reads(holder):
        answer_read(engine, read)
    assert _state(engine) == before
    assert engine.now == now
    assert engine.take_effects() == []
    # The leader's engine, given a later time, would have let the holder's lease end:
    engine.apply(c.DescribeNode(NODE), 100.0)
    assert _state(engine) != before


def test_a_read_answers_as_the_engine_does_at_its_own_time() -> None:
    engine, holder, waiter = _busy()
    for read in _reads(holder):
        assert answer_read(engine, read) == engine.apply(read, engine.now)
    with pytest.raises(NotFoundError):
        answer_read(engine, c.DescribeSemaphore(waiter, "missing"))


@pytest.mark.parametrize(
    "command",
    [
        c.DescribeSemaphore(1, "m", watch_data=True),
        c.Release(1, "m"),
        c.CreateNode("other", NodeConfig()),
        c.WatchPrefix(1, ""),
    ],
    ids=["watching-describe", "release", "create-node", "watch-prefix"],
)
def test_what_is_not_a_read_is_refused(command: c.Command[object]) -> None:
    engine, _, _ = _busy()
    before = _state(engine)
    assert not is_stale_read(command)
    with pytest.raises(InvalidArgumentError, match="not a read a standby answers"):
        answer_read(engine, command)
    assert _state(engine) == before


def _replicated(engine: Engine) -> dict[str, object]:
    """What the log replays of ``engine``'s state: all of it but the watch counter."""
    state = dict(dump(engine))
    state.pop("last_watch_id")
    return state


def test_a_standby_arms_watches_that_the_leaders_records_fire() -> None:
    leader, holder, waiter = _busy()
    standby = load(msgpack.unpackb(_state(leader)))  # (a replica, as a standby loads it)
    assert _replicated(standby) == _replicated(leader)
    described = arm_watch(
        standby, c.DescribeSemaphore(holder, "m", watch_data=True, watch_repeat=True)
    )
    assert described.description.data == b""
    assert described.watch_id is not None
    armed = arm_watch(standby, c.WatchPrefix(waiter, "", watch_owners=True))
    assert _replicated(standby) == _replicated(leader)
    assert standby.take_effects() == []
    for change in (c.UpdateSemaphore(holder, "m", b"v1"), c.Release(holder, "m")):
        leader.apply(change, 2.5)
        standby.apply(change, 2.5)  # (what a standby does with a record of the leader's)
        assert _replicated(standby) == _replicated(leader)
    on_standby = fired(standby.take_effects())
    assert [(f.session_id, f.watch_id) for f in on_standby] == [
        (holder, described.watch_id),  # the data changed
        (waiter, armed.watch_id),  # the prefix watch: the owners changed
    ]
    assert on_standby[0].description is not None
    assert on_standby[0].description.data == b"v1"
    # The leader fired its own watch alone (the waiter's, armed in _busy: a snapshot
    # keeps no watch), and the standby none of the leader's.
    assert [(f.session_id, f.watch_id) for f in fired(leader.take_effects())] == [(waiter, 1)]
    # Cancelled, a watch fires no more; a session that ends takes its watches with it.
    assert arm_watch(standby, c.CancelWatch(holder, described.watch_id)) is True
    assert arm_watch(standby, c.CancelWatch(holder, described.watch_id)) is False
    standby.apply(c.CloseSession(waiter), 3.0)
    standby.apply(c.UpdateSemaphore(holder, "m", b"v2"), 3.0)
    assert fired(standby.take_effects()) == []
    assert len(standby.watches) == 0


@pytest.mark.parametrize(
    ("command", "watches"),
    [
        (c.DescribeSemaphore(1, "m", watch_data=True), True),
        (c.WatchPrefix(1, ""), True),
        (c.CancelWatch(1, 1), True),
        (c.DescribeSemaphore(1, "m"), False),
        (c.Release(1, "m"), False),
        (c.DescribeNode(NODE), False),
    ],
    ids=["watching-describe", "watch-prefix", "cancel-watch", "describe", "release", "node"],
)
def test_only_watches_are_armed_on_a_standby(command: c.Command[object], watches: bool) -> None:
    engine, _, _ = _busy()
    assert is_standby_watch(command) is watches
    if not watches:
        before = _state(engine)
        with pytest.raises(InvalidArgumentError, match="arms no watch a standby keeps"):
            arm_watch(engine, command)
        assert _state(engine) == before
