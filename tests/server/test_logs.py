"""The server's log: one event per line (JSON or text) with its name and fields."""

from __future__ import annotations

import io
import json
import logging
import os
import pty
import re
import sys
from pathlib import Path
from typing import Any

import msgpack
import pytest

from tenure._core import CreateNode, CreateSession
from tenure._protocol import PROTOCOL_VERSION, Refused
from tenure._protocol.frames import MIN_MAX_FRAME_SIZE, encode_frame
from tenure.server import DataDir, FsyncMode, Journal
from tenure.server._logs import JsonFormatter, TextFormatter, event_name, setup_logging

from .terminal import serve_on_terminal
from .wire import Clients, ServerProcess, free_port

pytestmark = pytest.mark.timeout(60)

SECRET = "log-test-secret-1"
AUTH_FILE = f"""
[[token]]
name = "ops"
secret = "{SECRET}"
access = "read-write"
"""
TEXT_LINE = re.compile(
    r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (debug|info|warning|error|critical) +[a-z0-9_]+: "
)


def record(msg: str, *args: object, **extra: Any) -> logging.LogRecord:
    made = logging.LogRecord("tenure.server", logging.WARNING, __file__, 1, msg, args, None)
    for key, value in extra.items():
        setattr(made, key, value)
    return made


def test_a_json_line_has_time_level_event_message_and_fields() -> None:
    line = JsonFormatter().format(
        record("slow commit", event="slow_commit", fields={"seconds": 1.5, "fsync": "always"})
    )
    assert "\n" not in line
    out = json.loads(line)
    assert isinstance(out.pop("ts"), float)
    assert out == {
        "level": "warning",
        "logger": "tenure.server",
        "event": "slow_commit",
        "msg": "slow commit",
        "seconds": 1.5,
        "fsync": "always",
    }


@pytest.mark.parametrize(
    ("template", "name"),
    [
        ("listening", "listening"),
        ("connection lost; sessions detached", "connection_lost_sessions_detached"),
        ("cannot listen on %s:%d", "cannot_listen_on"),
        (
            "session %d overflowed its push queue; closing it",
            "session_overflowed_its_push_queue_closing_it",
        ),
    ],
)
def test_an_unnamed_event_is_named_after_its_message_template(template: str, name: str) -> None:
    assert event_name(record(template)) == name


def test_a_text_line_is_one_line_even_with_a_traceback() -> None:
    try:
        raise OSError("disk\non fire")
    except OSError:
        failed = record("committing the journal failed", fields={"peer": "127.0.0.1:5", "n": 2})
        failed.exc_info = sys.exc_info()
    line = TextFormatter().format(failed)
    assert "\n" not in line
    assert TEXT_LINE.match(line), line
    assert "committing_the_journal_failed: committing the journal failed" in line
    assert 'peer=127.0.0.1:5 n=2 exc="Traceback' in line
    assert "disk\\non fire" in line  # the traceback as one JSON string


def test_a_snapshot_is_logged_and_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    journal = Journal(DataDir(tmp_path / "data", FsyncMode.OFF), background=False)
    engine = journal.open(0.0)
    engine.apply(CreateNode("n"), 0.0)
    journal.log_command(CreateNode("n"), 0.0)
    heard: list[tuple[float, int]] = []
    journal.on_snapshot = lambda seconds, size: heard.append((seconds, size))
    with caplog.at_level(logging.INFO, logger="tenure"):
        journal.snapshot(engine)
    journal.close()
    [written] = [r for r in caplog.records if getattr(r, "event", None) == "snapshot_written"]
    fields = written.fields  # type: ignore[attr-defined]
    [snapshot] = list((tmp_path / "data").glob("snapshot-*.bin"))
    assert fields["bytes"] == snapshot.stat().st_size
    assert fields["records"] == 2  # the restart's record and CreateNode's
    [(seconds, size)] = heard
    assert size == snapshot.stat().st_size
    assert seconds == pytest.approx(fields["seconds"], abs=1e-5)


def events(server: ServerProcess) -> list[dict[str, Any]]:
    """Every line of the server's log, each parsed as JSON (a line that is not fails)."""
    return [json.loads(line) for line in server.lines()]


async def test_json_log_names_connections_auth_failures_expiry_and_slow_commits(
    tmp_path: Path, wire: Clients
) -> None:
    auth = tmp_path / "auth.toml"
    auth.write_text(AUTH_FILE)
    flags = ("--fsync", "off", "--auth-file", str(auth), "--slow-commit", "0.000000001")
    with ServerProcess(tmp_path / "data", *flags) as server:
        intruder = await wire.connect(server.port, hello=False)
        assert isinstance(await intruder.hello(token="wrong"), Refused)
        client = await wire.connect(server.port, token=SECRET)
        await client.call(CreateNode("logs"))
        session = (await client.call(CreateSession("logs", b"k", 0.2))).session_id
        await client.close()  # detached now; ends 0.2 s later
        server.wait_log('"event": "session_expired"')
        lines = events(server)

    def named(event: str) -> list[dict[str, Any]]:
        return [line for line in lines if line["event"] == event]

    for line in lines:
        assert {"ts", "level", "logger", "event", "msg"} <= line.keys(), line
    [failed] = named("auth_failed")
    assert failed["level"] == "warning"
    assert failed["why"] == "unknown token"
    assert failed["client_name"] == "test"
    [opened] = named("connection_opened")
    assert (opened["protocol"], opened["token"], opened["client_name"]) == ("native", "ops", "test")
    closed = named("connection_closed")
    assert len(closed) == 2  # the intruder's and the client's
    assert all(line["protocol"] == "native" and line["seconds"] >= 0 for line in closed)
    [expired] = named("session_expired")
    assert expired["session_id"] == session
    assert expired["code"] == "SESSION_EXPIRED"
    slow = named("slow_commit")
    assert slow, "every commit is slower than a nanosecond"
    assert all(line["fsync"] == "off" and line["seconds"] > 0 for line in slow)
    assert all(line["slow_commit"] == 1e-9 for line in slow)


async def test_text_log_is_one_readable_line_per_event(tmp_path: Path, wire: Clients) -> None:
    server = ServerProcess(tmp_path / "data", "--fsync", "off", "--log-format", "text")
    try:
        server.wait_log("listening: listening")
        client = await wire.connect(server.port)
        await client.close()
        server.wait_log("connection_closed: connection closed")
    finally:
        server.kill()
    lines = server.output().splitlines()
    assert len(lines) >= 4
    for line in lines:
        assert TEXT_LINE.match(line), line
    [listening] = [line for line in lines if " listening: " in line]
    assert f"port={server.port}" in listening
    assert "event_loop=" in listening
    # For people, the config line has only the settings given: not 50 at their defaults.
    [config] = [line for line in lines if " config: " in line]
    assert f"port={server.port} " in config
    assert "fsync=off log_format=text " in config
    assert '"fsync": "flag"' in config  # where each came from
    assert "max_connections=" not in config
    assert len(config) < 400


def test_auto_is_text_on_a_terminal_and_json_elsewhere() -> None:
    loggers = [logging.getLogger(name) for name in ("tenure", "aiohttp")]
    saved = [(logger.handlers[:], logger.level, logger.propagate) for logger in loggers]
    master, terminal = pty.openpty()
    try:
        with os.fdopen(terminal, "w") as screen:
            assert setup_logging("auto", screen) == "text"
            logging.getLogger("tenure.server").info("hello", extra={"fields": {"n": 1}})
        assert TEXT_LINE.match(os.read(master, 4096).decode()), "a text line on the terminal"
        assert setup_logging("auto", io.StringIO()) == "json"
        assert setup_logging("text", io.StringIO()) == "text"  # as told, wherever it goes
    finally:
        os.close(master)
        for logger, (handlers, level, propagate) in zip(loggers, saved, strict=True):
            logger.handlers[:], logger.level, logger.propagate = handlers, level, propagate


def test_a_server_on_a_terminal_logs_text(tmp_path: Path) -> None:
    port = free_port()
    code, lines = serve_on_terminal(
        tmp_path / "data", "--port", str(port), stop_after="listening: listening"
    )
    assert code == 0
    for line in lines:
        assert TEXT_LINE.match(line), line
    [config] = [line for line in lines if " config: " in line]
    assert f"port={port} " in config
    assert "max_connections=" not in config
    assert any(f"listening: listening host=127.0.0.1 port={port} " in line for line in lines)
    assert any(" stopped: stopped exit_code=0" in line for line in lines)


@pytest.mark.parametrize(
    "token",
    [SECRET.encode(), [SECRET], {"secret": SECRET}, 918273645546372819],
    ids=["bin", "array", "map", "int"],
)
async def test_a_token_of_the_wrong_type_is_never_logged(
    tmp_path: Path, wire: Clients, token: object
) -> None:
    # A token sent as msgpack bin (or any other type than str) is a malformed Hello:
    # the server logs why, naming the type it got, never the value.
    auth = tmp_path / "auth.toml"
    auth.write_text(AUTH_FILE)
    with ServerProcess(tmp_path / "data", "--fsync", "off", "--auth-file", str(auth)) as server:
        raw = await wire.connect(server.port, hello=False)
        hello = msgpack.packb([1, PROTOCOL_VERSION, "test", token, MIN_MAX_FRAME_SIZE])
        raw.writer.write(encode_frame(hello))
        await raw.until_closed()
        server.wait_log('"event": "connection_closed"')
        log = server.output()
    assert "Hello.token: expected str|nil" in log  # the malformed Hello was logged...
    for shown in (SECRET, "918273645546372819", SECRET.encode().hex()):
        assert shown not in log  # ...but not its token
