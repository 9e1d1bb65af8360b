"""``tenure://`` against real ``tenure serve`` processes, through a fault-injecting proxy.

The API suite (tests/api) already runs on tenure://; these are the things only a
network has: lost connections shorter and longer than the recovery window,
partitions, server crashes and restarts, sharding, and connection errors. Time is
real here, so recovery windows are short (about a second) and every wait is
bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import signal
import socket
from pathlib import Path
from typing import Any

import pytest

import tenure
from tenure.backends._link import describe_error
from tenure.backends.remote import TenureBackend
from tenure.errors import (
    InvalidArgumentError,
    NotFoundError,
    ProtocolError,
    SessionExpiredError,
    UnavailableError,
)
from tests.api.support import eventually, owners, spawn, wait_for_waiters, waiters, within
from tests.netproxy import NetProxy
from tests.server.wire import ServerProcess, free_port


def url_of(port: int) -> str:
    return f"tenure://127.0.0.1:{port}"


def remote(client: tenure.Client) -> TenureBackend:
    assert isinstance(client.backend, TenureBackend)
    return client.backend


async def reconnected(client: tenure.Client, epoch: int) -> None:
    """Wait until the client's (only) link is on connection number ``epoch`` or later."""
    link = remote(client).shards[0].link

    async def done() -> bool:
        return link.epoch >= epoch and link.connected

    await eventually(done, f"connection number {epoch}")


async def test_a_short_drop_keeps_leases_and_queued_waiters(
    client: tenure.Client, direct: tenure.Client, proxy: NetProxy
) -> None:
    session = await client.session("n", recovery_window=10.0)
    queued = await client.session("n", recovery_window=10.0)
    watcher = await direct.session("n")
    lock = await session.mutex("job").lock()
    waiting = spawn(queued.mutex("job").lock())
    await wait_for_waiters(watcher, "job", 1)

    proxy.drop()
    await reconnected(client, 2)

    assert lock.held
    assert lock.lost_reason is None
    assert await owners(watcher, "job") == [session.id]
    assert await waiters(watcher, "job") == [queued.id]
    assert not waiting.done()
    await lock.release()
    second = await within(waiting)
    assert second.token > lock.token


async def test_a_drop_longer_than_the_window_expires_the_session(
    client: tenure.Client, direct: tenure.Client, proxy: NetProxy
) -> None:
    session = await client.session("n", recovery_window=1.0)
    other = await direct.session("n")
    lock = await session.mutex("job").lock()

    proxy.refuse()
    proxy.drop()
    with pytest.raises(SessionExpiredError):
        async with lock:
            await asyncio.sleep(30)  # cancelled by the loss

    assert isinstance(session.lost_reason, SessionExpiredError)
    # The server expires it too (it never heard back): the lock is free again.
    taken = await within(other.mutex("job").lock(), "taking the expired lock")
    assert taken.token > lock.token
    proxy.refuse(False)


async def test_a_partition_is_declared_on_the_clients_clock_before_the_server_acts(
    client: tenure.Client, direct: tenure.Client, proxy: NetProxy
) -> None:
    session = await client.session("n", recovery_window=1.0)
    other = await direct.session("n")
    lock = await session.mutex("job").lock()

    proxy.stall()  # nothing moves, nothing closes: only the client's clock can tell
    with pytest.raises(SessionExpiredError):
        async with lock:
            await asyncio.sleep(30)

    # The server has not acted yet: it counts the window from when it *received* the
    # client's last frame, with a margin (tenure.server._net.gate.SILENCE_MARGIN), so the
    # client, counting from when it sent that frame, gave up first, as it must.
    assert await owners(other, "job") == [session.id]
    proxy.resume()
    # Once the network heals, the client closes the session it gave up.
    taken = await within(other.mutex("job").lock(), "taking the abandoned lock")
    assert taken.token > lock.token


async def test_keepalives_hold_an_idle_session_beyond_its_window(client: tenure.Client) -> None:
    session = await client.session("n", recovery_window=0.4)
    lock = await session.mutex("job").lock()
    await asyncio.sleep(1.5)  # several windows with nothing but pings
    assert lock.held
    assert session.lost_reason is None


async def test_a_request_cut_off_by_a_drop_is_sent_again(
    client: tenure.Client, proxy: NetProxy
) -> None:
    session = await client.session("n", recovery_window=10.0)
    proxy.stall()
    locking = spawn(session.mutex("job").lock())
    await asyncio.sleep(0.05)  # the Acquire is written, and held by the stalled proxy
    proxy.drop()
    proxy.resume()
    lock = await within(locking)
    assert lock.held
    assert await owners(session, "job") == [session.id]


async def test_watchers_see_the_latest_state_after_a_reconnect(
    client: tenure.Client, direct: tenure.Client, proxy: NetProxy
) -> None:
    session = await client.session("n", recovery_window=10.0)
    writer = await direct.session("n")
    await writer.semaphore("cfg").create(limit=1, data=b"v1")
    seen: list[bytes] = []
    stream = session.semaphore("cfg").watch(data=True)
    seen.append((await within(anext(stream))).data)

    proxy.refuse()
    proxy.drop()
    await writer.semaphore("cfg").update(b"v2")  # while the watcher is away
    proxy.refuse(False)

    seen.append((await within(anext(stream))).data)
    assert seen == [b"v1", b"v2"]
    await writer.semaphore("cfg").update(b"v3")
    assert (await within(anext(stream))).data == b"v3"
    await stream.aclose()


async def test_kill_9_and_restart_keeps_leases_waiters_and_token_order(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = ServerProcess(data).__enter__()  # --fsync always: the default
    try:
        async with NetProxy("127.0.0.1", first.port) as proxy:
            url = url_of(proxy.port)
            async with tenure.connect(url) as holder_client, tenure.connect(url) as queue_client:
                await holder_client.create_node("n")
                holder = await holder_client.session("n", recovery_window=30.0)
                sessions = [await queue_client.session("n", recovery_window=30.0) for _ in range(3)]
                lock = await holder.mutex("job").lock()
                queued = []
                for session in sessions:
                    queued.append(spawn(session.mutex("job").lock()))
                    await wait_for_waiters(holder, "job", len(queued))

                first.kill()  # SIGKILL: no goodbye, no flush beyond what was acknowledged
                second = ServerProcess(data).__enter__()
                try:
                    proxy.upstream_port = second.port
                    await reconnected(holder_client, 2)
                    await reconnected(queue_client, 2)

                    assert lock.held
                    assert lock.lost_reason is None
                    assert await owners(holder, "job") == [holder.id]
                    assert await waiters(holder, "job") == [s.id for s in sessions]
                    tokens = [lock.token]
                    await lock.release()
                    for task in queued:
                        granted = await within(task)
                        tokens.append(granted.token)
                        await granted.release()
                    assert tokens == sorted(set(tokens)), "tokens must strictly increase"
                finally:
                    second.kill()
    finally:
        first.kill()


async def test_a_server_with_new_state_loses_the_sessions(tmp_path: Path) -> None:
    first = ServerProcess(tmp_path / "one", "--fsync", "off").__enter__()
    try:
        async with (
            NetProxy("127.0.0.1", first.port) as proxy,
            tenure.connect(url_of(proxy.port)) as client,
        ):
            await client.create_node("n")
            session = await client.session("n", recovery_window=30.0)
            first.kill()
            second = ServerProcess(tmp_path / "two", "--fsync", "off").__enter__()
            try:
                proxy.upstream_port = second.port
                reason = await within(session.lost, "the loss")
                assert isinstance(reason, SessionExpiredError)
                assert "new state" in str(reason)
            finally:
                second.kill()
    finally:
        first.kill()


async def test_graceful_restart_is_survived(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = ServerProcess(data, "--fsync", "off").__enter__()
    try:
        async with (
            NetProxy("127.0.0.1", first.port) as proxy,
            tenure.connect(url_of(proxy.port)) as client,
        ):
            await client.create_node("n")
            session = await client.session("n", recovery_window=30.0)
            lock = await session.mutex("job").lock()
            assert await asyncio.to_thread(first.signal, signal.SIGTERM) == 0
            second = ServerProcess(data, "--fsync", "off").__enter__()
            try:
                proxy.upstream_port = second.port
                await reconnected(client, 2)
                assert lock.held
                assert await owners(session, "job") == [session.id]
            finally:
                second.kill()
    finally:
        first.kill()


async def test_nodes_are_sharded_stably_across_servers(tmp_path: Path) -> None:
    with (
        ServerProcess(tmp_path / "a", "--fsync", "off") as a,
        ServerProcess(tmp_path / "b", "--fsync", "off") as b,
    ):
        forward = f"tenure://127.0.0.1:{a.port},127.0.0.1:{b.port}?sharded=true"
        backward = f"tenure://127.0.0.1:{b.port},127.0.0.1:{a.port}?sharded=true"
        names = [f"node-{i}" for i in range(16)]
        async with tenure.connect(forward) as one, tenure.connect(backward) as two:
            for name in names:
                await one.create_node(name)
            placed = {name: remote(one).shard_for(name).link.endpoint.port for name in names}
            assert set(placed.values()) == {a.port, b.port}, "16 nodes all on one server"
            for name in names:
                # The other client (servers listed in another order) finds each node.
                assert remote(two).shard_for(name).link.endpoint.port == placed[name]
                assert (await two.describe_node(name)).name == name
            async with tenure.connect(url_of(a.port)) as only_a:
                for name in names:
                    if placed[name] == a.port:
                        await only_a.describe_node(name)
                    else:
                        with pytest.raises(NotFoundError):
                            await only_a.describe_node(name)
            # Sessions and locks work on both shards.
            for name in names[:4]:
                async with one.session(name) as session, session.mutex("m") as lock:
                    assert lock.token > 0


async def test_an_unreachable_server_is_unavailable_at_once() -> None:
    with pytest.raises(UnavailableError, match=r"cannot connect to .*: connection refused"):
        await tenure.connect(url_of(free_port()))
    with pytest.raises(OSError, match=r"127\.0\.0\.1"):  # except OSError code catches it too
        await tenure.connect(url_of(free_port()), connect_timeout=1)


async def test_a_server_that_accepts_and_never_answers_is_unavailable_saying_so() -> None:
    """Not "cannot connect to 127.0.0.1:N: " with nothing after it (a timeout's str is empty)."""
    listener = socket.create_server(("127.0.0.1", 0))  # accepts (the backlog), never answers
    port = listener.getsockname()[1]
    try:
        with pytest.raises(UnavailableError) as raised:
            await within(tenure.connect(url_of(port), connect_timeout=0.2))
    finally:
        listener.close()
    assert str(raised.value) == (
        f"cannot connect to 127.0.0.1:{port}: connected, but no answer to Hello within 0.2 s"
    )


@pytest.mark.parametrize(
    ("error", "words"),
    [
        (TimeoutError(), "timed out"),
        (TimeoutError(errno.ETIMEDOUT, "Connection timed out"), "connection timed out"),
        (ConnectionRefusedError(errno.ECONNREFUSED, "Connect call failed"), "connection refused"),
        (ConnectionResetError(errno.ECONNRESET, "Connection reset by peer"), "reset by peer"),
        (OSError(errno.ENETUNREACH, "Network is unreachable"), "network is unreachable"),
        (OSError(), "OSError"),
        (UnavailableError(), "UnavailableError"),
    ],
)
def test_every_connection_error_is_described_in_words(error: BaseException, words: str) -> None:
    assert words in describe_error(error)


async def test_an_argument_the_codec_refuses_is_a_plain_invalid_argument_error(
    client: tenure.Client,
) -> None:
    """The client checks arguments first; below it, the codec's refusal is translated."""
    session = await client.session("n")
    backend = session._backend_session()  # past the client's checks, on purpose
    with pytest.raises(InvalidArgumentError) as raised:
        await backend.acquire("sem", count=-1, data=b"", timeout=0, ephemeral=True)
    assert type(raised.value) is InvalidArgumentError  # not the codec's LocalProtocolError
    assert (
        str(raised.value) == "count: -1 is outside 0..2**64-1 (the wire cannot carry it in Acquire)"
    )
    assert await backend.acquire("sem", count=1, data=b"", timeout=0, ephemeral=True)


async def test_node_calls_fail_after_connect_timeout_while_the_server_is_down(
    proxy: NetProxy,
) -> None:
    async with tenure.connect(url_of(proxy.port), connect_timeout=0.3) as client:
        await client.create_node("n")
        proxy.refuse()
        proxy.drop()
        with pytest.raises(UnavailableError, match=r"no connection to \S+ \(last error: .+\)"):
            await within(client.describe_node("n"))
        proxy.refuse(False)
        await reconnected(client, 2)  # the backoff's next try, within 2 s
        assert (await within(client.describe_node("n"))).name == "n"


@pytest.mark.parametrize(
    ("url", "options"),
    [
        ("tenure://127.0.0.1:1?colour=blue", {}),
        ("tenure://127.0.0.1:1", {"colour": "blue"}),
        ("tenure://127.0.0.1:1,127.0.0.1:1", {}),
        ("tenure://127.0.0.1:1,127.0.0.1:1?sharded=true", {}),
        ("tenure://127.0.0.1:1?sharded=maybe", {}),
        ("tenure://127.0.0.1:1", {"sharded": "perhaps"}),
        ("tenure://127.0.0.1:1/path", {}),
        ("tenure://user@127.0.0.1:1", {}),
        ("tenure://127.0.0.1:99999", {}),
        ("tenure://127.0.0.1:1?connect_timeout=soon", {}),
        ("tenure://127.0.0.1:1", {"connect_timeout": -1}),
        ("tenure://127.0.0.1:1", {"ssl": "yes"}),
        ("tenure://127.0.0.1:1?ca=/no/such/ca.pem", {}),
    ],
)
async def test_bad_urls_and_options_are_invalid_arguments(
    url: str, options: dict[str, Any]
) -> None:
    with pytest.raises(InvalidArgumentError):
        await tenure.connect(url, **options)


async def test_the_token_is_not_shown_in_the_clients_repr(tenure_server: ServerProcess) -> None:
    async with tenure.connect(f"{url_of(tenure_server.port)}?token=s3cret") as client:
        assert "s3cret" not in repr(client)
        assert "token=" in repr(client)


async def test_the_servers_clock_times_out_acquires_and_ttls_are_renewed(
    tenure_server: ServerProcess,
) -> None:
    async with tenure.connect(url_of(tenure_server.port)) as client:
        await client.create_node("n", default_lease=0.3)  # every grant lasts 0.3 s unless renewed
        holder = await client.session("n")
        other = await client.session("n")
        lock = await holder.mutex("job").lock()
        with pytest.raises(TimeoutError):
            await within(other.mutex("job").lock(timeout=0.2))
        assert await waiters(holder, "job") == []  # the timed-out request left the queue
        await asyncio.sleep(1.0)  # over three TTLs: the client renews the lease
        assert lock.held
        assert lock.lost_reason is None
        assert await owners(other, "job") == [holder.id]


async def test_a_slow_network_is_not_a_loss(
    client: tenure.Client, direct: tenure.Client, proxy: NetProxy
) -> None:
    proxy.delay = 0.1  # each way: every round trip takes at least 0.2 s
    session = await client.session("n", recovery_window=1.0)
    other = await direct.session("n")
    lock = await session.mutex("job").lock()
    await asyncio.sleep(1.5)  # longer than the window, with slow keep-alives
    assert lock.held
    assert session.lost_reason is None
    assert await owners(other, "job") == [session.id]
    await lock.release()
    assert await within(other.mutex("job").lock()) is not None


def test_the_client_runs_on_uvloop(tenure_server: ServerProcess) -> None:
    """The link's protocol object is driven by uvloop's transports just as by asyncio's."""
    uvloop = pytest.importorskip("uvloop")
    url = url_of(tenure_server.port)

    async def scenario() -> list[Any]:
        async with tenure.connect(url) as client, tenure.connect(url) as other:
            await client.create_node("uv", exist_ok=True)
            session, writer = await client.session("uv"), await other.session("uv")
            await writer.semaphore("cfg").create(limit=1, data=b"v1")
            stream = session.semaphore("cfg").watch(data=True)
            seen = [(await within(anext(stream))).data]
            tokens = []
            for name in ("a", "b", "a"):
                lock = await session.mutex(name).lock()
                tokens.append(lock.token)
                await lock.release()
            await writer.semaphore("cfg").update(b"v2")
            seen.append((await within(anext(stream))).data)
            await stream.aclose()
            return [seen, tokens == sorted(set(tokens))]

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        assert runner.run(scenario()) == [[b"v1", b"v2"], True]


async def test_a_broken_answer_to_hello_fails_the_connect_at_once() -> None:
    """Not after connect_timeout: the protocol error is the answer."""
    handlers: list[asyncio.Task[Any]] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        handlers.append(asyncio.current_task())  # type: ignore[arg-type]
        try:
            await reader.read(65536)  # the Hello
            writer.write(b"\x00\x00\x00\x03abc")  # a body that is not one msgpack value
            await writer.drain()
            await reader.read(65536)  # until the client hangs up
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        with pytest.raises(ProtocolError, match="not valid msgpack"):
            async with asyncio.timeout(2.0):  # the connect timeout is 5 s
                await tenure.connect(url_of(port))
        async with asyncio.timeout(5.0):
            await asyncio.gather(*handlers)  # the server side is closed too
