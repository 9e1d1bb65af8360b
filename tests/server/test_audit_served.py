"""The audit log of a real ``tenure serve --auth-file`` (``--audit-log``, issue 50).

Each kind of line, as docs/operations.md ("Audit log") states the format; never a
token's secret (the log is searched for each one); rotation by size, set in a config
file; ``-``, standard output; and the lines dropped when the writer cannot keep up,
counted on ``/metrics`` while the server goes on answering (the log is a FIFO nobody
reads: its writer thread is stuck opening it).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tenure._core import (
    AlterNode,
    CreateNode,
    CreateSession,
    DropNode,
    KillSession,
    SetNodeAnnex,
)
from tenure._protocol import Refused
from tenure.errors import ErrorCode

from .http import value
from .tenants import TenantServer, token, write_auth_file
from .wire import WAIT, Clients

pytestmark = pytest.mark.timeout(120)

ADMIN, READER, TENANT = "admin-s3cret-a1", "reader-s3cret-b2", "tenant-s3cret-c3"
WRONG = "wrong-s3cret-d4"
SECRETS = (ADMIN, READER, TENANT, WRONG)
ANNEX_VALUE = b"annex-value-e5"


def _tokens(tmp_path: Path) -> Path:
    return write_auth_file(
        tmp_path,
        token("admin", ADMIN),
        token("reader", READER, "read-only"),
        token("tenant", TENANT, quota={"sessions": 1}),
    )


def _acts(text: str) -> list[dict[str, Any]]:
    """The audit lines of ``text`` (the server's own log lines have no ``act``)."""
    lines = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    return [line for line in lines if "act" in line]


def _until(read: Any, count: int) -> list[dict[str, Any]]:
    """``read()``'s audit lines once there are ``count`` of them (bounded by WAIT)."""
    deadline = time.monotonic() + WAIT
    while True:
        acts = _acts(read())
        if len(acts) >= count or time.monotonic() > deadline:
            return acts
        time.sleep(0.02)


async def _kill_on_dashboard(port: int, secret: str, node: str, session_id: int) -> int:
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=WAIT)) as http,
        http.post(
            f"http://127.0.0.1:{port}/dashboard/api/kill",
            json={"node": node, "session_id": session_id},
            headers={"Authorization": f"Bearer {secret}"},
        ) as answer,
    ):
        return answer.status


async def test_each_act_and_refusal_is_one_line_naming_the_token_never_its_secret(
    tmp_path: Path, wire: Clients
) -> None:
    audit = tmp_path / "audit.jsonl"
    with TenantServer(tmp_path, _tokens(tmp_path), "--audit-log", str(audit), http=True) as server:
        admin = await wire.connect(server.port, token=ADMIN)
        await admin.call(CreateNode("jobs"))
        await admin.call(AlterNode("jobs", {"max_sessions": 50}))
        await admin.call(SetNodeAnnex("jobs", "face", ANNEX_VALUE))
        reader = await wire.connect(server.port, token=READER)
        assert (await reader.fail(CreateNode("theirs"))).code is ErrorCode.PERMISSION_DENIED
        tenant = await wire.connect(server.port, token=TENANT)
        first = await tenant.call(CreateSession("jobs", b"k1"))
        assert (await tenant.fail(CreateSession("jobs", b"k2"))).code is ErrorCode.LIMIT_EXCEEDED
        await admin.call(KillSession("jobs", first.session_id))
        second = await tenant.call(CreateSession("jobs", b"k3"))
        status = await _kill_on_dashboard(server.http_port, ADMIN, "jobs", second.session_id)
        assert status == 200
        assert await _kill_on_dashboard(server.http_port, READER, "jobs", 99) == 403
        await admin.call(DropNode("jobs", force=True))
        guesser = await wire.connect(server.port, hello=False)
        assert isinstance(await guesser.hello(token=WRONG), Refused)
        acts = _until(lambda: audit.read_text() if audit.exists() else "", 10)
        metrics = await server.metrics()
    by_act = [(line["act"], line["token"], line["outcome"]) for line in acts]
    assert by_act == [
        ("node_create", "admin", "ok"),
        ("node_alter", "admin", "ok"),
        ("node_annex", "admin", "ok"),
        ("node_create", "reader", "permission_denied"),
        ("quota_refused", "tenant", "limit_exceeded"),
        ("kill_session", "admin", "ok"),
        ("kill_session", "admin", "ok"),
        ("kill_session", "reader", "permission_denied"),
        ("node_drop", "admin", "ok"),
        ("auth_failed", None, "authentication"),
    ]
    for line in acts:
        assert set(line) == {"time", "act", "token", "address", "outcome", "what"}
        assert line["address"] == "127.0.0.1"
        assert line["time"].endswith("Z")
        assert "T" in line["time"]
    what = [line["what"] for line in acts]
    assert what[0] == {"command": "CreateNode", "node": "jobs"}
    assert what[1] == {"command": "AlterNode", "node": "jobs", "changes": {"max_sessions": 50}}
    assert what[2] == {"command": "SetNodeAnnex", "node": "jobs", "key": "face"}
    assert what[3]["node"] == "theirs"
    assert "read-only" in what[3]["why"]
    assert what[4]["quota"] == "sessions"
    assert what[4]["command"] == "CreateSession"
    assert what[5] == {"command": "KillSession", "node": "jobs", "session_id": first.session_id}
    assert what[6]["via"] == "dashboard"
    assert what[6]["session_id"] == second.session_id
    assert what[8] == {"command": "DropNode", "node": "jobs", "force": True}
    text = audit.read_text()
    for secret in SECRETS:
        assert secret not in text
    assert ANNEX_VALUE.decode() not in text
    assert value(metrics, "tenure_audit_lines_dropped_total") == 0.0


async def test_the_log_rotates_by_size_keeping_n_files_set_in_a_config_file(
    tmp_path: Path, wire: Clients
) -> None:
    config = tmp_path / "tenure.toml"
    config.write_text(
        'audit_log = "audit.jsonl"\naudit_log_max_bytes = 600\naudit_log_keep = 2\n'
        "auth_failures_per_minute = 0\n"
    )
    audit = tmp_path / "audit.jsonl"  # relative to the config file's directory
    with TenantServer(tmp_path, _tokens(tmp_path), "--config", str(config)) as server:
        for _ in range(30):  # about 130 bytes a line: a file holds 4
            guesser = await wire.connect(server.port, hello=False)
            assert isinstance(await guesser.hello(token=WRONG), Refused)
            await guesser.close()
        assert server.signal(signal.SIGTERM) == 0  # what is queued is written first
    rotated = audit.with_name("audit.jsonl.2")
    kept = [audit, audit.with_name("audit.jsonl.1"), rotated]
    assert not audit.with_name("audit.jsonl.3").exists()
    for path in kept:
        assert 0 < path.stat().st_size <= 600
        assert all(line["act"] == "auth_failed" for line in _acts(path.read_text()))
        assert WRONG not in path.read_text()


async def test_a_dash_writes_the_lines_to_standard_output(tmp_path: Path, wire: Clients) -> None:
    with TenantServer(tmp_path, _tokens(tmp_path), "--audit-log", "-") as server:
        admin = await wire.connect(server.port, token=ADMIN)
        await admin.call(CreateNode("out"))
        [line] = _until(server.output, 1)  # (its stdout and stderr are one file here)
    assert (line["act"], line["token"], line["what"]["node"]) == ("node_create", "admin", "out")
    assert ADMIN not in server.output()


async def test_lines_the_writer_cannot_take_are_dropped_and_counted_never_waited_for(
    tmp_path: Path, wire: Clients
) -> None:
    fifo = tmp_path / "audit.fifo"
    os.mkfifo(fifo)  # nobody reads it: the writer thread is stuck opening it
    auth = _tokens(tmp_path)
    with TenantServer(
        tmp_path, auth, "--audit-log", str(fifo), "--audit-log-queue", "3", http=True
    ) as server:
        admin = await wire.connect(server.port, token=ADMIN)
        for number in range(20):  # each answered at once, its line queued or dropped
            await admin.call(CreateNode(f"n{number}"))
        dropped = value(await server.metrics(), "tenure_audit_lines_dropped_total")
        # The queue holds 3; the thread took at most one before it blocked.
        assert 16 <= dropped <= 17
        reading = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # the thread may go on
        try:
            got = await _read_lines(reading, 20 - int(dropped))
            await admin.call(CreateNode("after"))  # (the queue is empty again)
            got += await _read_lines(reading, 1)
        finally:
            os.close(reading)
        final = value(await server.metrics(), "tenure_audit_lines_dropped_total")
    lines = [json.loads(line) for line in got.decode().splitlines()]
    assert len(lines) == 20 - dropped + 1
    assert final == dropped
    # The first lines kept, the rest dropped: n0 (taken), n1 to n3 (queued), then "after".
    assert [line["what"]["node"] for line in lines] == [f"n{n}" for n in range(len(lines) - 1)] + [
        "after"
    ]


async def _read_lines(fd: int, count: int) -> bytes:
    """``count`` lines read from the non-blocking ``fd`` (bounded by WAIT)."""
    got = b""
    deadline = time.monotonic() + WAIT
    while got.count(b"\n") < count:
        assert time.monotonic() < deadline, got
        try:
            got += os.read(fd, 1)
        except BlockingIOError:
            await asyncio.sleep(0.02)
    return got


async def test_a_reload_is_one_line_and_a_refused_one_too(tmp_path: Path) -> None:
    auth = _tokens(tmp_path)
    audit = tmp_path / "audit.jsonl"

    def read() -> str:
        return audit.read_text() if audit.exists() else ""

    with TenantServer(tmp_path, auth, "--audit-log", str(audit)) as server:
        server.proc.send_signal(signal.SIGHUP)  # the same files again: nothing changes
        [done] = _until(read, 1)
        auth.write_text("this is [not toml")
        server.proc.send_signal(signal.SIGHUP)  # refused: the server serves on
        _, refused = _until(read, 2)
    assert (done["act"], done["token"], done["address"], done["outcome"]) == (
        "reload",
        None,
        None,
        "ok",
    )
    assert (refused["act"], refused["outcome"]) == ("reload", "invalid_argument")
    assert "auth" in refused["what"]["why"]
    assert not any(secret in read() for secret in SECRETS)


async def test_an_admins_lines_survive_a_flood_of_refusals_and_of_failed_logins(
    tmp_path: Path, wire: Clients
) -> None:
    """Issue 58, D3 and D4 served: a read-only token's refused commands and an
    unauthenticated client's failed logins flood the queue (the writer is stuck on a
    FIFO nobody reads, so nothing leaves it), and each of the admin's acts made during
    the flood is still written; every refusal past its share is counted as dropped."""
    fifo = tmp_path / "audit.fifo"
    os.mkfifo(fifo)
    auth = _tokens(tmp_path)
    queue_size, acts, refused, guesses = 64, 8, 400, 60
    with TenantServer(
        tmp_path, auth, "--audit-log", str(fifo), "--audit-log-queue", str(queue_size), http=True
    ) as server:
        admin = await wire.connect(server.port, token=ADMIN)  # before the address is blocked
        reader = await wire.connect(server.port, token=READER)
        for act in range(acts):
            for number in range(refused // acts):
                failed = await reader.fail(CreateNode(f"theirs-{act}-{number}"))
                assert failed.code is ErrorCode.PERMISSION_DENIED
            for _ in range(guesses // acts):
                guesser = await wire.connect(server.port, hello=False)
                assert isinstance(await guesser.hello(token=WRONG), Refused)
                await guesser.close()
            await admin.call(CreateNode(f"ours-{act}"))
        dropped = value(await server.metrics(), "tenure_audit_lines_dropped_total")
        reading = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # the thread may go on
        try:
            await admin.call(CreateNode("after"))  # queued behind the flood, or dropped
            got = b""
            while b'"after"' not in got:  # (bounded: _read_lines asserts within WAIT)
                got += await _read_lines(reading, 1)
        finally:
            os.close(reading)
    lines = [json.loads(line) for line in got.decode().splitlines()]
    ours = [line["what"]["node"] for line in lines if line["token"] == "admin"]
    assert ours == [f"ours-{act}" for act in range(acts)] + ["after"]
    theirs = [line for line in lines if line["token"] == "reader"]
    failed_logins = [line for line in lines if line["act"] == "auth_failed"]
    assert 1 <= len(theirs) <= queue_size // 16 + 1
    assert 1 <= len(failed_logins) <= queue_size // 16 + 1
    # Every refusal not written was counted (and the failed logins past their share).
    assert dropped >= refused - len(theirs)
