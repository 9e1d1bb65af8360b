"""A key is a secret, not a right: taking a session back checks the token too (issue 58, D7).

Backups and the journal held every session's protection key in clear, and with a
key a read-only token resumed (or attached) a read-write tenant's session and
closed it, releasing its locks. Now a server writes no key (the journal and its
snapshots keep each key's SHA-256 digest, a backup is a snapshot: the bytes of each
are searched for a known key), and a read-only token that shows the right key of a
session that holds or waits, or that a read-write token owns, is refused
PERMISSION_DENIED as any command its rights do not allow, and audited as one. A
wrong key is answered as ever (nothing told of the session); a read-write token
still resumes with the key (the ticket's purpose), and a read-only one its own
sessions. Real ``tenure serve`` processes.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tenure._core import (
    MAX_COUNT,
    Acquire,
    AttachSession,
    CreateNode,
    CreateSession,
    DescribeSession,
    ResumeSession,
    SessionEnded,
)
from tenure._protocol.admin import ReadBackup
from tenure.errors import ErrorCode

from ..tenants import TenantServer, token, write_auth_file
from ..wire import WAIT, Clients, ServerProcess, WireClient

pytestmark = pytest.mark.timeout(120)

ADMIN, WRITER, READER = "admin-secret-d7a", "writer-secret-d7b", "reader-secret-d7c"
#: The writer's sessions' keys: one holds a lock, one holds nothing.
HOLDING_KEY, IDLE_KEY = b"writers-holding-session-key-1", b"writers-idle-session-key-2"


def audit_lines(path: Path, count: int) -> list[dict[str, Any]]:
    """The audit log's lines once there are ``count`` of them (bounded by WAIT)."""
    deadline = time.monotonic() + WAIT
    while True:
        text = path.read_text() if path.exists() else ""
        lines = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
        if len(lines) >= count or time.monotonic() > deadline:
            return lines
        time.sleep(0.02)


async def test_a_read_only_token_cannot_take_back_a_read_write_tenants_session(
    tmp_path: Path, wire: Clients
) -> None:
    audit = tmp_path / "audit.jsonl"
    auth = write_auth_file(
        tmp_path,
        token("admin", ADMIN),
        token("writer", WRITER),
        token("reader", READER, "read-only"),
    )
    with TenantServer(tmp_path, auth, "--audit-log", str(audit)) as server:
        admin = await wire.connect(server.port, token=ADMIN)
        await admin.call(CreateNode("jobs"))
        writer = await wire.connect(server.port, token=WRITER)
        holding = (await writer.call(CreateSession("jobs", HOLDING_KEY))).session_id
        lock = Acquire(holding, "m", MAX_COUNT, request_id=1, ephemeral=True)
        assert (await writer.call(lock)).token is not None
        idle = (await writer.call(CreateSession("jobs", IDLE_KEY))).session_id

        reader = await wire.connect(server.port, token=READER)
        for sid, key, why in (
            (holding, HOLDING_KEY, "holds or waits for locks"),
            (idle, IDLE_KEY, "is owned by read-write token 'writer'"),
        ):
            for command in (ResumeSession(sid, key, "jobs"), AttachSession(sid, key, 1 << 40)):
                failure = await reader.fail(command)
                assert failure.code is ErrorCode.PERMISSION_DENIED, command
                assert failure.message == (
                    f"token 'reader' is read-only: it may not send {type(command).__name__} "
                    f"on node 'jobs': session {sid} {why}, and taking it back needs "
                    "read-write access"
                )
        # A wrong key is answered as ever: nothing is told of the session.
        wrong = await reader.fail(ResumeSession(holding, b"a-guess", "jobs"))
        assert wrong.code is ErrorCode.SESSION_EXPIRED
        wrong = await reader.fail(AttachSession(holding, b"a-guess", 1 << 40))
        assert wrong.code is ErrorCode.PERMISSION_DENIED
        assert "wrong protection key" in wrong.message

        # The writer keeps its sessions, attached to its connection, and its lock.
        state = await writer.call(DescribeSession(holding))
        assert [held.name for held in state.holds] == ["m"]
        assert (await writer.call(DescribeSession(idle))).holds == ()

        # A read-only token takes back its own session (it holds nothing)...
        mine = (await reader.call(CreateSession("jobs", b"readers-own-key"))).session_id
        again = await wire.connect(server.port, token=READER)
        assert (await again.call(ResumeSession(mine, b"readers-own-key", "jobs"))).seq_no == 2
        # ... and a read-write token with the key resumes the writer's (a ticket's use).
        assert (await admin.call(ResumeSession(holding, HOLDING_KEY, "jobs"))).seq_no == 2
        ended = await writer.next_push()
        assert isinstance(ended, SessionEnded)
        assert ended.session_id == holding

        denied = [line for line in audit_lines(audit, 6) if line["act"] == "denied"]
    assert [(d["token"], d["what"]["command"], d["what"]["session_id"]) for d in denied] == [
        ("reader", "ResumeSession", holding),
        ("reader", "AttachSession", holding),
        ("reader", "ResumeSession", idle),
        ("reader", "AttachSession", idle),
        ("reader", "AttachSession", holding),  # (the wrong key: the engine's refusal)
    ]
    assert all(d["outcome"] == "permission_denied" for d in denied)
    assert all("needs read-write access" in d["what"]["why"] for d in denied[:4])
    assert "wrong protection key" in denied[4]["what"]["why"]
    text = audit.read_text() + server.output()
    for key in (HOLDING_KEY, IDLE_KEY):
        assert key.decode() not in text


async def read_backup_bytes(client: WireClient) -> bytes:
    """A whole backup read over ``client`` (no auth file: a loopback client may)."""
    got = bytearray()
    while part := await client.call(ReadBackup(len(got), 500_000)):
        got += part
    return bytes(got)


def files_bytes(directory: Path) -> bytes:
    """Every byte of every file under ``directory``."""
    return b"".join(path.read_bytes() for path in sorted(directory.rglob("*")) if path.is_file())


async def test_a_served_journal_and_backup_hold_no_protection_key(
    tmp_path: Path, wire: Clients
) -> None:
    data = tmp_path / "data"
    with ServerProcess(data, "--fsync", "off") as server:
        first = await wire.connect(server.port)
        await first.call(CreateNode("n"))
        sid = (await first.call(CreateSession("n", HOLDING_KEY, timeout=60.0))).session_id
        await first.call(Acquire(sid, "m", MAX_COUNT, request_id=1, ephemeral=True))
        second = await wire.connect(server.port)
        assert (await second.call(ResumeSession(sid, HOLDING_KEY, "n"))).seq_no == 2
        third = await wire.connect(server.port)
        assert (await third.call(AttachSession(sid, HOLDING_KEY, 10))).seq_no == 10
        backup = await read_backup_bytes(third)
        assert server.signal(signal.SIGTERM) == 0
    assert b"TENURE-BACKUP" in backup
    assert HOLDING_KEY not in backup
    assert list(data.glob("wal-*.log"))
    assert HOLDING_KEY not in files_bytes(data)

    # Restarted from what it wrote, the session is taken back with its key, and only it.
    with ServerProcess(data, "--fsync", "off") as server:
        client = await wire.connect(server.port)
        wrong = await client.fail(ResumeSession(sid, IDLE_KEY, "n"))
        assert wrong.code is ErrorCode.SESSION_EXPIRED
        assert (await client.call(ResumeSession(sid, HOLDING_KEY, "n"))).seq_no == 11
        state = await client.call(DescribeSession(sid))
        assert [held.name for held in state.holds] == ["m"]
