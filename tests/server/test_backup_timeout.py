"""``--backup-timeout`` (issue 58, D12): a backup that moves less than 256 KiB in that
many seconds (its client stopped reading, stopped asking, or trickles) is given up,
against real ``tenure serve`` processes: its connection closed, its forked child killed
and reaped (no zombie among the server's children), its place among ``--max-backups``
(1 here) free for the next backup while the stalled client still holds its socket;
logged (event ``backup_timeout``) and audited (``outcome``: ``timeout``); a bystander's
lock held throughout. Over HTTP (``POST /admin/backup``) and the native protocol
(ReadBackup). And the setting's bad values refused, naming it.

Before the setting, a client that stopped reading held the one place and the child
with no time limit: each of these tests waited for a ``backup_timeout`` line that
never came.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

import tenure
from tenure import Lease
from tenure._protocol import ConnectionClosed, Failure, GoingAway, Reply
from tenure._protocol.admin import ReadBackup
from tenure.errors import ErrorCode
from tenure.server._config.serve_config import ConfigError
from tests.server.config.test_config import parse, serve
from tests.server.test_backup import ADMIN, AUTH, tenure_cli
from tests.server.test_read_backup import PART, checked, holds, part_of
from tests.server.wire import WAIT, Clients, ServerProcess, free_port

pytestmark = pytest.mark.timeout(120)

#: The ``--backup-timeout`` of these servers, in seconds: short, so a stall is seen
#: soon; the backups meant to succeed are of a small state (one chunk), far within it
#: even when the machine is busy (their client's two reads, over ``tenure://``).
TIMEOUT = "4"
#: How the reason says it.
SAID = f"moved less than 256 KiB in {TIMEOUT} s (--backup-timeout)"


def children(pid: int) -> dict[int, str]:
    """The processes whose parent is ``pid``, with each one's state (``Z``: a zombie)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # (gone meanwhile)
            continue
        state, parent = stat[stat.rfind(")") + 2 :].split()[:2]
        if int(parent) == pid:
            found[int(entry.name)] = state
    return found


async def until(check: Callable[[], bool], what: str, server: ServerProcess) -> None:
    """Until ``check()`` holds (bounded: a hang, not a measure)."""
    deadline = time.monotonic() + 4 * WAIT
    while not check():
        assert time.monotonic() < deadline, f"never {what}: {server.output()}"
        await asyncio.sleep(0.02)


async def forked_since(before: set[int], server: ServerProcess) -> set[int]:
    """The server's children that were not in ``before`` (waited for: one at least)."""
    await until(lambda: bool(set(children(server.proc.pid)) - before), "forked", server)
    return set(children(server.proc.pid)) - before


async def gone_and_reaped(forked: set[int], server: ServerProcess) -> None:
    """Until none of ``forked`` is among the server's children, not even as a zombie;
    and no zombie is."""
    await until(lambda: not forked & set(children(server.proc.pid)), "reaped", server)
    assert "Z" not in children(server.proc.pid).values()


def stalled_lines(server: ServerProcess) -> list[dict[str, object]]:
    """The server's ``backup_timeout`` log lines."""
    return [json.loads(line) for line in server.lines() if '"event": "backup_timeout"' in line]


def audited(audit: Path) -> list[tuple[str, str]]:
    """The backup lines of the audit log: (outcome, why)."""
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    return [(ln["outcome"], ln["what"].get("why", "")) for ln in lines if ln["act"] == "backup"]


@asynccontextmanager
async def bystander(url: str) -> AsyncIterator[Lease]:
    """While in the block: a mutex held by a session of another client."""
    async with tenure.connect(url) as client:
        await client.create_node("by", exist_ok=True)
        async with client.session("by", recovery_window=3.0) as session, session.mutex("m") as lock:
            yield lock
            assert lock.held, lock.lost_reason  # it kept it throughout
            described = await session.mutex("m").describe()
            assert described.owner is not None
            assert described.owner.token == lock.token


def stall_over_http(port: int) -> socket.socket:
    """A connection that asked ``POST /admin/backup``, read its status line and reads
    no more."""
    slow = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
    slow.sendall(
        b"POST /admin/backup HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        + f"Authorization: Bearer {ADMIN}\r\nContent-Length: 0\r\n\r\n".encode()
    )
    assert slow.recv(12).startswith(b"HTTP/1.1 200")  # it is streaming
    return slow


def rest_of(slow: socket.socket) -> bytes:
    """What ``slow`` is still given, to the end of its stream (or its reset)."""
    got = bytearray()
    try:
        while part := slow.recv(1 << 20):
            got += part
    except ConnectionResetError:
        pass
    return bytes(got)


async def test_an_http_backup_whose_client_stops_reading_loses_its_place_and_child(
    tmp_path: Path,
) -> None:
    auth, audit = tmp_path / "auth.toml", tmp_path / "audit.jsonl"
    auth.write_text(AUTH)
    http = free_port()
    extra: tuple[str, ...] = ("--fsync", "off", "--auth-file", str(auth), "--http-port", str(http))
    extra += ("--audit-log", str(audit), "--max-backups", "1", "--backup-timeout", TIMEOUT)
    with ServerProcess(tmp_path / "data", *extra) as server:
        url = f"tenure://127.0.0.1:{server.port}?token={ADMIN}"
        async with bystander(url):
            # ~20 MB of state: more than loopback's socket buffers hold, so a backup
            # whose client reads nothing stays in flight (its child blocked on its pipe).
            async with holds(url, 320, 60_000):
                before = set(children(server.proc.pid))
                slow = await asyncio.to_thread(stall_over_http, http)
                forked = await forked_since(before, server)
            # (the state is small again: the next backup is one chunk)
            try:
                await until(lambda: bool(stalled_lines(server)), "timed out", server)
                await gone_and_reaped(forked, server)
                # Its place is free, while its client still holds its socket open.
                file = tmp_path / "next.bak"
                taken = await asyncio.to_thread(
                    tenure_cli, "backup", "--url", f"http://127.0.0.1:{http}", str(file)
                )
                assert taken.returncode == 0, taken.stderr
                assert checked(file.read_bytes(), file)["nodes"] == 2
                # Its connection was cut: its chunked body never ends.
                assert not (await asyncio.to_thread(rest_of, slow)).endswith(b"0\r\n\r\n")
            finally:
                slow.close()
        [line] = stalled_lines(server)
        assert (line["door"], line["backup_timeout"], line["level"]) == (
            "http",
            float(TIMEOUT),
            "warning",
        )
        assert 0 < int(str(line["bytes"])) < 320 * 60_000
    outcomes = audited(audit)
    assert [outcome for outcome, _ in outcomes] == ["timeout", "ok"]
    assert SAID in outcomes[0][1]


async def test_a_native_backup_whose_client_stops_asking_loses_its_place_and_child(
    tmp_path: Path, wire: Clients
) -> None:
    auth, audit = tmp_path / "auth.toml", tmp_path / "audit.jsonl"
    auth.write_text(AUTH)
    extra: tuple[str, ...] = ("--fsync", "off", "--auth-file", str(auth), "--audit-log", str(audit))
    extra += ("--max-backups", "1", "--backup-timeout", TIMEOUT)
    with ServerProcess(tmp_path / "data", *extra) as server:
        url = f"tenure://127.0.0.1:{server.port}?token={ADMIN}"
        async with bystander(url):
            # 600 KB of state: more than the three reads ask for and the child's pipe holds.
            async with holds(url, 30, 20_000):
                before = set(children(server.proc.pid))
                reader = await wire.connect(server.port, token=ADMIN)
                for n in range(3):  # asked at once, their answers not read: then nothing
                    reader.send(ReadBackup(n * PART, PART))
                forked = await forked_since(before, server)
            await until(lambda: bool(stalled_lines(server)), "timed out", server)
            await gone_and_reaped(forked, server)
            file = tmp_path / "next.bak"
            native = f"tenure://127.0.0.1:{server.port}"
            taken = await asyncio.to_thread(tenure_cli, "backup", "--url", native, str(file))
            assert taken.returncode == 0, taken.stderr
            assert checked(file.read_bytes(), file)["nodes"] == 2
            # Its three answers, then the reason, and its connection closed.
            events = await reader.until_closed()
            parts = [part_of(event) for event in events if isinstance(event, Reply)]
            assert [len(part) for part in parts] == [PART] * 3
            [away] = [event for event in events if isinstance(event, GoingAway)]
            assert away.code is ErrorCode.TIMEOUT
            assert SAID in away.reason
            assert isinstance(events[-1], ConnectionClosed)
        [line] = stalled_lines(server)
        assert (line["door"], line["bytes"]) == ("native", 3 * PART)
    assert [outcome for outcome, _ in audited(audit)] == ["timeout", "ok"]


async def test_a_native_backup_read_in_a_trickle_is_given_up(tmp_path: Path, wire: Clients) -> None:
    """Moving, but less than 256 KiB in ``--backup-timeout``: given up all the same,
    the read it was answering (if any) answered TIMEOUT, then its connection; the
    next backup is taken at once."""
    with ServerProcess(tmp_path / "data", "--fsync", "off", "--backup-timeout", TIMEOUT) as server:
        async with holds(f"tenure://127.0.0.1:{server.port}", 10, 60_000):
            reader = await wire.connect(server.port)  # (no auth file: a loopback client may)
            read, ended = 0, None
            while ended is None:
                asked = reader.send(ReadBackup(read, 1000))
                event = await reader.next_event()
                if isinstance(event, Reply) and event.request_id == asked:
                    part = part_of(event)
                    assert part, "read to its end: no trickle"
                    read += len(part)
                    await asyncio.sleep(0.05)  # (1000 bytes a 50 ms: about 20 KB/s)
                elif isinstance(event, Failure | GoingAway):
                    ended = event
            assert ended.code is ErrorCode.TIMEOUT, ended
            assert read >= 2000  # it was answered on for a while
            other = await wire.connect(server.port)
            first = await other.call(ReadBackup(0, PART))
            assert len(first) == PART  # its place was given back
    assert [line["door"] for line in stalled_lines(server)] == ["native"]


@pytest.mark.parametrize(
    ("argv", "env", "named"),
    [
        (["--backup-timeout", "0.5"], {}, "--backup-timeout='0.5': must be at least 1"),
        (["--backup-timeout", "-1"], {}, "--backup-timeout='-1': must be at least 1"),
        (["--backup-timeout", "5m"], {}, "--backup-timeout='5m': must be a number of seconds"),
        (["--backup-timeout", "86401"], {}, "--backup-timeout='86401': must be at most 86400"),
        ([], {"TENURE_BACKUP_TIMEOUT": "nan"}, "TENURE_BACKUP_TIMEOUT='nan': must be a finite"),
        ([], {"TENURE_BACKUP_TIMEOUT": "0"}, "TENURE_BACKUP_TIMEOUT='0': must be at least 1"),
    ],
)
def test_bad_backup_timeouts_are_refused(argv: list[str], env: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse(*argv, env=env)
    assert named in str(caught.value)


def test_the_backup_timeout_is_a_setting_of_seconds(tmp_path: Path) -> None:
    assert parse().backup_timeout == 300.0
    assert parse("--backup-timeout", "1.5").backup_timeout == 1.5
    file = tmp_path / "t.toml"
    file.write_text("backup_timeout = 600\n")
    assert parse("--config", str(file)).backup_timeout == 600.0
    file.write_text('backup_timeout = "5m"\n')
    with pytest.raises(ConfigError, match="backup_timeout = '5m': must be a number of seconds"):
        parse("--config", str(file))
    # The server refuses it before touching anything.
    refused = serve("--backup-timeout", "0", "--data-dir", str(tmp_path / "data"))
    assert refused.returncode == 2
    assert "--backup-timeout='0': must be at least 1" in refused.stderr
    assert not (tmp_path / "data").exists()
