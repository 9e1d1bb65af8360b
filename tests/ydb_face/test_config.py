"""``tenure serve`` refuses bad YDB settings at start: exit status 2, naming the setting."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.server.wire import WAIT, free_port

pytestmark = pytest.mark.timeout(60)


def serve_fails(tmp_path: Path, *flags: str) -> str:
    """Run ``tenure serve`` with ``flags``, which must exit 2 at once; its stderr."""
    result = subprocess.run(
        [sys.executable, "-m", "tenure", "serve", "--data-dir", str(tmp_path / "data"), *flags],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=WAIT,
        check=False,
    )
    assert result.returncode == 2, result
    assert not (tmp_path / "data").exists()  # refused before anything was made
    return result.stderr


@pytest.mark.parametrize("other", ["--port", "--dflockd-port", "--http-port"])
def test_a_ydb_port_shared_with_another_listener_exits_2(tmp_path: Path, other: str) -> None:
    port = str(free_port())
    flags = ["--port", str(free_port())] if other != "--port" else []
    stderr = serve_fails(tmp_path, *flags, other, port, "--ydb-port", port)
    assert f"--ydb-port={port}: {other} is that port too" in stderr


@pytest.mark.parametrize("database", ["local", "/", "/local/", "//local", "/a//b", ""])
def test_a_bad_ydb_database_exits_2(tmp_path: Path, database: str) -> None:
    stderr = serve_fails(
        tmp_path,
        "--port",
        str(free_port()),
        "--ydb-port",
        str(free_port()),
        "--ydb-database",
        database,
    )
    assert f"--ydb-database={database!r}" in stderr
    assert "absolute path" in stderr


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--ydb-ping-interval", "0"),
        ("--ydb-ticket-ttl", "0.5"),
        ("--ydb-max-message-size", "1048575"),
        ("--ydb-max-message-size", str(2**30 + 1)),
        ("--ydb-max-listed-resources", "0"),
    ],
)
def test_ydb_limits_out_of_range_exit_2(tmp_path: Path, flag: str, value: str) -> None:
    ports = ("--port", str(free_port()), "--ydb-port", str(free_port()))
    stderr = serve_fails(tmp_path, *ports, flag, value)
    assert flag in stderr


@pytest.mark.parametrize("advertise", ["host:0", "host:65536", ":2136", "[::1]:x", "h:p"])
def test_a_bad_ydb_advertise_exits_2(tmp_path: Path, advertise: str) -> None:
    ports = ("--port", str(free_port()), "--ydb-port", str(free_port()))
    stderr = serve_fails(tmp_path, *ports, "--ydb-advertise", advertise)
    assert "--ydb-advertise" in stderr
    assert "HOST:PORT" in stderr
