"""The journal: an engine rebuilt from disk equals the engine that wrote it."""

from __future__ import annotations

import gc
import os
import random
import select
import time
from pathlib import Path

import msgpack
import pytest

from tenure._core import (
    MAX_COUNT,
    Acquire,
    AlterNode,
    AttachSession,
    Command,
    CreateNode,
    CreateSession,
    Engine,
    GetNodeAnnex,
    KillSession,
    ListNodes,
    ListSemaphores,
    ListSessions,
    NodeConfig,
    SetNodeAnnex,
)
from tenure._core.snapshot import Plain, dump, load, resume
from tenure._core.values import ClientIdentity
from tenure.errors import TenureError
from tenure.server import CorruptLogError, DataDir, FsyncMode
from tenure.server._durability.identity import lock_data_dir
from tenure.server._durability.journal import READ_ONLY, RESUME_RECORD, Journal
from tenure.server._durability.storage import RECORD_LIMIT, Compaction, _read_records

from ...core.test_snapshot import random_command

KEY = b"protection-key"


def step(engine: Engine, journal: Journal, command: Command[object], now: float) -> bool:
    """What the host does: tick (logged if it did anything), apply, log, commit.

    Returns whether a record was logged (at ``now``): a tick or the command.
    """
    logged = bool(engine.tick(now))
    if logged:
        journal.log_tick(now)
    try:
        engine.apply(command, now)
    except TenureError:
        pass  # a failed command changed nothing
    else:
        journal.log_command(command, now)
        logged = logged or type(command) not in READ_ONLY
    journal.commit()
    engine.take_effects()
    return logged


def reopen(path: Path, now: float) -> Engine:
    """Start again on ``path`` (and close the journal: only the engine is wanted)."""
    journal = Journal(DataDir(path))
    try:
        return journal.open(now)
    finally:
        journal.abort()


def comparable(engine: Engine) -> Plain:
    """The state that must survive: everything but the watch counter (watches do not)."""
    state = dump(engine)
    del state["last_watch_id"]
    return state


def reference_after_restart(engine: Engine, now: float, *, logged_at: float | None = None) -> Plain:
    """``engine`` resumed at ``now``, as of its last record (``logged_at``, if known)."""
    twin = load(dump(engine))
    if logged_at is not None:
        # Commands that failed (or only read) after the last record moved the engine's
        # time and left no record: a restart resumes from the last record's time.
        twin.now = logged_at
    resume(twin, now)
    return comparable(twin)


@pytest.mark.parametrize("seed", range(25))
@pytest.mark.parametrize("compact_every", [1_000, 7])
def test_a_restarted_engine_equals_the_one_that_crashed(
    tmp_path: Path, seed: int, compact_every: int
) -> None:
    rng = random.Random(seed)
    journal = Journal(DataDir(tmp_path, FsyncMode.OFF), compact_every=compact_every)
    engine = journal.open(0.0)
    timeout = rng.choice([1.0, 30.0])  # short windows expire sessions; long ones keep them
    config = NodeConfig(lock_delay=rng.choice([0.0, 2.0]), recovery_window=timeout)
    step(engine, journal, CreateNode("n", config), 0.0)
    for _ in range(4):
        step(engine, journal, CreateSession("n", KEY), 0.0)
    now = logged_at = 0.0
    for request_id in range(1, rng.randint(20, 150)):
        now += rng.choice([0.0, 0.1, 0.4, 1.5])
        if step(engine, journal, random_command(rng, engine, request_id), now):
            logged_at = now
        if journal.needs_snapshot():
            journal.snapshot(engine)
    journal.log_tick(now + 1)  # queued, never committed: lost in the crash
    journal.abort()  # kill -9: what was committed is on disk, nothing more
    restarted = reopen(tmp_path, 5_000.0)
    assert comparable(restarted) == reference_after_restart(engine, 5_000.0, logged_at=logged_at)
    assert restarted.last_token == engine.last_token


def test_a_second_restart_replays_the_first_from_the_log(tmp_path: Path) -> None:
    journal = Journal(DataDir(tmp_path))
    engine = journal.open(0.0)
    step(engine, journal, CreateNode("n"), 0.0)
    step(engine, journal, CreateSession("n", KEY), 0.0)
    journal.abort()
    first = reopen(tmp_path, 100.0)
    second = reopen(tmp_path, 200.0)
    assert comparable(second) == reference_after_restart(first, 200.0)
    # A start-up logs its resume instead of writing a snapshot before it serves.
    assert list(tmp_path.glob("snapshot-*.bin")) == []


def test_read_only_commands_are_not_logged(tmp_path: Path) -> None:
    from tenure._core import DescribeNode, WatchPrefix

    journal = Journal(DataDir(tmp_path))
    engine = journal.open(0.0)
    step(engine, journal, CreateNode("n"), 0.0)
    size = sum(p.stat().st_size for p in tmp_path.glob("wal-*.log"))
    step(engine, journal, DescribeNode("n"), 1.0)
    assert sum(p.stat().st_size for p in tmp_path.glob("wal-*.log")) == size
    # A prefix watch is the connection's, as every watch: not logged either.
    step(engine, journal, CreateSession("n", KEY), 1.0)  # (session 1)
    size = sum(p.stat().st_size for p in tmp_path.glob("wal-*.log"))
    step(engine, journal, WatchPrefix(1, "config/", watch_data=True), 1.0)
    assert sum(p.stat().st_size for p in tmp_path.glob("wal-*.log")) == size
    journal.close()


def test_a_record_that_no_longer_applies_stops_start_up(tmp_path: Path) -> None:
    journal = Journal(DataDir(tmp_path))
    engine = journal.open(0.0)
    step(engine, journal, CreateNode("n"), 0.0)
    # A second CreateNode of the same name cannot have succeeded: the log lies.
    journal.log_command(CreateNode("n"), 1.0)
    journal.close()
    with pytest.raises(CorruptLogError, match="no longer applies"):
        reopen(tmp_path, 10.0)


def test_an_unreadable_record_stops_start_up(tmp_path: Path) -> None:
    journal = Journal(DataDir(tmp_path))
    journal.open(0.0)
    journal.data_dir.append(msgpack.packb([9, 0.0]))
    journal.close()
    with pytest.raises(CorruptLogError, match="unreadable"):
        reopen(tmp_path, 10.0)


def test_a_record_with_a_malformed_command_stops_start_up(tmp_path: Path) -> None:
    journal = Journal(DataDir(tmp_path))
    journal.open(0.0)
    journal.data_dir.append(msgpack.packb([1, 0.0, [999, "no such command"]]))
    journal.close()
    # (Record 0 is the resume that open() logged.)
    with pytest.raises(CorruptLogError, match="logged record 1 is unreadable"):
        reopen(tmp_path, 10.0)


def test_a_node_logged_before_max_missed_per_session_still_replays(tmp_path: Path) -> None:
    journal = Journal(DataDir(tmp_path))
    journal.open(0.0)
    config = [30.0, 0.0, None, 5, 100, 10, 64, 3]  # max_sessions 5, ... (8 fields)
    journal.data_dir.append(msgpack.packb([1, 1.0, [1, "old", config]]))
    journal.commit()
    journal.abort()
    node = reopen(tmp_path, 100.0).nodes["old"]
    assert node.config == NodeConfig(
        max_sessions=5,
        max_semaphores=100,
        max_waiters=10,
        max_data_size=64,
        max_watches_per_session=3,
    )


def test_a_node_logged_before_max_claims_still_replays(tmp_path: Path) -> None:
    """A CreateNode of protocol version 5 (a NodeConfig of 9 fields) replays with
    max_claims at its default; one of 10 keeps its max_claims."""
    journal = Journal(DataDir(tmp_path))
    journal.open(0.0)
    config = [30.0, 0.0, None, 5, 100, 10, 64, 3, 7]  # ..., max_missed_per_session 7
    journal.data_dir.append(msgpack.packb([1, 1.0, [1, "old", config]]))
    journal.data_dir.append(msgpack.packb([1, 1.0, [1, "new", [*config, 4]]]))
    journal.commit()
    journal.abort()
    nodes = reopen(tmp_path, 100.0).nodes
    assert nodes["old"].config.max_missed_per_session == 7
    assert nodes["old"].config.max_claims == NodeConfig().max_claims
    assert nodes["new"].config.max_claims == 4


def test_claims_replay_at_the_times_their_host_gave_them(tmp_path: Path) -> None:
    """ClaimName and ReleaseClaim are logged in their wire layout with the host's wall
    clock: a replay makes the same records, and the same claims end at the same
    engine times (the downtime left out, as the restart's resume does)."""
    from tenure._core import ClaimName, ReleaseClaim

    journal = Journal(DataDir(tmp_path))
    engine = journal.open(0.0)
    step(engine, journal, CreateNode("n", NodeConfig(max_claims=5)), 0.0)
    step(engine, journal, CreateSession("n", KEY), 0.0)
    wall = 1_750_000_000.0
    step(engine, journal, ClaimName(1, "a", "a" * 32, 10.0, 100.0, b"t", wall), 1.0)
    step(engine, journal, ClaimName(1, "b", "b" * 32, 10.0, 100.0, b"", wall + 1), 2.0)
    step(engine, journal, ReleaseClaim("n", "b", "b" * 32, wall + 2), 3.0)
    step(engine, journal, ClaimName(1, "c", "c" * 32, 0.0, 100.0, b"", wall + 3), 4.0)
    step(engine, journal, ReleaseClaim("n", "c", "c" * 32, wall + 4), 5.0)  # ends at once
    before = {name: sem.data for name, sem in engine.nodes["n"].semaphores.items()}
    assert set(before) == {"a", "b"}
    journal.abort()
    restarted = reopen(tmp_path, 9_000.0)
    node = restarted.nodes["n"]
    assert {name: sem.data for name, sem in node.semaphores.items()} == before
    assert node.config.max_claims == 5
    # Logged at 5.0 on the old clock, resumed at 9000: 8995 s moved.
    assert (node.claims["a"].least_until, node.claims["a"].ends_at) == (9006.0, 9096.0)
    assert node.claims["b"].ends_at == 9007.0


def test_max_holds_replay_and_survive_a_snapshot_with_the_time_they_had_left(
    tmp_path: Path,
) -> None:
    """An Acquire's max_hold and a node's are logged in their wire layout (protocol
    version 7's trailing fields): a replay, and a snapshot, end the same grants at the
    same engine times (the downtime left out, as the restart's resume does)."""
    journal = Journal(DataDir(tmp_path))
    engine = journal.open(0.0)
    step(engine, journal, CreateNode("n", NodeConfig(max_hold=50.0)), 0.0)
    step(engine, journal, CreateSession("n", KEY), 0.0)
    step(engine, journal, CreateSession("n", KEY), 0.0)
    step(engine, journal, Acquire(1, "a", MAX_COUNT, 1, ephemeral=True, max_hold=10.0), 1.0)
    step(engine, journal, Acquire(1, "b", MAX_COUNT, 2, ephemeral=True), 2.0)  # the node's
    step(engine, journal, Acquire(2, "a", MAX_COUNT, 3, ephemeral=True, max_hold=5.0), 3.0)
    journal.abort()
    [wal] = tmp_path.glob("wal-*.log")
    logged = [msgpack.unpackb(r) for r in _read_records(wal, RECORD_LIMIT)[0]]
    assert [1, 1.0, [21, 1, "a", MAX_COUNT, 1, b"", None, True, None, 0, False, 0, 10.0]] in (
        logged
    )
    restarted = reopen(tmp_path, 1_000.0)  # resumed 997 s later on another clock
    assert ends_of(restarted, 1) == {
        "a": 1_008.0,
        "b": 1_049.0,
    }  # 11 - 3 and 52 - 3 after the restart
    assert restarted.nodes["n"].config.max_hold == 50.0
    journal = Journal(DataDir(tmp_path))  # and from a snapshot
    engine = journal.open(2_000.0)
    journal.snapshot(engine)
    journal.abort()
    again = reopen(tmp_path, 3_000.0)
    node = again.nodes["n"]
    assert ends_of(again, 1) == {"a": 3_008.0, "b": 3_049.0}
    assert [w.max_hold for w in node.semaphores["a"].waiters.values()] == [5.0]
    again.tick(3_008.0)
    assert [w.session_id for w in node.semaphores["a"].waiters.values()] == []  # granted
    assert ends_of(again, 2) == {"a": 3_013.0}  # its own 5 s from its grant


def test_a_nodes_long_hold_replays_and_survives_a_snapshot(tmp_path: Path) -> None:
    """A node's long_hold is logged in its wire layout (protocol version 10's trailing
    field, max_hold's nil before it), altered to 0 and to None as AlterNode's changes:
    a replay, and a snapshot, give each node the setting it had."""
    journal = Journal(DataDir(tmp_path))
    engine = journal.open(0.0)
    step(engine, journal, CreateNode("jobs", NodeConfig(long_hold=300.0)), 0.0)
    step(engine, journal, CreateNode("elections", NodeConfig(long_hold=5.0)), 0.0)
    step(engine, journal, CreateNode("plain"), 0.0)
    step(engine, journal, AlterNode("elections", {"long_hold": 0.0}), 1.0)
    step(engine, journal, CreateNode("back", NodeConfig(long_hold=5.0)), 1.0)
    step(engine, journal, AlterNode("back", {"long_hold": None}), 2.0)
    journal.abort()
    [wal] = tmp_path.glob("wal-*.log")
    logged = [msgpack.unpackb(r) for r in _read_records(wal, RECORD_LIMIT)[0]]
    made = {r[2][1]: r[2][2] for r in logged if len(r) > 2 and r[2][0] == 1}  # CreateNode
    assert made["jobs"][-2:] == [None, 300.0]  # [..., max_claims, max_hold nil, long_hold]
    plain = made["plain"]
    assert len(plain) == 9  # (unset: not even sent, the layout an older server reads)
    expected = {"jobs": 300.0, "elections": 0.0, "plain": None, "back": None}
    restarted = reopen(tmp_path, 1_000.0)
    assert {name: n.config.long_hold for name, n in restarted.nodes.items()} == expected
    journal = Journal(DataDir(tmp_path))  # and from a snapshot
    engine = journal.open(2_000.0)
    journal.snapshot(engine)
    journal.abort()
    again = reopen(tmp_path, 3_000.0)
    assert {name: n.config.long_hold for name, n in again.nodes.items()} == expected
    stored = dump(again)["nodes"]
    assert {n["name"]: n["config"].get("long_hold", "unset") for n in stored} == {
        "jobs": 300.0,
        "elections": 0.0,
        "plain": "unset",  # (left out: a snapshot an older server still reads)
        "back": "unset",
    }


def ends_of(engine: Engine, session_id: int) -> dict[str, float | None]:
    """When each hold of ``session_id`` in node ``n`` ends (its max_hold; engine time)."""
    held = {name: sem.owner(session_id) for name, sem in engine.nodes["n"].semaphores.items()}
    return {name: owner.ends for name, owner in held.items() if owner is not None}


def test_the_recovery_window_is_logged_under_its_old_name(tmp_path: Path) -> None:
    """The journal's format did not change with the rename: AlterNode's key stays
    ``session_timeout`` (an older server can replay it), and such a record, written
    before the rename, replays as ``recovery_window``."""
    journal = Journal(DataDir(tmp_path))
    engine = journal.open(0.0)
    step(engine, journal, CreateNode("n"), 0.0)
    step(engine, journal, AlterNode("n", {"recovery_window": 7.0}), 1.0)
    journal.commit()
    journal.abort()
    [wal] = tmp_path.glob("wal-*.log")
    logged = [msgpack.unpackb(r) for r in _read_records(wal, RECORD_LIMIT)[0]]
    assert [1, 1.0, [3, "n", {"session_timeout": 7.0}]] in logged
    assert not any("recovery_window" in repr(record) for record in logged)
    # A record of the old release (a fresh directory, so the layout is exactly its own).
    old_dir = tmp_path / "old"
    old_dir.mkdir()
    journal = Journal(DataDir(old_dir))
    journal.open(0.0)
    journal.data_dir.append(msgpack.packb([1, 1.0, [1, "m", [30.0, 0.0, None] + [9] * 6]]))
    journal.data_dir.append(msgpack.packb([1, 2.0, [3, "m", {"session_timeout": 12}]]))
    journal.commit()
    journal.abort()
    assert reopen(tmp_path, 100.0).nodes["n"].config.recovery_window == 7.0
    config = reopen(old_dir, 100.0).nodes["m"].config
    assert (config.recovery_window, config.max_waiters) == (12.0, 9)


def test_a_detach_logged_in_its_first_layout_still_replays(tmp_path: Path) -> None:
    """``[12, session_id]`` was DetachSession before ``silent_for``: a window from then."""
    journal = Journal(DataDir(tmp_path))
    engine = journal.open(0.0)
    step(engine, journal, CreateNode("n"), 0.0)
    step(engine, journal, CreateSession("n", KEY, timeout=30.0), 0.0)
    step(engine, journal, CreateSession("n", KEY, timeout=30.0), 0.0)
    journal.data_dir.append(msgpack.packb([1, 2.0, [12, 1]]))  # detached at 2.0...
    journal.data_dir.append(msgpack.packb([2, 33.0]))  # ...expired by a tick at 33.0
    journal.commit()
    journal.abort()
    restarted = reopen(tmp_path, 100.0)
    assert sorted(restarted.sessions) == [2]


def test_semaphore_commands_logged_before_holds_replay_as_hold_zero(tmp_path: Path) -> None:
    """Acquire, Renew, CancelAcquire and Release had no ``hold`` before holds were numbered."""
    journal = Journal(DataDir(tmp_path))
    engine = journal.open(0.0)
    step(engine, journal, CreateNode("n"), 0.0)
    step(engine, journal, CreateSession("n", KEY, timeout=30.0), 0.0)
    step(engine, journal, CreateSession("n", KEY, timeout=30.0), 0.0)
    old = [
        [21, 1, "m", 1, 1, b"", None, True, 60.0],  # Acquire: session 1 holds m...
        [21, 2, "m", 1, 2, b"", None, True, None],  # ...session 2 queues
        [24, 1, "m", None],  # Renew
        [23, 2, "m", 2],  # CancelAcquire: session 2 gives up
        [21, 2, "m", 1, 3, b"b", None, True, None],  # and queues again
        [22, 1, "m"],  # Release: session 2 is granted
    ]
    for command in old:
        journal.data_dir.append(msgpack.packb([1, 1.0, command]))
    journal.commit()
    journal.abort()
    restarted = reopen(tmp_path, 100.0)
    sem = restarted.nodes["n"].semaphores["m"]
    assert [(o.session_id, o.hold, o.data) for o in sem.owners.values()] == [(2, 0, b"b")]
    assert not sem.waiters


def test_tasks_are_logged_and_a_replay_never_refuses_what_the_log_let_wait(
    tmp_path: Path,
) -> None:
    from tenure._core import DescribeNode
    from tenure.errors import DeadlockError

    journal = Journal(DataDir(tmp_path))
    engine = journal.open(0.0)
    step(engine, journal, CreateNode("n"), 0.0)
    step(engine, journal, CreateSession("n", KEY, timeout=30.0), 0.0)
    step(engine, journal, CreateSession("n", KEY, timeout=30.0), 0.0)
    # Session 1's task 5 holds c; tasks 7 and 9 cross a and b (the last closes it).
    crossing = [(1, "c", 5), (1, "a", 7), (2, "b", 9), (1, "b", 7), (2, "a", 9)]
    engine.deadlock_search_limit = 0  # (a writer whose limit let it wait)
    for request_id, (sid, name, task) in enumerate(crossing, 1):
        command = Acquire(sid, name, MAX_COUNT, request_id, ephemeral=True, task=task)
        assert step(engine, journal, command, 0.0)
    journal.abort()
    restarted = reopen(tmp_path, 100.0)  # a replay that decided again would stop here
    sem = restarted.nodes["n"].semaphores["a"]
    assert [(o.session_id, o.task) for o in sem.owners.values()] == [(1, 7)]
    assert [(w.session_id, w.task) for w in sem.waiters.values()] == [(2, 9)]
    assert restarted.deadlock_search_limit > 0  # (what the replay set back)
    assert restarted.apply(DescribeNode("n"), 100.0).deadlocks == ()
    # The replay's engine decides again from now on: the tasks it read back count.
    restarted.apply(Acquire(2, "d", MAX_COUNT, 10, ephemeral=True, task=6), 100.0)
    restarted.apply(Acquire(2, "c", MAX_COUNT, 11, ephemeral=True, task=6), 100.0)
    with pytest.raises(DeadlockError):  # task 5 of session 1 still holds c
        restarted.apply(Acquire(1, "d", MAX_COUNT, 12, ephemeral=True, task=5), 100.0)


# -- restarts, and snapshots written by a forked child --------------------------------


def test_a_session_logged_before_identities_replays_without_one(tmp_path: Path) -> None:
    """CreateSession was ``[10, node, key, timeout, description]`` before protocol version 2."""
    journal = Journal(DataDir(tmp_path))
    engine = journal.open(0.0)
    step(engine, journal, CreateNode("n"), 0.0)
    journal.data_dir.append(msgpack.packb([1, 1.0, [10, "n", KEY, 30.0, "old worker"]]))
    journal.commit()
    journal.abort()
    restarted = reopen(tmp_path, 100.0)
    [session] = restarted.sessions.values()
    assert (session.description, session.identity) == ("old worker", ClientIdentity())


def test_identities_and_kills_are_logged_and_replayed(tmp_path: Path) -> None:
    journal = Journal(DataDir(tmp_path))
    engine = journal.open(0.0)
    who = ClientIdentity("host-a", 7, "worker")
    step(engine, journal, CreateNode("n", NodeConfig(lock_delay=5.0)), 0.0)
    step(engine, journal, CreateSession("n", KEY, 30.0, "kept", who), 1.0)
    step(engine, journal, CreateSession("n", KEY, 30.0, "killed", who), 2.0)
    step(engine, journal, Acquire(2, "m", MAX_COUNT, request_id=1, ephemeral=True), 3.0)
    step(engine, journal, KillSession("n", 2), 4.0)
    reference = reference_after_restart(engine, 100.0)
    size = sum(p.stat().st_size for p in tmp_path.glob("wal-*.log"))
    for listing in (ListNodes(), ListSemaphores("n"), ListSessions("n")):
        step(engine, journal, listing, 4.0)  # read-only: not logged
    assert sum(p.stat().st_size for p in tmp_path.glob("wal-*.log")) == size
    journal.abort()
    restarted = reopen(tmp_path, 100.0)
    assert comparable(restarted) == reference
    [kept] = restarted.sessions.values()
    assert (kept.description, kept.identity) == ("kept", who)
    # The killed session's mutex is in lock-delay, as after an expiry.
    assert restarted.nodes["n"].semaphores["m"].blocked_until > 0


def test_a_node_annex_is_logged_and_replayed_and_reading_it_is_not_logged(
    tmp_path: Path,
) -> None:
    journal = Journal(DataDir(tmp_path))
    engine = journal.open(0.0)
    step(engine, journal, CreateNode("n"), 0.0)
    step(engine, journal, SetNodeAnnex("n", "ydb", b"\x01settings"), 1.0)
    step(engine, journal, SetNodeAnnex("n", "gone", b"x"), 1.0)
    step(engine, journal, SetNodeAnnex("n", "gone", b""), 2.0)
    step(engine, journal, SetNodeAnnex("n", "", b"bad key"), 2.0)  # fails: not logged
    size = sum(p.stat().st_size for p in tmp_path.glob("wal-*.log"))
    step(engine, journal, GetNodeAnnex("n", "ydb"), 3.0)  # read-only: not logged
    assert sum(p.stat().st_size for p in tmp_path.glob("wal-*.log")) == size
    reference = reference_after_restart(engine, 100.0)
    journal.abort()  # a crash: only what was committed
    restarted = reopen(tmp_path, 100.0)  # from the log alone
    assert comparable(restarted) == reference
    assert restarted.apply(GetNodeAnnex("n", "ydb"), 100.0) == b"\x01settings"
    assert restarted.apply(GetNodeAnnex("n", "gone"), 100.0) == b""
    journal = Journal(DataDir(tmp_path))  # and from a snapshot
    engine = journal.open(200.0)
    journal.snapshot(engine)
    step(engine, journal, SetNodeAnnex("n", "after", b"a"), 201.0)
    journal.abort()
    assert list(tmp_path.glob("snapshot-*.bin"))
    again = reopen(tmp_path, 300.0)
    assert again.nodes["n"].annex == {"ydb": b"\x01settings", "after": b"a"}


def fill(
    engine: Engine,
    journal: Journal,
    rng: random.Random,
    now: float,
    steps: int,
    logged: list[float] | None = None,
) -> float:
    """Random commands (and time) through ``journal``; the time after the last. The
    time of each step that logged a record is appended to ``logged``."""
    for request_id in range(1, steps):
        now += rng.choice([0.0, 0.1, 0.4, 1.5])
        logged_now = step(engine, journal, random_command(rng, engine, 10_000 + request_id), now)
        if logged_now and logged is not None:
            logged.append(now)
    return now


@pytest.mark.parametrize("seed", range(12))
def test_restarts_in_a_row_replay_to_the_same_state(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    journal = Journal(DataDir(tmp_path, FsyncMode.OFF), compact_every=rng.choice([5, 10_000]))
    engine = journal.open(0.0)
    step(engine, journal, CreateNode("n", NodeConfig(recovery_window=30.0)), 0.0)
    for _ in range(3):
        step(engine, journal, CreateSession("n", KEY), 0.0)
    logged = [0.0]
    fill(engine, journal, rng, 0.0, 40, logged)
    for restart in range(1, 4):
        if rng.random() < 0.5 and journal.needs_snapshot(engine):
            journal.snapshot(engine)
            # (a snapshot keeps the engine's time, moved by failed commands after the
            # last record too: a restart resumes from it)
            logged.append(engine.now)
        journal.abort()  # kill -9
        # (a failed command after the last record moved the time and left none)
        expected = reference_after_restart(engine, 1_000.0 * restart, logged_at=logged[-1])
        journal = Journal(DataDir(tmp_path, FsyncMode.OFF), compact_every=journal.compact_every)
        engine = journal.open(1_000.0 * restart)
        assert comparable(engine) == expected
        # Sessions re-attach on the new clock; the records after it are on that clock.
        for sid in list(engine.sessions):
            seq = engine.sessions[sid].seq_no + 1
            step(engine, journal, AttachSession(sid, KEY, seq), 1_000.0 * restart)
        logged.append(1_000.0 * restart)  # (the restart's resume record, at least)
        fill(engine, journal, rng, 1_000.0 * restart, 30, logged)
    journal.abort()
    assert comparable(reopen(tmp_path, 9_000.0)) == reference_after_restart(
        engine, 9_000.0, logged_at=logged[-1]
    )


def wait_readable(fd: int) -> None:
    ready, _, _ = select.select([fd], [], [], 30)
    assert ready, "the snapshot's child never finished"


def test_a_snapshot_written_by_a_child_replaces_the_log_behind_it(tmp_path: Path) -> None:
    rng = random.Random(7)
    journal = Journal(DataDir(tmp_path, FsyncMode.OFF), compact_every=5)
    engine = journal.open(0.0)
    step(engine, journal, CreateNode("n"), 0.0)
    for _ in range(3):
        step(engine, journal, CreateSession("n", KEY), 0.0)
    now = fill(engine, journal, rng, 0.0, 30)
    assert journal.needs_snapshot(engine)
    fd = journal.start_snapshot(engine)
    assert fd is not None
    assert journal.snapshot_fd == fd
    assert not journal.needs_snapshot(engine)  # one at a time
    # The server goes on while the child writes: these land in the new segment.
    now = fill(engine, journal, rng, now, 30)
    wait_readable(fd)
    assert journal.finish_snapshot()
    assert journal.snapshot_fd is None
    assert len(list(tmp_path.glob("snapshot-*.bin"))) == 1
    assert len(list(tmp_path.glob("wal-*.log"))) == 1
    journal.abort()
    assert comparable(reopen(tmp_path, 500.0)) == reference_after_restart(engine, 500.0)


def test_a_failed_child_keeps_the_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    journal = Journal(DataDir(tmp_path, FsyncMode.OFF), compact_every=1)
    engine = journal.open(0.0)
    step(engine, journal, CreateNode("n"), 0.0)

    def broken(self: Compaction, snapshot: bytes) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(Compaction, "write", broken)  # the child inherits it
    fd = journal.start_snapshot(engine)
    assert fd is not None
    wait_readable(fd)
    assert not journal.finish_snapshot()
    assert list(tmp_path.glob("snapshot-*")) == []
    assert journal.needs_snapshot(engine)  # its records still count
    step(engine, journal, CreateSession("n", KEY), 1.0)
    journal.abort()
    assert comparable(reopen(tmp_path, 50.0)) == reference_after_restart(engine, 50.0)


def test_a_crash_while_the_child_writes_recovers_and_cleans_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = Journal(DataDir(tmp_path, FsyncMode.OFF), compact_every=1)
    engine = journal.open(0.0)
    step(engine, journal, CreateNode("n"), 0.0)
    original = Compaction.write

    def slow(self: Compaction, snapshot: bytes) -> None:
        self.temp.write_bytes(b"half")
        time.sleep(30)  # killed long before
        original(self, snapshot)

    monkeypatch.setattr(Compaction, "write", slow)
    assert journal.start_snapshot(engine) is not None
    step(engine, journal, CreateSession("n", KEY), 1.0)
    time.sleep(0.2)
    journal.abort()  # the server dies: its child is stopped with it
    assert comparable(reopen(tmp_path, 50.0)) == reference_after_restart(engine, 50.0)
    assert list(tmp_path.glob("*.tmp")) == []


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="needs /proc")
def test_the_child_holds_no_descriptor_of_the_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Else a server killed while its child writes could not be restarted at once:
    the child would still hold the data directory's lock and the listening socket."""
    lock = lock_data_dir(tmp_path)
    journal = Journal(DataDir(tmp_path, FsyncMode.OFF), compact_every=1)
    engine = journal.open(0.0)
    step(engine, journal, CreateNode("n"), 0.0)
    original = Compaction.write

    def slow(self: Compaction, snapshot: bytes) -> None:
        time.sleep(1.0)
        original(self, snapshot)

    monkeypatch.setattr(Compaction, "write", slow)
    fd = journal.start_snapshot(engine)
    assert fd is not None
    assert journal._child is not None
    time.sleep(0.3)  # the child has closed what it inherited by now
    kept = os.listdir(f"/proc/{journal._child.pid}/fd")
    lock.close()  # as if the server died: a new one can lock the directory at once
    lock_data_dir(tmp_path).close()
    wait_readable(fd)
    assert journal.finish_snapshot()
    journal.close()
    # stdio, and the end of the pipe its exit closes: nothing else
    assert len(kept) == 4
    assert sorted(int(n) for n in kept)[:3] == [0, 1, 2]


def test_a_graceful_close_snapshots_a_long_tail_only(tmp_path: Path) -> None:
    journal = Journal(DataDir(tmp_path / "short"), compact_every=100)
    engine = journal.open(0.0)
    step(engine, journal, CreateNode("n"), 0.0)
    journal.close(engine)
    assert list((tmp_path / "short").glob("snapshot-*.bin")) == []
    journal = Journal(DataDir(tmp_path / "long"), compact_every=3)
    engine = journal.open(0.0)
    for n in range(5):
        step(engine, journal, CreateNode(f"n{n}"), 0.0)
    journal.close(engine)
    assert len(list((tmp_path / "long").glob("snapshot-*.bin"))) == 1
    assert len(reopen(tmp_path / "long", 9.0).nodes) == 5


def test_start_up_pauses_the_collector_and_logs_its_resume(tmp_path: Path) -> None:
    journal = Journal(DataDir(tmp_path))
    journal.open(0.0)
    journal.close()
    records, _ = _read_records(next(tmp_path.glob("wal-*.log")), RECORD_LIMIT)
    assert [msgpack.unpackb(r) for r in records] == [[RESUME_RECORD, 0.0]]
    assert gc.isenabled()


def test_a_reservation_replays_at_the_time_its_host_gave_it(tmp_path: Path) -> None:
    """ReserveUnits carries the host's wall clock (UNIX seconds): the journal keeps it,
    so a replay, however much later and on whatever monotonic clock, makes the same
    bucket, and the limiter's TAT means the same after the restart."""
    from tenure._core import CreateSemaphore, ReserveUnits
    from tenure._core.rates import Bucket, bucket_data, parse_bucket

    journal = Journal(DataDir(tmp_path))
    engine = journal.open(0.0)
    step(engine, journal, CreateNode("n"), 0.0)
    step(engine, journal, CreateSession("n", KEY), 0.0)
    step(engine, journal, CreateSemaphore(1, "api", 1, bucket_data(Bucket(2.0, 1.0, 0.0))), 0.0)
    wall = 1_750_000_000.0
    for i in range(3):  # each one 1/2 s after the one before, on the wall clock
        step(engine, journal, ReserveUnits(1, "api", 1, None, wall + i * 0.1), 1.0 + i)
    before = engine.nodes["n"].semaphores["api"].data
    assert parse_bucket("api", before).tat == wall + 1.5
    journal.abort()
    restarted = reopen(tmp_path, 9_000.0)
    assert restarted.nodes["n"].semaphores["api"].data == before


def test_an_offer_and_an_adoption_replay(tmp_path: Path) -> None:
    """OfferHold and AdoptHold are logged in their wire layout: a replay moves the same
    hold to the same session under the same token, and an offer not yet adopted still
    adopts after the restart (with its secret, once)."""
    from tenure._core import Acquire, AdoptHold, OfferHold
    from tenure._core.handlers.handoffs import digest_of
    from tenure.errors import LeaseLostError

    journal = Journal(DataDir(tmp_path))
    engine = journal.open(0.0)
    step(engine, journal, CreateNode("n"), 0.0)
    for _ in range(3):
        step(engine, journal, CreateSession("n", KEY), 0.0)
    step(engine, journal, Acquire(1, "moved", 1, 11, b"m", ephemeral=True), 1.0)
    step(engine, journal, Acquire(1, "offered", 1, 12, b"o", ephemeral=True), 1.0)
    step(engine, journal, OfferHold(1, "moved", digest_of(b"m" * 16)), 2.0)
    step(engine, journal, OfferHold(1, "offered", digest_of(b"o" * 16)), 2.0)
    assert step(engine, journal, AdoptHold(2, "moved", 1, 0, 1, b"m" * 16), 3.0)
    [moved] = engine.nodes["n"].semaphores["moved"].owners.values()
    assert (moved.session_id, moved.token) == (2, 3)
    journal.abort()
    restarted = reopen(tmp_path, 100.0)
    [owner] = restarted.nodes["n"].semaphores["moved"].owners.values()
    assert (owner.session_id, owner.token, owner.data) == (2, 3, b"m")
    adopted = restarted.apply(AdoptHold(3, "offered", 1, 0, 2, b"o" * 16), 101.0)
    assert adopted.token == 4
    with pytest.raises(LeaseLostError):
        restarted.apply(AdoptHold(2, "offered", 1, 0, 2, b"o" * 16), 101.0)
