"""``tenure serve`` as a real process: handshake, sessions, pushes, crashes, shutdown."""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import tenure
from tenure import Capability
from tenure._core import (
    MAX_COUNT,
    Acquire,
    AcquireStatus,
    AttachSession,
    CreateNode,
    CreateSession,
    DescribeNode,
    DescribeSemaphore,
    Granted,
    ListNodes,
    NodeConfig,
    Release,
)
from tenure._protocol import (
    ConnectionClosed,
    Failure,
    GoingAway,
    Hello,
    Refused,
    Reply,
    Request,
    encode_message,
)
from tenure._protocol.frames import encode_frame
from tenure.errors import ErrorCode, UnsupportedError
from tests.protocol.helpers import pack

from .wire import Clients, ServerProcess, WireClient

pytestmark = pytest.mark.timeout(60)

KEY1, KEY2, KEY3 = b"key-one", b"key-two", b"key-three"


async def open_session(
    wire: Clients, port: int, key: bytes, node: str = "n"
) -> tuple[WireClient, int]:
    client = await wire.connect(port)
    info = await client.call(CreateSession(node, key, timeout=60.0))
    return client, info.session_id


def test_help_explains_every_flag() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "tenure", "serve", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    for flag in ("--host", "--port", "--data-dir", "--fsync", "--max-frame-size"):
        assert flag in result.stdout
    assert "TENURE_MAX_CONNECTIONS" in result.stdout
    assert "always" in result.stdout


def test_bad_setting_is_named(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "tenure", "serve", "--data-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"TENURE_FSYNC": "sometimes", "PATH": ""},
    )
    assert result.returncode == 2
    assert "TENURE_FSYNC='sometimes'" in result.stderr


async def test_config_line_flag_beats_env(tmp_path: Path, wire: Clients) -> None:
    env = {"TENURE_FSYNC": "off", "TENURE_MAX_CONNECTIONS": "7"}
    with ServerProcess(tmp_path / "data", "--fsync", "batch", env=env) as server:
        client = await wire.connect(server.port)
        assert client.welcome is not None
        assert len(client.welcome.instance_id) == 16
        await client.close()
        lines = [json.loads(line) for line in server.lines()]
    config = next(line for line in lines if line["msg"] == "config")
    assert config["fsync"] == "batch"
    assert config["sources"]["fsync"] == "flag"
    assert (config["max_connections"], config["sources"]["max_connections"]) == (7, "env")
    assert "host" not in config  # at its default: only the settings given are logged


async def test_a_server_that_looks_for_no_deadlock_says_so(tmp_path: Path) -> None:
    # --deadlock-search-limit 0 turns the search off: the Welcome says so, and the
    # client then declares no DEADLOCK_DETECTION, so require= refuses the server.
    with ServerProcess(tmp_path / "data", "--fsync", "off") as server:
        async with tenure.connect(f"tenure://127.0.0.1:{server.port}") as client:
            assert Capability.DEADLOCK_DETECTION in client.capabilities
    with ServerProcess(tmp_path / "off", "--fsync", "off", "--deadlock-search-limit", "0") as off:
        url = f"tenure://127.0.0.1:{off.port}"
        async with tenure.connect(url) as client:
            assert Capability.DEADLOCK_DETECTION not in client.capabilities
            assert Capability.CLAIMS in client.capabilities  # (the rest of version 6)
        with pytest.raises(UnsupportedError, match="deadlock_detection"):
            await tenure.connect(url, require=[Capability.DEADLOCK_DETECTION])


async def test_queued_waiter_gets_granted_push(tmp_path: Path, wire: Clients) -> None:
    with ServerProcess(tmp_path / "data") as server:
        first = await wire.connect(server.port)
        assert await first.call(CreateNode("n")) is None
        first, s1 = await open_session(wire, server.port, KEY1)
        second, s2 = await open_session(wire, server.port, KEY2)
        held = await first.call(Acquire(s1, "m", MAX_COUNT, request_id=1, ephemeral=True))
        assert held.status is AcquireStatus.GRANTED
        queued = await second.call(Acquire(s2, "m", MAX_COUNT, request_id=7, ephemeral=True))
        assert queued.status is AcquireStatus.QUEUED
        assert await first.call(Release(s1, "m")) is True
        push = await second.next_push()
        assert isinstance(push, Granted)
        assert (push.session_id, push.request_id, push.name) == (s2, 7, "m")
        assert push.token > held.token
        assert first.pushes == []
        assert (await first.ping(42)).nonce == 42


async def test_foreign_session_is_permission_denied(tmp_path: Path, wire: Clients) -> None:
    with ServerProcess(tmp_path / "data") as server:
        admin = await wire.connect(server.port)
        await admin.call(CreateNode("n"))
        owner, s1 = await open_session(wire, server.port, KEY1)
        other = await wire.connect(server.port)
        failure = await other.fail(Acquire(s1, "m", MAX_COUNT, request_id=1, ephemeral=True))
        assert failure.code is ErrorCode.PERMISSION_DENIED
        failure = await other.fail(Release(s1 + 100, "m"))
        assert failure.code is ErrorCode.PERMISSION_DENIED
        # A wrong key cannot take it either; the right key with a newer seq_no can.
        failure = await other.fail(AttachSession(s1, b"wrong", 2))
        assert failure.code is ErrorCode.PERMISSION_DENIED
        await other.call(AttachSession(s1, KEY1, 2))
        failure = await owner.fail(Release(s1, "m"))
        assert failure.code is ErrorCode.PERMISSION_DENIED
        assert await other.call(Release(s1, "m")) is False


async def test_garbage_on_one_connection_spares_the_others(tmp_path: Path, wire: Clients) -> None:
    with ServerProcess(tmp_path / "data") as server:
        good = await wire.connect(server.port)
        await good.call(CreateNode("n"))
        bad = await wire.connect(server.port)
        bad.writer.write(b"\x00\x00\x00\x05\xc1\xc1\xc1\xc1\xc1")  # 0xc1: never valid msgpack
        events = await bad.until_closed()
        assert isinstance(events[0], GoingAway)
        assert events[0].code is ErrorCode.PROTOCOL
        early = await wire.connect(server.port, hello=False)
        # A frame far beyond max_frame_size (the first byte 0: a native client's).
        early.writer.write(b"\x00\xff\xff\xff")
        events = await early.until_closed()
        assert isinstance(events[0], Refused)
        assert events[0].code is ErrorCode.PROTOCOL
        description = await good.call(CreateSession("n", KEY1))
        assert description.seq_no == 1


async def test_unknown_version_is_refused(tmp_path: Path, wire: Clients) -> None:
    with ServerProcess(tmp_path / "data") as server:
        client = await wire.connect(server.port, hello=False)
        client.writer.write(encode_frame(pack([1, 99, "future", None, 1 << 20])))
        refused = await client.next_event()
        assert isinstance(refused, Refused)
        assert refused.code is ErrorCode.UNSUPPORTED
        assert "this server speaks 1" in refused.message
        assert isinstance(await client.next_event(), ConnectionClosed)


async def test_max_connections_refuses_with_limit_exceeded(tmp_path: Path, wire: Clients) -> None:
    with ServerProcess(tmp_path / "data", "--max-connections", "1") as server:
        first = await wire.connect(server.port)
        second = await wire.connect(server.port, hello=False)
        refusal = await second.hello()  # the first byte says which protocol to refuse in
        assert isinstance(refusal, Refused)
        assert refusal.code is ErrorCode.LIMIT_EXCEEDED
        assert (await first.ping(1)).nonce == 1


async def test_detached_session_gets_its_pushes_before_attach_reply(
    tmp_path: Path, wire: Clients
) -> None:
    with ServerProcess(tmp_path / "data") as server:
        admin = await wire.connect(server.port)
        await admin.call(CreateNode("n"))
        first, s1 = await open_session(wire, server.port, KEY1)
        second, s2 = await open_session(wire, server.port, KEY2)
        await first.call(Acquire(s1, "m", MAX_COUNT, request_id=1, ephemeral=True))
        await second.call(Acquire(s2, "m", MAX_COUNT, request_id=2, ephemeral=True))
        await second.close()  # s2 is detached, still queued
        server.wait_log(f'"sessions": [{s2}]')  # the server saw it and detached s2
        again = await wire.connect(server.port)
        assert await first.call(Release(s1, "m")) is True
        answer_id = again.send(AttachSession(s2, KEY2, 2))
        answer = await again.answer(answer_id)
        assert isinstance(answer, Reply)
        assert [type(p) for p in again.pushes] == [Granted]
        pushes_then_reply = [e for e in again.events if not isinstance(e, ConnectionClosed)]
        assert pushes_then_reply[-1] is answer


async def test_kill_9_keeps_leases_waiters_and_tokens(tmp_path: Path, wire: Clients) -> None:
    data = tmp_path / "data"
    with ServerProcess(data) as server:
        admin = await wire.connect(server.port)
        await admin.call(CreateNode("n", NodeConfig(recovery_window=60.0)))
        first, s1 = await open_session(wire, server.port, KEY1)
        second, s2 = await open_session(wire, server.port, KEY2)
        third, s3 = await open_session(wire, server.port, KEY3)
        held = await first.call(Acquire(s1, "m", MAX_COUNT, request_id=1, ephemeral=True))
        for client, sid in ((second, s2), (third, s3)):
            result = await client.call(Acquire(sid, "m", MAX_COUNT, request_id=sid, ephemeral=True))
            assert result.status is AcquireStatus.QUEUED
        instance = admin.welcome
        server.kill()  # SIGKILL: no goodbye, no flush
    with ServerProcess(data) as server:
        a = await wire.connect(server.port)
        assert a.welcome is not None
        assert instance is not None
        assert a.welcome.instance_id == instance.instance_id
        b = await wire.connect(server.port)
        c = await wire.connect(server.port)
        for client, sid, key in ((a, s1, KEY1), (b, s2, KEY2), (c, s3, KEY3)):
            info = await client.call(AttachSession(sid, key, 2))
            assert info.seq_no == 2
        described = await a.call(DescribeSemaphore(s1, "m", owners=True, waiters=True))
        owners = described.description.owners
        assert [(o.session_id, o.token) for o in owners] == [(s1, held.token)]
        assert [w.session_id for w in described.description.waiters] == [s2, s3]
        assert await a.call(Release(s1, "m")) is True
        push = await b.next_push()
        assert isinstance(push, Granted)
        assert push.session_id == s2
        assert push.token > held.token
        assert c.pushes == []


async def test_kill_9_with_answers_in_flight_loses_nothing_acknowledged(
    tmp_path: Path, wire: Clients
) -> None:
    data = tmp_path / "data"
    acknowledged: set[str] = set()
    with ServerProcess(data) as server:
        clients = [await wire.connect(server.port) for _ in range(4)]
        sent: list[dict[int, str]] = [{} for _ in clients]
        for burst in range(200):  # pipelined: many batches in flight at the kill
            for index, client in enumerate(clients):
                name = f"c{index}-{burst:03}"
                sent[index][client.send(CreateNode(name))] = name
            if burst == 100:
                # Half of them answered at least: then the kill lands mid-stream.
                for index, client in enumerate(clients):
                    answer = await client.answer(min(sent[index]) + 50)
                    assert isinstance(answer, Reply)
                server.kill()  # SIGKILL: whatever was not answered may or may not be there
                break
        for index, client in enumerate(clients):
            await client.until_closed()  # every answer that left before the kill
            acknowledged.update(
                sent[index][e.request_id] for e in client.events if isinstance(e, Reply)
            )
    assert len(acknowledged) >= 4 * 51
    with ServerProcess(data) as server:
        client = await wire.connect(server.port)
        found = set((await client.call(ListNodes())).names)  # at most 800 of them
        assert acknowledged <= found


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
async def test_signal_says_going_away_and_exits_0(
    tmp_path: Path, wire: Clients, signum: int
) -> None:
    data = tmp_path / "data"
    with ServerProcess(data) as server:
        client = await wire.connect(server.port)
        await client.call(CreateNode("n"))
        server.proc.send_signal(signum)
        events = await client.until_closed()
        assert isinstance(events[0], GoingAway)
        assert events[0].code is ErrorCode.UNAVAILABLE
        assert server.proc.wait(timeout=10) == 0
    with ServerProcess(data) as server:
        client = await wire.connect(server.port)
        failure = await client.answer(client.send(CreateNode("n")))
        assert isinstance(failure, Failure)
        assert failure.code is ErrorCode.ALREADY_EXISTS  # the node survived the restart


async def test_expiry_by_the_timer_is_pushed_and_survives_a_crash(
    tmp_path: Path, wire: Clients
) -> None:
    data = tmp_path / "data"
    with ServerProcess(data) as server:
        admin = await wire.connect(server.port)
        await admin.call(CreateNode("n"))
        first = await wire.connect(server.port)
        s1 = (await first.call(CreateSession("n", KEY1, timeout=0.3))).session_id
        second, s2 = await open_session(wire, server.port, KEY2)
        held = await first.call(Acquire(s1, "m", MAX_COUNT, request_id=1, ephemeral=True))
        await second.call(Acquire(s2, "m", MAX_COUNT, request_id=2, ephemeral=True))
        await first.close()  # detached; nobody re-attaches: it expires 0.3 s later
        push = await second.next_push()  # sent by the server's timer, not by a request
        assert isinstance(push, Granted)
        assert push.token > held.token
        server.kill()
    with ServerProcess(data) as server:
        again = await wire.connect(server.port)
        failure = await again.fail(AttachSession(s1, KEY1, 2))
        assert failure.code is ErrorCode.SESSION_EXPIRED  # the expiry was logged
        await again.call(AttachSession(s2, KEY2, 2))
        described = await again.call(DescribeSemaphore(s2, "m", owners=True))
        assert [o.session_id for o in described.description.owners] == [s2]


def test_a_data_dir_serves_one_server_at_a_time(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "data"):
        result = subprocess.run(
            [sys.executable, "-m", "tenure", "serve", "--port", "0"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env={**os.environ, "TENURE_DATA_DIR": str(tmp_path / "data")},
        )
    assert result.returncode == 1
    assert "in use by another tenure server" in result.stderr


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
async def test_peers_that_reset_with_replies_pending_spare_the_others(
    tmp_path: Path, wire: Clients, loop: str
) -> None:
    """Replies to a connection that is already gone are dropped, not written: uvloop
    raises on a write to a closed transport, and that once stopped every outbox."""
    rude = b"".join(
        encode_frame(encode_message(message))
        for message in (
            Hello(client_name="rude"),
            Request(1, CreateSession("n", b"key")),
            Request(2, DescribeNode("n")),
        )
    )
    with ServerProcess(tmp_path / "data", "--fsync", "off", "--event-loop", loop) as server:
        healthy = await wire.connect(server.port)
        await healthy.call(CreateNode("n"))
        for _ in range(40):
            with socket.create_connection(("127.0.0.1", server.port)) as raw:
                raw.sendall(rude)
                # Close with RST at once, before the server has answered.
                raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            assert (await healthy.call(DescribeNode("n"))).name == "n"
        assert "Traceback" not in server.output()
