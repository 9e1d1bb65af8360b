"""``tenure ls``, ``describe``, ``sessions``, ``watch``, ``kill-session`` and ``node``."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import tenure
from tenure import MutexDescription
from tenure.cli._common import PERMISSION_WORDS, permission_words
from tenure.server._net.auth import READ_WRITE_COMMANDS
from tests.cli.support import (
    UNTIL_STOPPED,
    finish,
    one_error_line,
    run_tenure,
    start_tenure,
    stop,
    wait_for_line,
)
from tests.server.wire import ServerProcess

#: A holder's child: says it runs, then waits to be stopped.
HOLDING = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGTERM, lambda *_: (print('child got SIGTERM', flush=True),"
    " sys.exit(0)))\n"
    "print('child runs', flush=True)\n" + UNTIL_STOPPED
)


def read_json(*args: str, url: str) -> Any:
    """``tenure ARGS --json``'s document (asserting it succeeded)."""
    result = run_tenure(*args, "--json", url=url)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


async def describe_mutex(url: str, node: str, name: str) -> MutexDescription:
    """What the API's ``session.mutex(name).describe()`` answers."""
    async with tenure.connect(url) as client, client.session(node) as session:
        return await session.mutex(name).describe()


def hold(url: str, node: str, name: str, *extra: str) -> subprocess.Popen[str]:
    """``tenure lock`` holding ``name`` with a waiting child, once the child runs."""
    holder = start_tenure(
        "lock",
        name,
        "--node",
        node,
        "--create-node",
        *extra,
        "--",
        sys.executable,
        "-c",
        HOLDING,
        url=url,
    )
    wait_for_line(holder, "child runs")
    return holder


def test_node_create_describe_alter_drop(url: str, node: str) -> None:
    created = run_tenure("node", "create", node, "--set", "lock_delay=0.5", url=url)
    assert created.returncode == 0, created.stderr
    described = read_json("node", "describe", node, url=url)
    assert described["name"] == node
    assert described["config"]["lock_delay"] == 0.5
    assert described["sessions"] == 0
    altered = read_json(
        "node", "alter", node, "--set", "max_waiters=7", "--set", "default_lease=none", url=url
    )
    assert altered["config"]["max_waiters"] == 7
    assert altered["config"]["default_lease"] is None
    table = run_tenure("node", "describe", node, url=url)
    assert "max_waiters" in table.stdout
    assert "7" in table.stdout
    again = run_tenure("node", "create", node, url=url)
    assert again.returncode == 3
    assert "AlreadyExistsError" in one_error_line(again)
    assert run_tenure("node", "create", node, "--exist-ok", url=url).returncode == 0
    dropped = run_tenure("node", "drop", node, url=url)
    assert dropped.returncode == 0, dropped.stderr
    missing = run_tenure("node", "describe", node, url=url)
    assert missing.returncode == 3
    assert "NotFoundError" in one_error_line(missing)


def test_node_long_hold_is_set_zeroed_and_given_back_to_the_server(url: str, node: str) -> None:
    created = run_tenure("node", "create", node, "--set", "long_hold=300", url=url)
    assert created.returncode == 0, created.stderr
    assert read_json("node", "describe", node, url=url)["config"]["long_hold"] == 300.0
    zeroed = read_json("node", "alter", node, "--set", "long_hold=0", url=url)
    assert zeroed["config"]["long_hold"] == 0.0
    table = run_tenure("node", "describe", node, url=url)
    assert [line for line in table.stdout.splitlines() if "long_hold" in line]
    # "none" for every setting whose default is None: long_hold, max_hold, default_lease.
    bounded = read_json("node", "alter", node, "--set", "max_hold=60", url=url)
    assert bounded["config"]["max_hold"] == 60.0
    back = read_json(
        "node", "alter", node, "--set", "long_hold=none", "--set", "max_hold=None", url=url
    )
    assert (back["config"]["long_hold"], back["config"]["max_hold"]) == (None, None)
    refused = run_tenure("node", "alter", node, "--set", "long_hold=-1", url=url)
    assert refused.returncode != 0
    assert "long_hold" in one_error_line(refused)
    assert "long_hold" in run_tenure("node", "create", "--help", url=url).stdout


def test_node_settings_are_checked(url: str, node: str) -> None:
    for pair in ("nonsense=1", "max_waiters=many", "lock_delay", "recovery_window=-1"):
        result = run_tenure("node", "create", node, "--set", pair, url=url)
        assert result.returncode == 2, (pair, result.stderr)
        one_error_line(result)
    assert run_tenure("node", "alter", node, url=url).returncode == 2


def test_node_settings_name_the_recovery_window_and_take_its_old_name(url: str, node: str) -> None:
    created = run_tenure("node", "create", node, "--set", "recovery_window=12", url=url)
    assert created.returncode == 0, created.stderr
    assert created.stderr == ""
    assert read_json("node", "describe", node, url=url)["config"]["recovery_window"] == 12.0
    # The old name still works, with a notice naming the new one on stderr.
    altered = run_tenure("node", "alter", node, "--set", "session_timeout=7", "--json", url=url)
    assert altered.returncode == 0, altered.stderr
    assert "DeprecationWarning: --set session_timeout= is now --set recovery_window=" in (
        altered.stderr
    )
    config = json.loads(altered.stdout)["config"]
    assert config["recovery_window"] == 7.0
    assert "session_timeout" not in config
    helped = run_tenure("node", "create", "--help", url=url)
    assert "recovery_window" in helped.stdout
    assert "session_timeout" not in helped.stdout
    assert run_tenure("node", "drop", node, url=url).returncode == 0


def test_drop_with_live_sessions_needs_force(url: str, node: str) -> None:
    holder = hold(url, node, "job")
    try:
        refused = run_tenure("node", "drop", node, url=url)
        assert refused.returncode == 3
        line = one_error_line(refused)
        assert "PreconditionFailedError" in line
        assert "live session" in line
        assert "--force" in line  # the CLI's flag, not the API's force=True
        assert "force=True" not in line
        assert run_tenure("node", "drop", node, "--force", url=url).returncode == 0
        status, out, _ = finish(holder)
        assert status == 4  # the lock went with the node
        assert "child got SIGTERM" in out
    finally:
        stop(holder)


def test_ls_describe_sessions_show_who_holds_and_who_waits(url: str, node: str) -> None:
    holder = hold(url, node, "job", "--data", "batch-7")
    waiter = start_tenure("lock", "job", "--node", node, "--create-node", "--", "true", url=url)
    try:
        for _ in range(50):  # until the waiter has queued (bounded)
            described = read_json("describe", node, "job", url=url)
            if described["waiters"]:
                break
        assert node in read_json("ls", url=url)
        [line] = read_json("ls", node, "--prefix", "j", url=url)
        assert line == {
            "name": "job", "kind": "mutex", "limit": 1, "count": None, "owners": 1,
            "waiters": 1, "ephemeral": True,
        }  # fmt: skip
        assert read_json("ls", node, "--prefix", "x", url=url) == []

        assert (described["kind"], described["limit"], described["held"]) == ("mutex", 1, True)
        [owner] = described["owners"]
        assert owner["data"] == "batch-7"
        assert owner["description"].startswith("tenure lock job -- ")
        assert owner["identity"] == {
            "host": socket.gethostname(), "pid": holder.pid, "name": "tenure-cli",
        }  # fmt: skip
        assert owner["since"] is not None
        [queued] = described["waiters"]
        assert queued["identity"]["pid"] == waiter.pid
        assert queued["description"] == "tenure lock job -- true"

        text = run_tenure("describe", node, "job", url=url).stdout
        for shown in ("holders", "waiters", "batch-7", "tenure-cli", str(owner["token"])):
            assert shown in text

        sessions = read_json("sessions", node, url=url)
        by_id = {session["session_id"]: session for session in sessions}
        mine = by_id[owner["session_id"]]
        assert (mine["holds"], mine["waits"]) == (1, 0)
        assert by_id[queued["session_id"]]["waits"] == 1
        assert mine["identity"]["pid"] == holder.pid
        assert "tenure lock job" in run_tenure("sessions", node, url=url).stdout

        # The operator ends the holder's session: its command is stopped, the waiter runs.
        killed = run_tenure("kill-session", node, str(owner["session_id"]), url=url)
        assert killed.returncode == 0, killed.stderr
        status, out, err = finish(holder)
        assert status == 4, err
        assert "child got SIGTERM" in out
        assert "operator" in err
        assert finish(waiter)[0] == 0
        gone = run_tenure("kill-session", node, str(owner["session_id"]), url=url)
        assert gone.returncode == 3
        assert "NotFoundError" in one_error_line(gone)
    finally:
        for proc in (holder, waiter):
            stop(proc)


def test_watch_prints_each_change(url: str, node: str) -> None:
    run_tenure("node", "create", node, url=url)
    watcher = start_tenure("watch", node, "job", "--json", "--count", "3", url=url)
    try:
        first = json.loads(wait_for_line(watcher, '"exists"'))
        assert first["exists"] is False
        holder = hold(url, node, "job")
        # Seen held before the holder lets go (a watcher sees the latest state only).
        held = json.loads(wait_for_line(watcher, '"exists": true'))
        assert held["owners"][0]["identity"]["name"] == "tenure-cli"
        assert held["owners"][0]["identity"]["pid"] == holder.pid
        holder.send_signal(signal.SIGTERM)
        assert finish(holder)[0] == 0
        status, out, err = finish(watcher)
        assert status == 0, err
        assert json.loads(out)["exists"] is False
    finally:
        stop(watcher)
    line = run_tenure("watch", node, "job", "--count", "1", url=url)
    assert line.returncode == 0
    assert "'job': does not exist" in line.stdout


def test_reading_what_is_missing_is_one_line(url: str, node: str) -> None:
    for args in (["ls", node], ["sessions", node], ["describe", node, "job"]):
        result = run_tenure(*args, url=url)
        assert result.returncode == 3, (args, result.stderr)
        assert "NotFoundError" in one_error_line(result)
    run_tenure("node", "create", node, url=url)
    assert run_tenure("kill-session", node, "x", url=url).returncode == 2
    assert run_tenure("ls", "--prefix", "a", url=url).returncode == 2


def test_describe_of_a_free_mutex_agrees_with_the_api(url: str, node: str) -> None:
    # The API's session.mutex(name).describe() answers held=False for a mutex nobody
    # holds or waits for (it does not exist then): so does tenure describe.
    run_tenure("node", "create", node, url=url)
    free = run_tenure("describe", node, "job", url=url)
    assert free.returncode == 0, free.stderr
    assert "mutex 'job'" in free.stdout
    assert "free" in free.stdout
    described = read_json("describe", node, "job", url=url)
    assert (described["exists"], described["kind"], described["held"]) == (False, "mutex", False)
    assert (described["limit"], described["owners"], described["waiters"]) == (1, [], [])
    api = asyncio.run(describe_mutex(url, node, "job"))
    assert (api.held, api.limit, api.owner) == (described["held"], described["limit"], None)


def test_access_is_checked_by_the_server(tmp_path: Path) -> None:
    auth = tmp_path / "auth.toml"
    auth.write_text(
        '[[token]]\nname = "ops"\nsecret = "rw-secret"\naccess = "read-write"\n\n'
        '[[token]]\nname = "viewer"\nsecret = "ro-secret"\naccess = "read-only"\n'
    )
    with ServerProcess(tmp_path / "data", "--fsync", "off", "--auth-file", str(auth)) as server:
        base = f"tenure://127.0.0.1:{server.port}"
        writer, reader = f"{base}?token=rw-secret", f"{base}?token=ro-secret"
        assert run_tenure("node", "create", "ops", url=writer).returncode == 0
        holder = hold(writer, "ops", "job")
        try:
            [session] = read_json("sessions", "ops", url=reader)
            denied = run_tenure("kill-session", "ops", str(session["session_id"]), url=reader)
            assert denied.returncode == 3
            assert one_error_line(denied) == (
                "tenure: PermissionDeniedError: token 'viewer' is read-only: "
                "it may not end sessions on node 'ops'"
            )
            # tenure lock only reads an existing node (it was refused "CreateNode"),
            # and a refusal says what is missing in words, not the wire's commands.
            locked = run_tenure("lock", "job2", "--node", "ops", "--", "true", url=reader)
            assert locked.returncode == 3
            assert one_error_line(locked) == (
                "tenure: PermissionDeniedError: token 'viewer' is read-only: it may not "
                "take locks, semaphore tokens or leadership on node 'ops'"
            )
            created = run_tenure(
                "lock", "job", "--node", "new", "--create-node", "--", "true", url=reader
            )
            assert created.returncode == 3
            assert "it may not create nodes on node 'new'" in one_error_line(created)
            elected = run_tenure("elect", "boss", "--node", "ops", "--", "true", url=writer)
            assert elected.returncode == 0, elected.stderr
            refused = run_tenure("ls", url=f"{base}?token=wrong")
            assert refused.returncode == 3
            assert "AuthenticationError" in one_error_line(refused)
        finally:
            stop(holder)


def test_every_wire_command_has_words() -> None:
    # A refusal names a wire command; the CLI must have words for each one.
    assert {command.__name__ for command in READ_WRITE_COMMANDS} == set(PERMISSION_WORDS)
    assert permission_words("token 'x' may not send AlterNode on node 'a': it is limited to b") == (
        "token 'x' may not change nodes on node 'a': it is limited to b"
    )
