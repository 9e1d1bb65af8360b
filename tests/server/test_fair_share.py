"""One connection that floods the server takes no more than its share (issue 10, finding 1).

A native connection that pipelines requests and never reads its answers, against a
real ``tenure serve``: the server serves it in turns of ``--max-requests-per-turn``
with every other connection served in between, and stops reading it while
``--pause-unread`` bytes of answers wait unsent (docs/operations.md, "Fair share").
What is asserted is what happens, never how fast: the healthy client's session,
short as its window is, is never lost (its own clock would declare it lost if the
server went quiet for a window), and the abuser's requests stop being served.
"""

from __future__ import annotations

import signal
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import tenure
from tenure._core import (
    MAX_COUNT,
    Acquire,
    AcquireResult,
    AttachSession,
    Command,
    CreateNode,
    CreateSemaphore,
    CreateSession,
    DescribeSemaphore,
    Release,
)
from tenure._protocol import NEED_DATA, ClientConnection, Hello, Reply, Request, Welcome
from tenure.errors import ErrorCode
from tests.api.support import eventually, owners, within
from tests.flooder import Flooder, flooding_socket

from .wire import Clients, ServerProcess

pytestmark = pytest.mark.timeout(120)

#: The healthy client's recovery window: a server busy for this long loses it.
WINDOW = 0.5
CYCLES = 50


def blocking_call(sock: socket.socket, codec: ClientConnection, rid: int, command: Any) -> Any:
    """Send one request on a blocking socket; its reply value."""
    sock.sendall(codec.send(Request(rid, command)))
    while (event := codec.next_event()) is NEED_DATA:
        codec.receive_data(sock.recv(65536))
    assert isinstance(event, Reply), event
    return event.value


def handshake(sock: socket.socket) -> ClientConnection:
    codec = ClientConnection()
    sock.sendall(codec.send(Hello(client_name="flood")))
    while (event := codec.next_event()) is NEED_DATA:
        codec.receive_data(sock.recv(65536))
    assert isinstance(event, Welcome), event
    return codec


def pipelined(codec: ClientConnection, commands: Sequence[Command[Any]], repeat: int) -> bytes:
    """``commands`` as requests, ``repeat`` times over; the ids repeat too (each is
    answered long before it comes round again)."""
    block = b"".join(codec.send(Request(1000 + n, c)) for n, c in enumerate(commands))
    return block * repeat


async def test_a_flood_of_pipelined_requests_does_not_starve_the_others(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "data", "--fsync", "off") as server:
        sock = flooding_socket(server.port, small=False)
        codec = handshake(sock)
        blocking_call(sock, codec, 1, CreateNode("n"))
        abuser = blocking_call(sock, codec, 2, CreateSession("n", b"a", timeout=60.0)).session_id
        # A marker first (so the healthy side knows the flood is being served), then
        # 100,000 acquire + release pairs, journaled each, all in one go.
        marker = codec.send(Request(3, Acquire(abuser, "flooding", 1, 1, ephemeral=True)))
        pairs = [
            command
            for i in range(500)
            for command in (
                Acquire(abuser, f"f{i}", MAX_COUNT, i + 2, ephemeral=True),
                Release(abuser, f"f{i}"),
            )
        ]
        flooder = Flooder(sock, marker + pipelined(codec, pairs, 200))
        flooder.start()
        try:
            async with tenure.connect(f"tenure://127.0.0.1:{server.port}") as client:
                session = await client.session("n", recovery_window=WINDOW)

                async def flooding() -> bool:
                    return await owners(session, "flooding") == [abuser]

                await eventually(flooding, "the flood being served")
                tokens = []
                for _ in range(CYCLES):
                    lock = await within(session.mutex("healthy").lock())
                    tokens.append(lock.token)
                    await within(lock.release())
                assert session.lost_reason is None
                assert tokens == sorted(set(tokens))
                assert await owners(session, "flooding") == [abuser]  # still connected
        finally:
            flooder.finish()


async def test_pipelining_clients_take_turns(tmp_path: Path, wire: Clients) -> None:
    with ServerProcess(tmp_path / "data", "--fsync", "off", "--max-requests-per-turn", "1") as s:
        a, b = await wire.connect(s.port), await wire.connect(s.port)
        await a.call(CreateNode("n"))
        pairs = 200
        floods: list[bytes] = []
        for client, name in ((a, "a"), (b, "b")):
            sid = (await client.call(CreateSession("n", name.encode()))).session_id
            commands: list[Command[Any]] = []
            for i in range(pairs):
                commands += [
                    Acquire(sid, name, MAX_COUNT, i + 1, ephemeral=True),
                    Release(sid, name),
                ]
            floods.append(pipelined(client.codec, commands, 1))
        # Both floods wait in the server's sockets before it reads either: written
        # while it ran, a busy machine could stop this process between the two writes
        # for longer than the server takes to serve the first flood (4 ms; a run of
        # every test on four workers did: all of a's grants came before b's).
        s.proc.send_signal(signal.SIGSTOP)
        try:
            for client, flood in ((a, floods[0]), (b, floods[1])):
                client.writer.write(flood)
                await client.writer.drain()
        finally:
            s.proc.send_signal(signal.SIGCONT)
        tokens: list[list[int]] = []
        for client in (a, b):
            answers = [await client.answer(1000 + n) for n in range(2 * pairs)]  # in order
            values = [answer.value for answer in answers if isinstance(answer, Reply)]
            assert len(values) == 2 * pairs
            assert values[1::2] == [True] * pairs
            granted = [v.token for v in values[::2] if isinstance(v, AcquireResult) and v.token]
            assert len(granted) == pairs
            tokens.append(granted)
        # One request each per turn: the grants of the two interleave (served one
        # connection after the other, each one's tokens would be a run of their own).
        assert min(tokens[0]) < max(tokens[1])
        assert min(tokens[1]) < max(tokens[0])


async def test_a_client_that_does_not_read_is_not_read_then_closed(
    tmp_path: Path, wire: Clients
) -> None:
    with ServerProcess(tmp_path / "data", "--fsync", "off", "--pause-unread", "8192") as server:
        other = await wire.connect(server.port)
        await other.call(CreateNode("n"))
        prober = (await other.call(CreateSession("n", b"p", timeout=60.0))).session_id

        async def fence() -> int:
            """The token of a fresh grant: one more than every grant so far."""
            got = await other.call(Acquire(prober, "probe", MAX_COUNT, 1, ephemeral=True))
            await other.call(Release(prober, "probe"))
            return int(got.token)

        sock = flooding_socket(server.port)
        codec = handshake(sock)
        abuser = blocking_call(sock, codec, 1, CreateSession("n", b"a", timeout=1.0)).session_id
        blocking_call(sock, codec, 2, CreateSemaphore(abuser, "big", 1, b"x" * 60_000))
        before = await fence()
        # Each round: a 60 KB answer, and a grant (a fencing token) to count it by.
        rounds = 1000
        commands: list[Command[Any]] = [
            DescribeSemaphore(abuser, "big"),
            Acquire(abuser, "tick", MAX_COUNT, 1, ephemeral=True),
            Release(abuser, "tick"),
        ]
        flooder = Flooder(sock, pipelined(codec, commands, rounds))
        flooder.start()
        try:
            server.wait_log('"msg": "answers unread; not reading the client"')
            assert '"pause_unread": 8192' in server.output()
            # Not read, it is silent: once its session's window passed, it is closed.
            server.wait_log("silent for a recovery window; closing")
            assert flooder.wait_dropped()
        finally:
            flooder.finish()
        served = await fence() - before - 1
        assert 0 < served < rounds  # the rest was never served (60 MB of answers)
        again = await wire.connect(server.port)
        expired = await again.fail(AttachSession(abuser, b"a", 2))
        assert expired.code is ErrorCode.SESSION_EXPIRED
        assert "does not read its replies" not in server.output()  # throttled, not dropped
