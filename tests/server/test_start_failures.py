"""A ``tenure serve`` that cannot start says why in one line, and exits 1.

Each case is a real server process meeting the real obstacle: a port something
listens on, a data directory another process holds, a damaged log, a directory its
user may not touch, an address that is not this machine's. The reason is the
message of one ``critical`` line, ``start_failed`` (with ``reason`` for machines),
and no traceback is written.
"""

from __future__ import annotations

import getpass
import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tenure.server._durability.identity import lock_data_dir

from .terminal import serve_on_terminal
from .wire import WAIT, free_port

pytestmark = pytest.mark.timeout(60)

#: Root passes every mode: as root, the server runs without the capabilities that let
#: it (setpriv drops them from its bounding set), so modes stop it as they stop a user.
AS_A_USER = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--"]


def failed_start(data_dir: Path, *flags: str, prefix: Sequence[str] = ()) -> dict[str, Any]:
    """Run ``tenure serve`` (after ``prefix``), which must exit 1 without a traceback;
    its start_failed line."""
    result = subprocess.run(
        [*prefix, sys.executable, "-m", "tenure", "serve", "--data-dir", str(data_dir), *flags],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=3 * WAIT,
        check=False,
    )
    assert result.returncode == 1, result
    assert "Traceback" not in result.stderr
    lines: list[dict[str, Any]] = [json.loads(line) for line in result.stderr.splitlines()]
    [failed] = [line for line in lines if line["event"] == "start_failed"]
    assert failed["level"] == "critical"
    assert "exc" not in failed
    assert "\n" not in failed["msg"]
    return failed


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A loopback port something listens on."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", free_port()))
        taken.listen()
        yield int(taken.getsockname()[1])


def test_a_port_in_use_says_so_and_how_to_pick_another(tmp_path: Path, busy_port: int) -> None:
    failed = failed_start(tmp_path / "data", "--port", str(busy_port))
    assert failed["reason"] == "port_in_use"
    assert failed["msg"] == (
        f"port {busy_port} on 127.0.0.1 is in use: pick another with --port or TENURE_PORT "
        "(--port 0 lets the system pick a free one), or stop what listens there"
    )


#: The listeners besides the main port: their flags and variables.
LISTENERS = [
    ("--dflockd-port", "TENURE_DFLOCKD_PORT"),
    ("--http-port", "TENURE_HTTP_PORT"),
    ("--ydb-port", "TENURE_YDB_PORT"),
]


@pytest.mark.parametrize(("flag", "variable"), LISTENERS)
def test_another_listener_on_a_port_in_use_names_its_own_setting(
    tmp_path: Path, busy_port: int, flag: str, variable: str
) -> None:
    failed = failed_start(tmp_path / "data", "--port", str(free_port()), flag, str(busy_port))
    assert failed["reason"] == "port_in_use"
    assert failed["msg"] == (
        f"port {busy_port} on 127.0.0.1 is in use: pick another with {flag} or {variable}, "
        "or stop what listens there"
    )


@pytest.mark.parametrize(("flag", "variable"), [("--port", "TENURE_PORT"), *LISTENERS[:1]])
def test_a_cluster_member_names_the_setting_of_its_port_in_use(
    tmp_path: Path, busy_port: int, flag: str, variable: str
) -> None:
    # The member binds its ports before it reaches etcd (none listens at this URL).
    ports = {"--port": str(free_port()), flag: str(busy_port)}
    cluster = ("--cluster", f"etcd://127.0.0.1:{free_port()}/ports")
    failed = failed_start(tmp_path / "data", *cluster, *(x for kv in ports.items() for x in kv))
    assert failed["reason"] == "port_in_use"
    assert failed["msg"].startswith(f"port {busy_port} on 127.0.0.1 is in use: pick another with ")
    assert f"with {flag} or {variable}" in failed["msg"]


def test_an_address_not_of_this_machine_says_to_pick_another_host(tmp_path: Path) -> None:
    # 192.0.2.1 is TEST-NET-1 (RFC 5737): assigned to no machine.
    failed = failed_start(tmp_path / "data", "--host", "192.0.2.1", "--port", str(free_port()))
    assert failed["reason"] == "address_unavailable"
    assert failed["msg"].startswith("'192.0.2.1' is not an address of this machine (")
    assert failed["msg"].endswith("): pick another with --host or TENURE_HOST")


def test_a_data_dir_another_process_holds_says_so(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with lock_data_dir(data):  # what a running server holds
        failed = failed_start(data, "--port", str(free_port()))
    assert failed["reason"] == "data_dir_locked"
    assert failed["msg"] == (
        f"data directory {data} is in use by another tenure server (pid {os.getpid()}; it "
        f"holds {data}/lock): "
        "stop that server, or pick another with --data-dir or TENURE_DATA_DIR"
    )


def test_a_corrupt_log_names_the_file_and_what_to_do(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    segment = data / "wal-0000000000000000.log"
    segment.write_bytes(b"not a log at all\n")
    failed = failed_start(data, "--port", str(free_port()))
    assert failed["reason"] == "corrupt_log"
    assert failed["msg"] == (
        f"data directory {data} cannot be trusted: {segment}: not a tenure log (bad header) "
        f"at byte offset 0; the server does not start on damaged data: `tenure repair {data}` "
        "explains the damage and can cut the log there; or restore it from a backup, or "
        "move it aside to start empty (docs/operations.md, 'The data directory')"
    )
    assert segment.read_bytes() == b"not a log at all\n"  # left as it was found


def test_a_data_dir_the_user_may_not_use_says_permission_denied(tmp_path: Path) -> None:
    prefix: list[str] = []
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("as root, the server needs setpriv to be stopped by a mode")
        prefix = AS_A_USER
    data = tmp_path / "data"
    data.mkdir(mode=0o000)
    try:
        failed = failed_start(data, "--port", str(free_port()), prefix=prefix)
    finally:
        data.chmod(0o700)
    assert failed["reason"] == "data_dir_denied"
    assert failed["msg"] == (
        f"data directory {data}: permission denied ({data}/lock): the server runs as "
        f"user {getpass.getuser()} (uid {os.geteuid()}), which must be able to create, "
        "read and write it: change its owner or mode, or pick another with --data-dir or "
        "TENURE_DATA_DIR"
    )


def test_on_a_terminal_a_failed_start_is_one_line_of_text(tmp_path: Path, busy_port: int) -> None:
    code, lines = serve_on_terminal(tmp_path / "data", "--port", str(busy_port))
    assert code == 1
    assert len(lines) == 2, lines  # why it stopped, then the settings given
    failed, config = lines
    assert " info     config: settings given (the rest are at their defaults" in config
    assert f"port={busy_port} " in config
    assert "max_connections=" not in config  # at its default: not shown
    assert " critical start_failed: " in failed
    assert f"port {busy_port} on 127.0.0.1 is in use: pick another with --port" in failed
    assert failed.endswith("reason=port_in_use")


def test_off_a_terminal_the_reason_comes_first_and_the_settings_are_short(
    tmp_path: Path, busy_port: int
) -> None:
    # Issue 50: stderr's first line was a 4.8 KB record of every setting, the reason
    # after it. Now the reason is first, and the config line has only what was given.
    data_dir = str(tmp_path / "data")
    result = subprocess.run(
        [sys.executable, "-m", "tenure", "serve", "--data-dir", data_dir, "--port", str(busy_port)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=3 * WAIT,
        check=False,
    )
    assert result.returncode == 1
    first, *rest = result.stderr.splitlines()
    assert json.loads(first)["event"] == "start_failed", first
    [config] = [json.loads(line) for line in rest if json.loads(line)["event"] == "config"]
    assert len(json.dumps(config)) < 400, config
    assert config["port"] == busy_port
    assert config["sources"] == {"port": "flag", "data_dir": "flag"}
    assert "max_connections" not in config  # at its default: not logged
