"""ReadBackup on the wire (protocol version 8), against real ``tenure serve`` processes:
a backup read a part at a time, at offsets, in order, to an empty end; the parts make a
good backup file; what is refused, and why; a backup's place among ``--max-backups``
shared with the HTTP endpoint's, and given back when its connection goes (issue 57)."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

import tenure
from tenure._protocol import Failure, Reply
from tenure._protocol.admin import READ_BACKUP, ReadBackup
from tenure.errors import ErrorCode
from tenure.server._durability.backup import read_backup, summary
from tests.server.test_backup import ADMIN, AUTH, READER, tenure_cli
from tests.server.wire import Clients, ServerProcess, WireClient, free_port

pytestmark = pytest.mark.timeout(120)

#: Bytes each read asks for in these tests (far below a frame: many reads a backup).
PART = 50_000


async def read_on(client: WireClient, offset: int = 0, size: int = PART) -> bytes:
    """A backup read over ``client`` from ``offset``, one read at a time, to its end."""
    got = bytearray()
    while True:
        part = await client.call(ReadBackup(offset + len(got), size))
        assert isinstance(part, bytes)
        if not part:
            return bytes(got)
        assert len(part) <= size
        got += part


def part_of(answer: Reply | Failure) -> bytes:
    """The bytes a ReadBackup's answer carries (AssertionError for a Failure)."""
    assert isinstance(answer, Reply), answer
    assert isinstance(answer.value, bytes), answer
    return answer.value


@asynccontextmanager
async def holds(url: str, count: int, size: int) -> AsyncIterator[None]:
    """While in the block: ``count`` ephemeral semaphores held with ``size`` bytes of
    data each, by a session of node app."""
    async with tenure.connect(url) as client:
        await client.create_node("app", exist_ok=True)
        async with client.session("app") as session:
            for n in range(count):
                await session.semaphore(f"big-{n}").acquire(data=bytes(size), ephemeral=True)
            yield


def checked(data: bytes, where: Path) -> dict[str, object]:
    """``data`` as a backup file: its checksum, version and state checked; its facts."""
    where.write_bytes(data)
    facts: dict[str, object] = summary(read_backup(where))
    return facts


async def test_a_backup_is_read_in_parts_at_its_offsets(tmp_path: Path, wire: Clients) -> None:
    with ServerProcess(tmp_path / "data", "--fsync", "off") as server:
        async with holds(f"tenure://127.0.0.1:{server.port}", 30, 20_000):
            client = await wire.connect(server.port)  # (no auth file: a loopback client may)
            # Each read: exactly what it asks for but at the end, then an empty bin.
            parts: list[bytes] = []
            while part := await client.call(ReadBackup(sum(len(p) for p in parts), PART)):
                parts.append(part)
            assert len(parts) > 12  # (30 x 20 KB of data: many reads)
            assert {len(part) for part in parts[:-1]} == {PART}
            facts = checked(b"".join(parts), tmp_path / "read.bak")
            assert (facts["nodes"], facts["semaphores"], facts["holds"]) == (1, 30, 30)
            # Over: a read on from there finds no backup; one at 0 begins another.
            over = await client.fail(ReadBackup(sum(len(p) for p in parts), PART))
            assert over.code is ErrorCode.PRECONDITION_FAILED
            assert "no backup is being read on this connection" in over.message
            again = await read_on(client)
            assert checked(again, tmp_path / "again.bak")["holds"] == 30
        logged = [json.loads(line) for line in server.lines() if '"event": "backup"' in line]
        assert [line["loop_items"] for line in logged] == [0, 0]  # a forked child's walk


async def test_pipelined_reads_are_answered_in_order(tmp_path: Path, wire: Clients) -> None:
    with ServerProcess(tmp_path / "data", "--fsync", "off") as server:
        async with holds(f"tenure://127.0.0.1:{server.port}", 20, 20_000):
            client = await wire.connect(server.port)
            # (400 KB of data: more than the six reads sent at once ask for)
            asked = [client.send(ReadBackup(n * PART, PART)) for n in range(6)]
            answers = [await client.answer(request_id) for request_id in asked]
            parts = [part_of(answer) for answer in answers]
            assert [len(part) for part in parts] == [PART] * 6, answers
            got = b"".join(parts) + await read_on(client, 6 * PART)
            assert checked(got, tmp_path / "piped.bak")["holds"] == 20


async def test_what_a_read_may_not_ask(tmp_path: Path, wire: Clients) -> None:
    with ServerProcess(tmp_path / "data", "--fsync", "off") as server:
        client = await wire.connect(server.port)
        none = await client.fail(ReadBackup(100, PART))
        assert none.code is ErrorCode.PRECONDITION_FAILED
        assert "begin one at offset 0" in none.message
        for size in (0, 1 << 20):  # (a frame of 1 MiB, the client's: no room for a header)
            bad = await client.fail(ReadBackup(0, size))
            assert bad.code is ErrorCode.INVALID_ARGUMENT
            assert "max_bytes must be 1 to 1048512" in bad.message
        first = await client.call(ReadBackup(0, 10))
        skipped = await client.fail(ReadBackup(500, PART))
        assert skipped.code is ErrorCode.PRECONDITION_FAILED
        assert "the backup being read is at offset 10, not 500" in skipped.message
        # The backup goes on where it was, whole.
        assert checked(first + await read_on(client, 10), tmp_path / "b.bak")["nodes"] == 0
        # A read at 0 gives the backup under way up, and begins another.
        await client.call(ReadBackup(0, 10))
        again = await client.call(ReadBackup(0, PART))
        assert checked(again + await read_on(client, len(again)), tmp_path / "c.bak")


async def test_a_backup_needs_an_admin_token(tmp_path: Path, wire: Clients) -> None:
    auth = tmp_path / "auth.toml"
    auth.write_text(AUTH)
    audit = tmp_path / "audit.jsonl"
    extra = ("--fsync", "off", "--auth-file", str(auth), "--audit-log", str(audit))
    with ServerProcess(tmp_path / "data", *extra) as server:
        viewer = await wire.connect(server.port, token=READER)
        read_only = await viewer.fail(ReadBackup(0, PART))
        assert read_only.code is ErrorCode.PERMISSION_DENIED
        assert read_only.message == "token 'viewer' is read-only: it may not send ReadBackup"
        team = await wire.connect(server.port, token="team-secret-1")
        limited = await team.fail(ReadBackup(0, PART))
        assert limited.code is ErrorCode.PERMISSION_DENIED
        assert limited.message == (
            "token 'team' is not an admin token (read-write, on every node): "
            "it may not take a backup"
        )
        ops = await wire.connect(server.port, token=ADMIN)
        assert checked(await read_on(ops), tmp_path / "ops.bak")["nodes"] == 0
        # Stopped, not killed: what the audit queue holds is written first (killed,
        # the backup's line was still queued on a busy machine).
        assert await asyncio.to_thread(server.signal, signal.SIGTERM) == 0
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    told = [
        (line["act"], line["token"], line["outcome"])
        for line in lines
        if line["act"] == "backup" or line.get("what", {}).get("command") == "ReadBackup"
    ]
    assert told == [
        ("denied", "viewer", "permission_denied"),  # (the gate's: a read-only token)
        ("backup", "team", "permission_denied"),
        ("backup", "ops", "ok"),
    ]
    assert ADMIN not in audit.read_text()


async def test_both_doors_share_max_backups_and_a_gone_reader_gives_its_place_back(
    tmp_path: Path, wire: Clients
) -> None:
    auth = tmp_path / "auth.toml"
    auth.write_text(AUTH)
    http = free_port()
    extra = ("--fsync", "off", "--auth-file", str(auth), "--http-port", str(http))
    with ServerProcess(tmp_path / "data", *extra, "--max-backups", "1") as server:
        async with holds(f"tenure://127.0.0.1:{server.port}?token={ADMIN}", 10, 1000):
            reader = await wire.connect(server.port, token=ADMIN)
            assert len(await reader.call(ReadBackup(0, 100))) == 100  # begun, then not read on
            over_http = await asyncio.to_thread(
                tenure_cli, "backup", "--url", f"http://127.0.0.1:{http}", str(tmp_path / "h.bak")
            )
            assert over_http.returncode != 0
            assert "max_backups (1)" in over_http.stderr, over_http.stderr
            second = await wire.connect(server.port, token=ADMIN)
            busy = await second.fail(ReadBackup(0, PART))
            assert (busy.code, busy.message) == (
                ErrorCode.LIMIT_EXCEEDED,
                "max_backups (1) backups are being taken; try again later",
            )
            await reader.close()  # its backup is given up: its place is free again
            for _ in range(100):
                answer = await second.answer(second.send(ReadBackup(0, PART)))
                if isinstance(answer, Reply):
                    break
                assert isinstance(answer, Failure)
                assert answer.code is ErrorCode.LIMIT_EXCEEDED
                await asyncio.sleep(0.05)
            first = part_of(answer)
            rest = await read_on(second, len(first))
            assert checked(first + rest, tmp_path / "after.bak")["semaphores"] == 10


def test_read_backup_has_its_layout() -> None:
    from tenure._protocol.payloads import layout

    assert layout(READ_BACKUP) == "[43, offset: uint, max_bytes: uint]"
