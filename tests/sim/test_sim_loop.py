"""The simulated loop and network (tenure.testing.sim): time that moves only when
nothing is ready, one schedule per seed, and the network's latency, cuts and resets.
Everything runs in this process: no socket, thread or process of the system."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest

from tenure.testing.sim import SimDeadlockError, SimLoop
from tenure.testing.sim._run import end_every_task

T = TypeVar("T")


def run(seed: int, main: Callable[[SimLoop], Awaitable[T]]) -> T:
    """``main(loop)`` on a new simulated loop of ``seed``; what it left running is
    cancelled and awaited before the loop is closed."""
    loop = SimLoop(seed)
    try:
        return loop.run_until_complete(main(loop))
    finally:
        loop.run_until_complete(_cancel_the_rest())
        loop.close()


async def _cancel_the_rest() -> None:
    left = asyncio.all_tasks() - {asyncio.current_task()}
    for task in left:
        task.cancel()
    await asyncio.gather(*left, return_exceptions=True)


def test_an_hour_of_sleep_moves_the_clock_an_hour_in_one_wait() -> None:
    async def main(loop: SimLoop) -> tuple[float, int]:
        await asyncio.sleep(3600)
        return loop.time(), loop.selector.waits

    now, waits = run(1, main)
    assert now == pytest.approx(3600)
    assert waits == 1  # one select moved the clock: nothing was waited for


def test_a_loop_with_nothing_left_to_wake_it_is_a_deadlock() -> None:
    async def main(loop: SimLoop) -> None:
        await loop.create_future()  # nobody sets it, no timer, nothing in flight

    with pytest.raises(SimDeadlockError):
        run(1, main)


def test_to_thread_runs_on_the_loop() -> None:
    import threading

    async def main(loop: SimLoop) -> bool:
        here = threading.get_ident()
        return await asyncio.to_thread(lambda: threading.get_ident() == here)

    assert run(1, main)


async def _racers(loop: SimLoop) -> str:
    """Tasks made ready together, each noting its turn: the trace of their order."""
    trace: list[str] = []

    async def racer(name: str) -> None:
        for step in range(3):
            trace.append(f"{name}{step}")
            await asyncio.sleep(0)

    await asyncio.gather(*(racer(name) for name in "abcdef"))
    return " ".join(trace)


def test_one_seed_gives_one_order_and_seeds_give_others() -> None:
    assert run(7, _racers) == run(7, _racers)
    orders = {run(seed, _racers) for seed in range(20)}
    assert len(orders) > 10  # the order among ready tasks is the seed's


Serve = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _connected(
    serve: Serve, port: int
) -> tuple[asyncio.Server, asyncio.StreamReader, asyncio.StreamWriter]:
    """A server on ``server:port`` that ``serve``-s each connection, and one connection
    to it from the loop's own host."""
    server = await asyncio.start_server(serve, "server", port)
    reader, writer = await asyncio.open_connection("server", port)
    return server, reader, writer


async def _never_reads(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A peer that keeps the connection an hour and reads nothing."""
    try:
        await asyncio.sleep(3600)
    finally:
        writer.close()


async def _echo(loop: SimLoop) -> tuple[bytes, float]:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(await reader.readexactly(5))
        await writer.drain()
        writer.close()

    server, reader, writer = await _connected(serve, 7000)
    sent = loop.time()
    writer.write(b"hello")
    answer = await reader.readexactly(5)
    took = loop.time() - sent
    assert await reader.read() == b""  # the server closed: the end of the stream
    writer.close()
    server.close()
    await server.wait_closed()
    return answer, took


def test_an_echo_takes_two_crossings_of_the_link() -> None:
    answer, took = run(3, _echo)
    loop = SimLoop(0)
    network = loop.network
    loop.close()
    assert answer == b"hello"
    assert 2 * network.latency <= took <= 2 * (network.latency + network.jitter)


def test_a_run_replays_to_the_same_history() -> None:
    def digest(seed: int) -> str:
        return hashlib.sha256(repr((run(seed, _racers), run(seed, _echo))).encode()).hexdigest()

    assert digest(11) == digest(11)


async def _cut_then_heal(loop: SimLoop) -> tuple[bool, bytes, float]:
    network = loop.network
    got: asyncio.Queue[bytes] = asyncio.Queue()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        got.put_nowait(await reader.readexactly(4))
        writer.close()

    server, _, writer = await _connected(serve, 7001)
    network.cut(loop.host, "server")
    writer.write(b"ping")
    await writer.drain()
    # A minute of the cut: nothing arrives, nothing is reset.
    try:
        async with asyncio.timeout(60):
            await got.get()
        arrived_in_cut = True
    except TimeoutError:
        arrived_in_cut = False
    healed = loop.time()
    network.heal()
    data = await got.get()
    took = loop.time() - healed
    writer.close()
    server.close()
    return arrived_in_cut, data, took


def test_what_is_sent_across_a_cut_arrives_after_the_heal() -> None:
    arrived_in_cut, data, took = run(5, _cut_then_heal)
    assert not arrived_in_cut
    assert data == b"ping"
    assert took < 0.01  # the link's latency, not the minute


async def _reset(loop: SimLoop) -> type[BaseException] | bytes:
    server, reader, writer = await _connected(_never_reads, 7002)
    writer.write(b"x")
    await writer.drain()
    assert loop.network.reset(loop.host, "server") == 1
    try:
        return await reader.read(10)
    except OSError as error:
        return type(error)
    finally:
        writer.close()
        server.close()


def test_a_reset_fails_the_next_read() -> None:
    assert run(2, _reset) is ConnectionResetError


async def _not_reading(loop: SimLoop) -> int:
    """A server that never reads: the client's writes fill the window, then its
    transport's buffer, and drain() waits."""
    server, _, writer = await _connected(_never_reads, 7003)
    written = 0
    try:
        async with asyncio.timeout(10):
            while True:
                writer.write(b"x" * 65536)
                written += 65536
                await writer.drain()
    except TimeoutError:
        pass
    writer.transport.abort()
    server.close()
    return written


def test_a_peer_that_does_not_read_makes_the_writer_wait() -> None:
    written = run(4, _not_reading)
    # The window (1 MiB), and what asyncio buffers besides: the server transport's last
    # read (256 KiB at most), its reader's buffer (twice its 64 KiB limit before it
    # stops reading), the client transport's high-water mark (64 KiB), the last write.
    assert (1 << 20) <= written <= (1 << 20) + 8 * 65536


def test_a_write_on_a_killed_process_connection_is_dropped_silently() -> None:
    # What a dead process's finally block writes, run as the run's end closes its
    # coroutine (cluster seed 2354: "Fatal write error on socket transport", an
    # AttributeError of nobody's), is dropped as after a lost connection.
    async def main(loop: SimLoop) -> list[dict[str, object]]:
        reported: list[dict[str, object]] = []
        loop.set_exception_handler(lambda _, context: reported.append(context))
        server = await asyncio.start_server(_never_reads, "server", 7001)
        connected: asyncio.Future[asyncio.StreamWriter] = loop.create_future()

        async def client() -> None:
            _, writer = await asyncio.open_connection("server", 7001)
            connected.set_result(writer)
            await asyncio.sleep(3600)

        loop.processes.spawn(loop.processes.new("c0"), client())
        writer = await connected
        loop.crash("c0")
        writer.write(b"from a finally block of the dead")
        await asyncio.sleep(1)
        server.close()
        return reported

    loop = SimLoop(5)
    try:
        assert loop.run_until_complete(main(loop)) == []
    finally:  # (a killed process's task never ends: the run's end buries it)
        loop.run_until_complete(end_every_task(loop))
        loop.close()
