"""The journal: an engine rebuilt from disk equals the engine that wrote it."""

from __future__ import annotations

import random
from pathlib import Path

import msgpack
import pytest

from tenure._core import Command, CreateNode, CreateSession, Engine, NodeConfig
from tenure._core.snapshot import Plain, dump, load, resume
from tenure.errors import TenureError
from tenure.server import CorruptLogError, DataDir, FsyncMode
from tenure.server._journal import Journal

from ..core.test_snapshot import random_command

KEY = b"protection-key"


def step(engine: Engine, journal: Journal, command: Command[object], now: float) -> None:
    """What the host does: tick (logged if it did anything), apply, log, commit."""
    if engine.tick(now):
        journal.log_tick(now)
    try:
        engine.apply(command, now)
    except TenureError:
        pass  # a failed command changed nothing
    else:
        journal.log_command(command, now)
    journal.commit()
    engine.take_effects()


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


def reference_after_restart(engine: Engine, now: float) -> Plain:
    twin = load(dump(engine))
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
    config = NodeConfig(lock_delay=rng.choice([0.0, 2.0]), session_timeout=timeout)
    step(engine, journal, CreateNode("n", config), 0.0)
    for _ in range(4):
        step(engine, journal, CreateSession("n", KEY), 0.0)
    now = 0.0
    for request_id in range(1, rng.randint(20, 150)):
        now += rng.choice([0.0, 0.1, 0.4, 1.5])
        step(engine, journal, random_command(rng, engine, request_id), now)
        if journal.needs_snapshot():
            journal.snapshot(engine)
    journal.log_tick(now + 1)  # queued, never committed: lost in the crash
    journal.abort()  # kill -9: what was committed is on disk, nothing more
    restarted = reopen(tmp_path, 5_000.0)
    assert comparable(restarted) == reference_after_restart(engine, 5_000.0)
    assert restarted.last_token == engine.last_token


def test_a_second_restart_replays_from_the_snapshot_of_the_first(tmp_path: Path) -> None:
    journal = Journal(DataDir(tmp_path))
    engine = journal.open(0.0)
    step(engine, journal, CreateNode("n"), 0.0)
    step(engine, journal, CreateSession("n", KEY), 0.0)
    journal.abort()
    first = reopen(tmp_path, 100.0)
    second = reopen(tmp_path, 200.0)
    assert comparable(second) == reference_after_restart(first, 200.0)
    assert len(list(tmp_path.glob("snapshot-*.bin"))) == 1


def test_read_only_commands_are_not_logged(tmp_path: Path) -> None:
    from tenure._core import DescribeNode

    journal = Journal(DataDir(tmp_path))
    engine = journal.open(0.0)
    step(engine, journal, CreateNode("n"), 0.0)
    size = sum(p.stat().st_size for p in tmp_path.glob("wal-*.log"))
    step(engine, journal, DescribeNode("n"), 1.0)
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
    with pytest.raises(CorruptLogError, match="logged record 0 is unreadable"):
        reopen(tmp_path, 10.0)
