"""YDB's JavaScript gRPC stack against a real ``tenure serve --ydb-port``: a second client.

``js/coordination.mjs`` drives the coordination service through ``@ydbjs/core``'s
``Driver`` (endpoint discovery, its channel options: messages up to 64 MiB) with the
stubs of ``@ydbjs/api/coordination``: the node calls, and ``Session`` streams. It runs
one scenario per ``node`` process and prints each step as a JSON line; these tests
assert on them. The exact versions are ``js/package-lock.json``'s, installed by
``scripts/bootstrap-js`` (``npm ci``; ``scripts/bootstrap test`` runs it).

Where node, a node as new as ``@ydbjs/core`` needs, or the installed packages are
missing, the tests skip, saying so, on a developer's machine, and *fail* under
``CI=true``: CI must never go green by not testing (as :func:`tests.servers.require`
does for the other servers).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, Final

import pytest

from tests.servers import require
from tests.ydb_face.conftest import DATABASE, YdbServer, unique

JS_DIR: Final = Path(__file__).resolve().parent / "js"
PROGRAM: Final = JS_DIR / "coordination.mjs"
#: The program's own deadline (it reports it and exits 1), and ours (it is killed).
DEADLINE_S: Final = 20.0
KILL_AFTER_S: Final = DEADLINE_S + 10.0

Event = dict[str, Any]


def node_binary() -> str | None:
    """The node to run: ``$TENURE_NODE``, else ``node`` on PATH."""
    override = os.environ.get("TENURE_NODE", "").strip()
    if override:
        return override if os.access(override, os.X_OK) else None
    return shutil.which("node")


def _package(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.strip().lstrip("v").split("-")[0].split("."))


def wanted_node() -> str:
    """The oldest node the package accepts (``engines.node`` of js/package.json, ``>=X``)."""
    engines: str = _package(JS_DIR / "package.json")["engines"]["node"]
    return engines.removeprefix(">=").strip()


def js_unavailable(node: str | None = None) -> str | None:
    """Why the JS tests cannot run here (to skip, or fail in CI), or None.

    ``node``: the binary to check (default :func:`node_binary`)."""
    install = "scripts/bootstrap-js installs it (scripts/bootstrap test runs it)"
    binary = node if node is not None else node_binary()
    if binary is None or not os.access(binary, os.X_OK):
        return f"node is not installed: {install}"
    try:
        shown = subprocess.run(
            [binary, "--version"], capture_output=True, text=True, timeout=10, check=True
        ).stdout
        have = _version(shown)
    except (OSError, subprocess.SubprocessError, ValueError) as error:
        return f"{binary} --version failed ({error}): {install}"
    want = wanted_node()
    if have < _version(want):
        return (
            f"node here is {shown.strip()}; @ydbjs/core needs Node.js >= {want} "
            "(Debian 12's nodejs is 18.x): install a newer Node.js"
        )
    pinned: dict[str, str] = _package(JS_DIR / "package.json")["dependencies"]
    for name, version in pinned.items():
        installed = JS_DIR / "node_modules" / name / "package.json"
        if not installed.exists():
            return f"{name} is not installed in {JS_DIR}: {install}"
        if _package(installed)["version"] != version:
            return f"{name} in {JS_DIR}/node_modules is not {version}: {install}"
    return None


def require_js() -> None:
    """Skip the test when the JS stack is missing here; fail it instead under ``CI=true``."""
    require(js_unavailable(), "node or @ydbjs package")


#: The module's server (conftest's ``server``) pings every 10 s (a third of the
#: scenarios' 30 s sessions) rather than every second: a stream's pong waits behind a
#: 64 MiB request on it, which a loaded machine took over two seconds to carry and the
#: server to read (its stream ended "Ping timeout"). The pings' own rules are
#: tests/ydb_face/test_stream_session_end.py's.
SERVER_FLAGS: Final = ("--ydb-ping-interval", "10")


def run_js(server: YdbServer, scenario: str, *args: str) -> list[Event]:
    """Run one scenario of coordination.mjs against ``server``; its JSON lines.

    The program must exit 0 and say ``done`` last; it is killed after
    :data:`KILL_AFTER_S` (its own deadline is :data:`DEADLINE_S`)."""
    require_js()
    binary = node_binary()
    assert binary is not None
    command = [binary, str(PROGRAM), server.endpoint + DATABASE, scenario, *args]
    env = {**os.environ, "TENURE_JS_DEADLINE_MS": str(int(DEADLINE_S * 1000))}
    try:
        done = subprocess.run(
            command,
            cwd=JS_DIR,
            env=env,
            capture_output=True,
            text=True,
            timeout=KILL_AFTER_S,
            check=False,
        )
    except subprocess.TimeoutExpired as expired:  # run() has killed it
        pytest.fail(f"{scenario}: node ran over {KILL_AFTER_S} s; it printed {expired.stdout!r}")
    events = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    said = f"{scenario} exited {done.returncode}; stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    assert done.returncode == 0, said
    assert events, said
    assert events[-1] == {"event": "done"}, said
    return events


def of(events: list[Event], name: str) -> list[Event]:
    """The events named ``name``, in the order printed."""
    return [event for event in events if event["event"] == name]


def one(events: list[Event], name: str) -> Event:
    """The only event named ``name``."""
    (found,) = of(events, name)
    return found


def fresh_path() -> str:
    """A node path no other test uses."""
    return f"{DATABASE}/{unique('js')}"


def test_the_package_asks_for_the_node_that_ydbjs_core_needs() -> None:
    # scripts/bootstrap-js reads js/package.json's engines: it must be @ydbjs/core's.
    require_js()
    core = _package(JS_DIR / "node_modules" / "@ydbjs" / "core" / "package.json")
    assert _package(JS_DIR / "package.json")["engines"]["node"] == core["engines"]["node"]


def test_a_missing_or_old_node_skips_here_and_fails_in_ci(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "node is not installed" in (js_unavailable(str(tmp_path / "no-node")) or "")
    old = tmp_path / "node"
    old.write_text("#!/bin/sh\necho v18.19.0\n")
    old.chmod(0o755)
    reason = js_unavailable(str(old))
    assert reason is not None
    assert f"needs Node.js >= {wanted_node()}" in reason
    assert "v18.19.0" in reason
    monkeypatch.setenv("TENURE_NODE", str(old))
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception, match=r"needs Node\.js"):
        require_js()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="never a skip"):
        require_js()


def test_node_create_describe_drop_round_trip(server: YdbServer) -> None:
    path = fresh_path()
    events = run_js(server, "node", path)
    assert one(events, "ready")["database"] == DATABASE
    assert one(events, "created")["status"] == "SUCCESS"
    assert one(events, "created_again")["status"] == "SUCCESS"  # the same config: accepted
    described = one(events, "described_node")
    assert described["status"] == "SUCCESS"
    assert described["name"] == path.rpartition("/")[2]
    assert described["config"] == {
        "self_check_period_millis": 1000,
        "session_grace_period_millis": 10000,
        "read_consistency_mode": "RELAXED",
        "attach_consistency_mode": "STRICT",
        "rate_limiter_counters_mode": "AGGREGATED",
    }
    assert one(events, "dropped")["status"] == "SUCCESS"
    gone = one(events, "described_dropped")
    assert gone["status"] == "SCHEME_ERROR"
    assert gone["issues"]


def test_sessions_queue_on_a_semaphore_and_are_granted_in_order(server: YdbServer) -> None:
    events = run_js(server, "queue", fresh_path())
    started = of(events, "session_started")
    assert [event["session"] for event in started] == ["a", "b", "c"]
    assert len({event["session_id"] for event in started}) == 3
    assert one(events, "semaphore_created")["status"] == "SUCCESS"
    # a holds; b and c queue behind it (AcquireSemaphorePending), in that order.
    assert [event["session"] for event in of(events, "pending")] == ["b", "c"]
    acquired = of(events, "acquired")
    assert [event["session"] for event in acquired] == ["a", "b", "c"]  # first in, first out
    assert all(event["status"] == "SUCCESS" and event["acquired"] for event in acquired)
    released = of(events, "released")
    assert [event["session"] for event in released] == ["a", "b", "c"]
    assert all(event["status"] == "SUCCESS" and event["released"] for event in released)
    # Grants and releases alternate: each waiter is granted only after the release.
    steps = [
        (event["event"], event["session"])
        for event in events
        if event["event"] in ("acquired", "released")
    ]
    assert steps == [
        ("acquired", "a"),
        ("released", "a"),
        ("acquired", "b"),
        ("released", "b"),
        ("acquired", "c"),
        ("released", "c"),
    ]

    first, second, third = of(events, "described")
    for described in (first, second, third):
        assert described["status"] == "SUCCESS"
        assert described["name"] == "lock"
        assert described["data"] == "00ff10807f"  # the semaphore's bytes, as created
        assert (described["limit"], described["count"], described["ephemeral"]) == ("1", "1", False)

    def holders(entries: list[Event]) -> list[tuple[str, str, str]]:
        return [(e["session"], e["count"], bytes.fromhex(e["data"]).decode()) for e in entries]

    assert holders(first["owners"]) == [("a", "1", "holder-a")]
    assert holders(first["waiters"]) == [("b", "1", "holder-b"), ("c", "1", "holder-c")]
    assert holders(second["owners"]) == [("b", "1", "holder-b")]
    assert holders(second["waiters"]) == [("c", "1", "holder-c")]
    assert holders(third["owners"]) == [("c", "1", "holder-c")]
    assert third["waiters"] == []
    # Waiters in arrival order, with the timeout they asked; each grant a greater order id.
    waiting = first["waiters"]
    assert int(waiting[0]["order_id"]) < int(waiting[1]["order_id"])
    assert {w["timeout_millis"] for w in waiting} == {"30000"}
    grants = [int(d["owners"][0]["order_id"]) for d in (first, second, third)]
    assert grants == sorted(set(grants))

    stopped = of(events, "session_stopped")
    assert [(e["session"], e["session_id"]) for e in stopped] == [
        (e["session"], e["session_id"]) for e in started
    ]
    assert one(events, "dropped")["status"] == "SUCCESS"


@pytest.mark.parametrize("size", [2 * 1024 * 1024, 64 * 1024 * 1024 - 1], ids=["2MiB", "64MiB-1"])
def test_a_request_as_big_as_the_driver_sends_gets_its_own_error_on_a_live_stream(
    server: YdbServer, size: int
) -> None:
    # @ydbjs/core's Driver sends messages up to 64 MiB. Over the node's max_data_size
    # (64 KiB by default) the acquire is refused alone, with YDB's status, and the
    # stream and its session go on; the stream is not ended (RESOURCE_EXHAUSTED).
    events = run_js(server, "big", fresh_path(), str(size))
    assert one(events, "sending")["request_bytes"] == size
    ended = of(events, "stream_ended")
    assert not ended, f"the server ended the stream instead of answering: {ended}"
    answer = one(events, "big_answer")
    assert answer["kind"] == "acquireSemaphoreResult"
    assert answer["req_id"] == "1"
    assert answer["status"] == "PRECONDITION_FAILED"
    assert any("max_data_size" in issue for issue in answer["issues"]), answer
    assert answer["acquired"] is False
    # The same stream: our ping answered, then a small acquire granted.
    assert one(events, "pong")["opaque"] == "4242"
    small = one(events, "small_acquired")
    assert (small["status"], small["acquired"]) == ("SUCCESS", True)
    assert one(events, "session_stopped")["session"] == "big"
    assert one(events, "dropped")["status"] == "SUCCESS"
