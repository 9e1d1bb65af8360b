"""``bench.micro.memory_holds``' restart parts: a recovery of a data directory taken
apart in this process (what ``--restart`` prints beside a real server's restart)."""

from __future__ import annotations

from pathlib import Path

from bench.micro.memory_holds import restart_parts

from tenure._core import MAX_COUNT, Acquire, CreateNode, CreateSession, NodeConfig
from tenure.server import DataDir, FsyncMode, Journal


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
    parts = restart_parts(tmp_path)
    assert list(parts) == [
        "reading the files",
        "unpacking the snapshot",
        "loading the snapshot",
        "replaying 3 records",
        "resuming on a new clock",
    ]
    assert all(seconds >= 0 for seconds in parts.values())
