"""``bench.micro.memory_holds``' in-process measures: the memory budget's estimate per
held mutex (what ``bytes_per_hold`` gives ``bench/scale`` beside the RSS), where a
hold's heap is, with a session's table of holds past MANY names, and the restart's
parts: a recovery of a data directory taken apart in this process (what ``--restart``
prints beside a real server's restart). No server is started: a server's RSS and
restart are for the bench alone to measure."""

from __future__ import annotations

from pathlib import Path

from bench.micro.memory_holds import engine_estimate, parts, restart_parts

from tenure._core import MAX_COUNT, Acquire, CreateNode, CreateSession, NodeConfig
from tenure._core.many_holds import MANY
from tenure._core.quotas import OBJECT_BYTES, Q_HOLDS, Q_SEMAPHORES
from tenure.server import DataDir, FsyncMode, Journal


def test_the_estimate_per_hold_is_a_semaphore_a_hold_and_the_name() -> None:
    holds, sessions = 600, 2
    names = [f"lock-{s}-{i}" for s in range(sessions) for i in range(holds // sessions)]
    expected = OBJECT_BYTES[Q_SEMAPHORES] + OBJECT_BYTES[Q_HOLDS] + sum(map(len, names)) / holds
    assert engine_estimate(holds, sessions) == expected


def test_a_session_of_many_holds_keeps_them_in_about_a_pointer_each() -> None:
    found = parts(4 * MANY, 1)
    assert found["sessions' holds tables"] < 12  # (a dict of as many: about 31 to 40)
    assert found["semaphores' rests"] == 0  # (held mutexes: their defaults, no rest)


def test_the_parts_of_a_recovery_cover_the_snapshot_and_the_records_after_it(
    tmp_path: Path,
) -> None:
    journal = Journal(DataDir(tmp_path, FsyncMode.OFF))
    engine = journal.open(0.0)
    node = CreateNode("n", NodeConfig())
    engine.apply(node, 0.0)
    journal.log_command(node, 0.0)
    session = CreateSession("n", b"k" * 16)
    sid = engine.apply(session, 0.0).session_id
    journal.log_command(session, 0.0)
    journal.snapshot(engine)
    for i in range(3):  # three records after the snapshot
        held = Acquire(sid, f"m{i}", MAX_COUNT, i, b"", None, True)
        engine.apply(held, 0.0)
        journal.log_command(held, 0.0)
    journal.close()
    parts_ = restart_parts(tmp_path)
    assert list(parts_) == [
        "reading the files",
        "unpacking the snapshot",
        "loading the snapshot",
        "replaying 3 records",
        "resuming on a new clock",
    ]
    assert all(seconds >= 0 for seconds in parts_.values())
