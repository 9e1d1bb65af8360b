"""Deleting the data directory's lock file lets no second server in (issue 28)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import tenure.sync
from tenure.server._durability.identity import lock_data_dir

from .wire import WAIT, ServerProcess


def serve_alone(data: Path) -> subprocess.CompletedProcess[str]:
    """``tenure serve`` on ``data`` (a free port), for a start expected to fail."""
    return subprocess.run(
        [sys.executable, "-m", "tenure", "serve", "--port", "0", "--data-dir", str(data)],
        capture_output=True,
        text=True,
        timeout=3 * WAIT,
        check=False,
    )


def test_a_deleted_lock_file_lets_no_second_server_in(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with ServerProcess(data) as first:
        url = f"tenure://127.0.0.1:{first.port}"
        with tenure.sync.connect(url) as client:
            client.create_node("before")
        (data / "lock").unlink()
        second = serve_alone(data)
        assert second.returncode == 1, second.stderr
        # Named by its pid (from /proc/locks); the wording says the lock file was deleted
        # unless the first server's check (every 2 s) already made a new one.
        named = f"data directory {data} is in use by another tenure server (pid {first.proc.pid}"
        assert named in second.stderr
        # The first notices (one stat every 2 s), says so and locks a new lock file...
        first.wait_log("was deleted or replaced while this server runs")
        assert (data / "lock").read_text() == f"{first.proc.pid}\n"
        # ...and keeps serving: nothing was written by anyone else.
        with tenure.sync.connect(url) as client:
            client.create_node("after")
        assert first.signal(signal.SIGTERM) == 0
    with ServerProcess(data) as again, tenure.sync.connect(f"tenure://127.0.0.1:{again.port}") as c:
        assert {"before", "after"} <= set(c.list_nodes())


def test_a_lock_file_replaced_before_the_flock_locks_nothing(tmp_path: Path) -> None:
    # What the first server re-creates is locked too: a start on the new file is refused.
    data = tmp_path / "data"
    with lock_data_dir(data) as held:
        (data / "lock").unlink()
        assert not held.check()  # noticed, and locked a new one
        assert held.check()
        second = serve_alone(data)
    assert second.returncode == 1
    assert "in use by another tenure server" in second.stderr
