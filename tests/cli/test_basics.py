"""The ``tenure`` command itself: version, help, usage errors, demo, serve and migrate."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from pathlib import Path

import tenure
from tenure._build import build
from tenure.server._faces import every_setting
from tests.cli.support import one_error_line, run_tenure
from tests.server.wire import ServerProcess, free_port


def test_version(tenure_executable: object) -> None:
    result = run_tenure("--version")
    assert result.returncode == 0
    # The build that runs, said (docs/operations.md, "Installing").
    assert result.stdout.strip() == f"tenure {tenure.__version__} ({build()} build)"


def test_no_command_prints_help_and_fails(tenure_executable: object) -> None:
    result = run_tenure()
    assert result.returncode == 2
    for command in ("lock", "elect", "ls", "describe", "sessions", "node", "serve", "demo"):
        assert command in result.stderr


def test_unknown_command_and_option_are_one_line_usage_errors(tenure_executable: object) -> None:
    result = run_tenure("frobnicate")
    assert result.returncode == 2
    assert "frobnicate" in one_error_line(result)
    result = run_tenure("ls", "--bogus")
    assert result.returncode == 2
    assert "--bogus" in one_error_line(result)


def test_demo_serves_workers_in_order(tenure_executable: object) -> None:
    result = run_tenure("demo")  # memory:// unless TENURE_URL says otherwise
    assert result.returncode == 0, result.stderr
    assert "served in arrival order: ['worker-0', 'worker-1', 'worker-2']" in result.stdout
    tokens = [int(line.rsplit(" ", 1)[1]) for line in result.stdout.splitlines() if "holds" in line]
    assert tokens == sorted(tokens)
    assert len(set(tokens)) == 3
    assert "leader of 'primary': host-a:9090 (is me: True)" in result.stdout


def test_demo_runs_twice_against_one_server(url: str) -> None:
    first = run_tenure("demo", "--url", url)
    second = run_tenure("demo", url=url)  # TENURE_URL works too
    for result in (first, second):
        assert result.returncode == 0, result.stderr
        assert result.stderr == ""
        assert result.stdout.endswith("demo done\n")
    # The second run's tokens come after the first's: the same server, the same node.
    tokens = [
        [int(line.rsplit(" ", 1)[1]) for line in result.stdout.splitlines() if "holds" in line]
        for result in (first, second)
    ]
    assert max(tokens[0]) < min(tokens[1])


def test_serve_help_lists_every_setting(tenure_executable: object) -> None:
    result = run_tenure("serve", "--help")
    assert result.returncode == 0, result.stderr
    for setting in every_setting():
        assert setting.flag in result.stdout


def test_serve_refuses_a_bad_setting_with_status_2(tenure_executable: object) -> None:
    result = run_tenure("serve", "--port", "nope")
    assert result.returncode == 2
    assert "--port" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_mistyped_serve_flag_is_told_first_with_one_line_of_usage(
    tenure_executable: object,
) -> None:
    # Issue 57: argparse printed its 53 lines of usage (a flag per setting) before the
    # one line that said what was wrong. Now the error is first, with the flag meant.
    result = run_tenure("serve", "--data-dri", "/tmp/x")
    assert result.returncode == 2
    error, usage = result.stderr.splitlines()
    assert error == (
        "tenure serve: error: unrecognized arguments: --data-dri /tmp/x (did you mean --data-dir?)"
    )
    assert usage == "usage: tenure serve [OPTIONS] (see 'tenure serve --help')"
    bad_value = run_tenure("serve", "--port", "nope")
    assert bad_value.returncode == 2
    assert bad_value.stderr.splitlines()[0].startswith("tenure serve: error: --port")
    assert len(bad_value.stderr.splitlines()) == 2


def test_migrate_refuses_a_url_without_tables(tenure_executable: object) -> None:
    result = run_tenure("migrate", "memory://")
    assert result.returncode == 2
    assert "only postgres:// URLs" in one_error_line(result)


def _without_cli_extra(*args: str) -> subprocess.CompletedProcess[str]:
    """``tenure ARGS`` in a Python where click and rich cannot be imported."""
    code = (
        "import sys; sys.modules['click'] = None; sys.modules['rich'] = None; "
        "from tenure.__main__ import main; sys.exit(main(sys.argv[1:]))"
    )
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def test_a_missing_cli_extra_is_one_clear_line() -> None:
    result = _without_cli_extra("ls")
    assert result.returncode == 3
    assert "pip install 'tenure[cli]'" in one_error_line(result)


def test_serve_and_migrate_run_without_the_cli_extra() -> None:
    result = _without_cli_extra("serve", "--help")
    assert result.returncode == 0, result.stderr
    assert "--data-dir" in result.stdout
    result = _without_cli_extra("migrate", "memory://")
    assert result.returncode == 2
    assert "only postgres:// URLs" in result.stderr


def test_the_http_port_is_named_as_such(tmp_path: Path) -> None:
    # A client pointed at --http-port read "HTTP/1.0 400" as a frame of 1213486160 bytes.
    http = free_port()
    with ServerProcess(tmp_path / "data", "--fsync", "off", "--http-port", str(http)):
        result = run_tenure("ls", url=f"tenure://127.0.0.1:{http}")
    assert result.returncode == 3
    line = one_error_line(result)
    assert "ProtocolError: the peer speaks HTTP ('HTTP/1." in line
    assert "--http-port" in line
    assert "bytes" not in line


def test_a_peer_that_sends_text_is_named_as_such(tenure_executable: object) -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]

        def greet() -> None:  # as an SSH server does, before it reads anything
            conn, _ = listener.accept()
            with conn:
                conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")
                conn.recv(1024)

        greeter = threading.Thread(target=greet, daemon=True)
        greeter.start()
        result = run_tenure("ls", url=f"tenure://127.0.0.1:{port}")
        greeter.join(timeout=10)
    assert result.returncode == 3
    assert "the peer sent text ('SSH-2.0-OpenSSH_9.6'), not tenure's protocol" in (
        one_error_line(result)
    )
