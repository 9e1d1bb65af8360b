"""The etcd client's keepalive stream (``tenure/_etcd/streams.py``), driven without
etcd: what its writer sends, and when; a close while the stream is broken."""

from __future__ import annotations

import asyncio
from typing import Any

from tenure._etcd.streams import KeepAlive


class Lease:
    """A Renewable that counts its renewals."""

    def __init__(self, lease_id: int, ttl: int) -> None:
        self.lease_id, self.ttl = lease_id, ttl
        self.renewals = 0

    def renewed(self, sent_at: float) -> None:
        self.renewals += 1

    def lease_gone(self) -> None:
        raise AssertionError("not in this test")

    def reconnected(self) -> None:
        raise AssertionError("not in this test")


class Call:
    """What the writer writes to: a stream call that keeps the requests."""

    def __init__(self) -> None:
        self.written: list[int] = []

    async def write(self, request: Any) -> None:
        self.written.append(int(request.ID))


async def test_a_lease_added_to_renew_at_once_wakes_the_writer() -> None:
    """A resumed lease may have little of its TTL left: its first renewal goes out at
    once, even while the writer sleeps until another lease's next renewal (it slept a
    third of that TTL before, and a resume in the same client took 10 s)."""
    keepalive = KeepAlive(client=None)  # type: ignore[arg-type]  # the stream is ours
    keepalive._start = lambda: None  # type: ignore[method-assign]  # no etcd here
    call, reader = Call(), asyncio.get_running_loop().create_future()
    keepalive.add(Lease(1, 30))  # due in 10 s
    writer = asyncio.ensure_future(keepalive._write(call, reader))  # type: ignore[arg-type]
    try:
        for _ in range(50):
            await asyncio.sleep(0)
        assert call.written == []  # nothing due yet: the writer sleeps
        keepalive.add(Lease(2, 30), at_once=True)
        for _ in range(50):
            await asyncio.sleep(0)
        assert call.written == [2]
    finally:
        reader.set_result(None)
        await asyncio.wait_for(writer, 5)


async def test_a_lease_removed_while_another_renewal_is_written_is_skipped() -> None:
    """Two leases due together; the first one's write yields, and the second lease is
    removed meanwhile (a member stepping down drops its lease): the writer skips it and
    goes on (it raised KeyError, which tore the stream down and told every other lease
    "reconnected")."""
    keepalive = KeepAlive(client=None)  # type: ignore[arg-type]  # the stream is ours
    keepalive._start = lambda: None  # type: ignore[method-assign]  # no etcd here
    reader = asyncio.get_running_loop().create_future()

    class Yielding(Call):
        async def write(self, request: Any) -> None:
            await super().write(request)
            if int(request.ID) == 1:
                keepalive.remove(2)
                await asyncio.sleep(0)

    call = Yielding()
    keepalive.add(Lease(1, 30), at_once=True)
    keepalive.add(Lease(2, 30), at_once=True)
    writer = asyncio.ensure_future(keepalive._write(call, reader))  # type: ignore[arg-type]
    try:
        for _ in range(50):
            await asyncio.sleep(0)
        assert call.written == [1]
        assert not writer.done()  # still renewing lease 1, not ended by an error
        keepalive.add(Lease(3, 30), at_once=True)
        for _ in range(50):
            await asyncio.sleep(0)
        assert call.written == [1, 3]
    finally:
        reader.set_result(None)
        await asyncio.wait_for(writer, 5)


async def test_a_stream_closed_while_it_waits_for_its_broken_reader_stops() -> None:
    """close() cancels the stream's task; a cancel that lands while the task waits for
    its broken call's reader to end must end the task (it was swallowed there, and the
    stream went on reopening against an etcd that was down: close() never returned)."""
    reader_ending = asyncio.Event()
    reader_cancelled = asyncio.Event()

    class Client:
        generation = 0
        endpoint = "nowhere:2379"

        def failover(self, generation: int) -> None:
            self.generation += 1

    class Broken(KeepAlive):
        def _open(self) -> Any:
            return type("Call", (), {"cancel": lambda self: None})()

        async def _write(self, call: Any, reader: asyncio.Task[None]) -> None:
            await asyncio.sleep(0)  # (the reader starts)
            raise ConnectionError("etcd is down")

        async def _read(self, call: Any) -> None:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                reader_cancelled.set()
                await reader_ending.wait()  # slow to end: the task waits for it
                raise

    stream = Broken(Client())  # type: ignore[arg-type]
    stream._start()
    await asyncio.wait_for(reader_cancelled.wait(), 5)  # the task waits for its reader
    task = stream._task
    assert task is not None
    closing = asyncio.ensure_future(stream.close())
    await asyncio.sleep(0)
    reader_ending.set()
    await asyncio.wait({closing}, timeout=5)  # (no cancel at the end: that would end it)
    try:
        assert closing.done()
        assert task.done()  # ended, not reopening the stream behind close()
    finally:
        closing.cancel()
        task.cancel()
        await asyncio.gather(closing, task, return_exceptions=True)
