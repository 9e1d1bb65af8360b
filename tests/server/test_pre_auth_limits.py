"""Limits before authentication on the main port (issue 28), against real servers.

* Before its Welcome a connection may send one Hello of ``--max-hello-size``
  bytes: a frame announced larger (up to ``--max-frame-size``) is refused as its
  bytes pass that limit, not buffered (the server's RSS stays flat).
* ``--max-handshaking`` connections not past their Hello; past it the server stops
  accepting (more wait in the listen backlog), while authenticated clients go on,
  and a burst of clients is served instead of failing.
* ``--auth-failures-per-minute`` wrong tokens from one address block it for
  ``--auth-block-time``: even the right token is refused then, from that address
  only; the block is logged once.
* ``--max-connections-per-address``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import struct
from pathlib import Path

import pytest

from tenure._core import CreateNode
from tenure._protocol import ConnectionClosed, Refused, Welcome
from tenure.errors import ErrorCode
from tests.ports import free_port
from tests.server.http import scrape, value
from tests.server.wire import WAIT, Clients, ServerProcess, WireClient

pytestmark = pytest.mark.timeout(60)

SECRET = "pre-auth-secret-1"
AUTH_FILE = f"""
[[token]]
name = "ops"
secret = "{SECRET}"
access = "read-write"
"""
#: Another loopback address (Linux routes all of 127/8 to lo): another peer.
OTHER = "127.0.0.2"


def rss(pid: int) -> int:
    """The resident set of process ``pid``, in bytes (from /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


async def connect(port: int, source: str = "127.0.0.1") -> WireClient:
    """A raw native connection from ``source`` (no Hello sent)."""
    reader, writer = await asyncio.wait_for(
        asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0)), WAIT
    )
    return WireClient(reader, writer)


async def hello(port: int, token: str, source: str = "127.0.0.1") -> Welcome | Refused:
    """A Hello with ``token`` from ``source``: the server's answer (the connection is closed)."""
    client = await connect(port, source)
    try:
        answer = await client.hello(token=token)
        assert isinstance(answer, Welcome | Refused), answer
        return answer
    finally:
        await client.close()


def events(server: ServerProcess, name: str) -> list[dict[str, object]]:
    """The server's JSON log lines of event ``name``."""
    lines = [json.loads(line) for line in server.lines() if line.startswith("{")]
    return [line for line in lines if line.get("event") == name]


def auth_file(tmp_path: Path) -> Path:
    path = tmp_path / "auth.toml"
    path.write_text(AUTH_FILE)
    return path


async def test_a_large_frame_before_hello_is_refused_not_buffered(tmp_path: Path) -> None:
    # Defaults only: the old server, which buffered a whole 1 MiB frame per
    # connection before its Hello, fails this on memory (~100 MB).
    count, size = 100, (1 << 20) - 16
    with ServerProcess(tmp_path / "data", "--fsync", "off") as server:
        before = rss(server.proc.pid)
        clients = [await connect(server.port) for _ in range(count)]
        for client in clients:
            client.writer.write(struct.pack(">I", size) + b"\x91" * size)

        async def answered(client: WireClient) -> object:
            with contextlib.suppress(ConnectionError):
                return await client.next_event()
            return ConnectionClosed()

        tasks = [asyncio.ensure_future(answered(client)) for client in clients]
        done, pending = await asyncio.wait(tasks, timeout=WAIT)
        grown = rss(server.proc.pid) - before
        for task in pending:
            task.cancel()
        for client in clients:
            client.writer.transport.abort()
            await client.close()
        assert grown < 50 << 20, f"the server grew {grown >> 20} MiB"
        assert not pending, f"{len(pending)} connections left open"
        for task in done:
            answer = task.result()
            if isinstance(answer, Refused):  # (or reset before it could be read)
                assert answer.code is ErrorCode.PROTOCOL, answer
        assert "Hello too large; closing" in server.output()


def sockets_of(pid: int) -> int:
    """How many sockets process ``pid`` has open (from /proc)."""
    count = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            count += os.readlink(fd).startswith("socket:")
    return count


async def test_past_max_handshaking_the_server_stops_accepting(
    tmp_path: Path, wire: Clients
) -> None:
    flags = ("--fsync", "off", "--auth-file", str(auth_file(tmp_path)), "--max-handshaking", "4")
    with ServerProcess(tmp_path / "data", *flags) as server:
        working = await wire.connect(server.port, token=SECRET)
        before = sockets_of(server.proc.pid)
        silent = [await connect(server.port) for _ in range(4)]  # no Hello: handshaking
        server.wait_log("too many connections in their handshake; accepting paused")
        # The next ones wait in the listen backlog, not accepted: the server holds
        # no more of them than the cap (the old server closed them during their
        # handshake, which a client's first connect does not retry).
        late = [await connect(server.port) for _ in range(20)]
        answers = [asyncio.ensure_future(client.hello(token=SECRET)) for client in late]
        await asyncio.sleep(0.3)
        assert sockets_of(server.proc.pid) - before <= 4
        assert not any(answer.done() for answer in answers)
        await working.call(CreateNode("still-served"))  # welcomed clients go on
        # Once one of them says Hello, the next is accepted, and so on.
        assert isinstance(await silent[0].hello(token=SECRET), Welcome)
        for answer in answers:
            assert isinstance(await answer, Welcome)
        for client in (*silent, *late):
            await client.close()


async def test_a_burst_of_clients_waits_past_max_handshaking_instead_of_failing(
    tmp_path: Path,
) -> None:
    # 40 clients at once, a cap of 2: the old server closed 38 of them.
    with ServerProcess(tmp_path / "data", "--fsync", "off", "--max-handshaking", "2") as server:
        answers = await asyncio.gather(*(hello(server.port, SECRET) for _ in range(40)))
        assert all(isinstance(answer, Welcome) for answer in answers), answers
        # ...and a flood of silent ones still costs the server at most 2 sockets.
        before = sockets_of(server.proc.pid)
        silent = [await connect(server.port) for _ in range(40)]
        server.wait_log("too many connections in their handshake; accepting paused")
        await asyncio.sleep(0.3)
        assert sockets_of(server.proc.pid) - before <= 2
        for client in silent:
            await client.close()


async def test_wrong_tokens_block_the_address_and_only_that_one(tmp_path: Path) -> None:
    http_port = free_port()
    flags = (
        *("--fsync", "off", "--auth-file", str(auth_file(tmp_path))),
        *("--auth-failures-per-minute", "3", "--auth-block-time", "600"),
        *("--http-port", str(http_port)),
    )
    with ServerProcess(tmp_path / "data", *flags) as server:
        before = await scrape(http_port)
        assert value(before, "tenure_auth_blocks_total") == 0.0
        for attempt in range(3):
            answer = await hello(server.port, f"guess-{attempt}")
            assert isinstance(answer, Refused), answer
            assert answer.message == "unknown token"
        for _ in range(5):  # blocked: the right token too
            answer = await hello(server.port, SECRET)
            assert isinstance(answer, Refused), answer
            assert answer.code is ErrorCode.AUTHENTICATION
            assert "too many authentication failures" in answer.message
        assert isinstance(await hello(server.port, SECRET, OTHER), Welcome)
        [blocked] = events(server, "auth_throttled")  # one line for the burst
        assert blocked["peer"] == "127.0.0.1"
        assert len(events(server, "auth_failed")) == 3  # the blocked attempts are silent
        # ...and counted on /metrics: one block, five attempts refused, one address.
        after = await scrape(http_port)
        assert value(after, "tenure_auth_blocks_total") == 1.0
        assert value(after, "tenure_auth_refused_total") == 5.0
        assert value(after, "tenure_auth_blocked_addresses") == 1.0


async def test_a_success_with_ones_own_token_does_not_forget_the_guesses(
    tmp_path: Path,
) -> None:
    # Issue 37: a guesser holding one valid token logged in with it between guesses,
    # which used to wipe its address's count: 540 guesses went unblocked.
    flags = ("--fsync", "off", "--auth-file", str(auth_file(tmp_path)))
    with ServerProcess(tmp_path / "data", *flags, "--auth-failures-per-minute", "3") as server:
        for attempt in range(2):
            assert isinstance(await hello(server.port, f"guess-{attempt}"), Refused)
            assert isinstance(await hello(server.port, SECRET), Welcome)
        answer = await hello(server.port, "guess-2")  # the third failure of the minute
        assert isinstance(answer, Refused), answer
        assert answer.message == "unknown token"
        answer = await hello(server.port, SECRET)  # blocked: its own good token too
        assert isinstance(answer, Refused), answer
        assert "too many authentication failures" in answer.message
        [blocked] = events(server, "auth_throttled")
        assert blocked["peer"] == "127.0.0.1"


async def test_max_connections_per_address(tmp_path: Path, wire: Clients) -> None:
    flags = ("--fsync", "off", "--max-connections-per-address", "2")
    with ServerProcess(tmp_path / "data", *flags) as server:
        first = await wire.connect(server.port)
        await wire.connect(server.port)
        third = await connect(server.port)
        assert isinstance(await third.next_event(), ConnectionClosed)  # at once
        server.wait_log("too many connections from one address; refusing")
        await third.close()
        other = await connect(server.port, OTHER)
        assert isinstance(await other.hello(), Welcome)
        await other.close()
        await first.call(CreateNode("per-address"))


async def test_a_closed_connection_frees_its_place_under_the_per_address_cap(
    tmp_path: Path,
) -> None:
    with ServerProcess(tmp_path / "data", "--max-connections-per-address", "1") as server:
        first = await connect(server.port)
        assert isinstance(await first.hello(), Welcome)
        await first.close()
        deadline = asyncio.get_running_loop().time() + WAIT
        while True:  # until the server has seen the close (bounded)
            again = await connect(server.port)
            # Welcome, or closed at once while counted (reset, if the Hello was on
            # its way as the server closed: the server does not linger to read it).
            answer: object
            try:
                answer = await again.hello()
            except ConnectionError as error:
                answer = error
            await again.close()
            if isinstance(answer, Welcome):
                break
            assert asyncio.get_running_loop().time() < deadline, answer
            await asyncio.sleep(0.02)
