"""The journal's writer thread: group commit, durable reports, failure, stop."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from tenure.server import DataDir
from tenure.server._durability.writer import MAX_QUEUED, Writer, WriterFailedError

WAIT = 10.0


class GatedDataDir(DataDir):
    """A disk whose first sync waits for the test (so batches pile up behind it)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, preallocate_chunk=64 * 1024)
        self.syncing = threading.Event()  # a sync has begun
        self.gate = threading.Event()  # the first sync may finish
        self.syncs = 0
        self.fail_with: OSError | None = None

    def sync(self) -> None:
        self.syncs += 1
        self.syncing.set()
        if not self.gate.wait(WAIT):
            raise AssertionError("the test never opened the gate")
        if self.fail_with is not None:
            raise self.fail_with
        super().sync()


class Reports:
    """What the writer told the loop."""

    def __init__(self) -> None:
        self.durable: list[int] = []
        self.failed: list[BaseException] = []
        self.changed = asyncio.Event()

    def on_durable(self, batch: int, seconds: float) -> None:
        assert seconds >= 0
        self.durable.append(batch)
        self.changed.set()

    def on_failed(self, error: BaseException) -> None:
        self.failed.append(error)
        self.changed.set()

    async def until(self, done: object) -> None:
        async with asyncio.timeout(WAIT):
            while not callable(done) or not done():
                self.changed.clear()
                await self.changed.wait()


def start(data_dir: DataDir, *, max_queued: int = MAX_QUEUED) -> tuple[Reports, Writer]:
    """Recover ``data_dir`` and start a writer on it that reports to a fresh Reports."""
    data_dir.recover()
    reports = Reports()
    loop = asyncio.get_running_loop()
    writer = Writer(data_dir, loop, reports.on_durable, reports.on_failed, max_queued=max_queued)
    return reports, writer


def records(data_dir: DataDir, *payloads: bytes) -> bytes:
    for payload in payloads:
        data_dir.append(payload)
    return data_dir.take_pending()


def recovered(path: Path) -> list[bytes]:
    data_dir = DataDir(path)
    try:
        return data_dir.recover().records
    finally:
        data_dir.close()


async def test_batches_handed_during_a_sync_share_the_next_one(tmp_path: Path) -> None:
    data_dir = GatedDataDir(tmp_path)
    reports, writer = start(data_dir)
    try:
        assert writer.submit(records(data_dir, b"one")) == 1
        assert await asyncio.to_thread(data_dir.syncing.wait, WAIT)
        # The thread is inside the first sync: these wait for one more, all together.
        handed = [writer.submit(records(data_dir, f"r{n}".encode())) for n in range(2, 6)]
        assert handed == [2, 3, 4, 5]
        data_dir.gate.set()
        await reports.until(lambda: reports.durable and reports.durable[-1] == 5)
        assert reports.durable == [1, 5]
        assert data_dir.syncs == 2
        writer.drain()
        assert data_dir.free > 0  # preallocated after the syncs, off their path
    finally:
        data_dir.gate.set()
        writer.stop()
        data_dir.close()
    assert recovered(tmp_path) == [b"one", b"r2", b"r3", b"r4", b"r5"]


async def test_stop_makes_everything_handed_durable_first(tmp_path: Path) -> None:
    data_dir = DataDir(tmp_path)
    reports, writer = start(data_dir)
    for n in range(20):
        writer.submit(records(data_dir, f"r{n}".encode()))
    writer.stop()
    with pytest.raises(WriterFailedError, match="stopped"):
        writer.submit(records(data_dir, b"too late"))
    data_dir.close()
    assert recovered(tmp_path) == [f"r{n}".encode() for n in range(20)]
    await reports.until(lambda: reports.durable and reports.durable[-1] == 20)
    assert reports.failed == []


async def test_drain_waits_until_the_thread_is_idle(tmp_path: Path) -> None:
    data_dir = GatedDataDir(tmp_path)
    _, writer = start(data_dir)
    try:
        writer.submit(records(data_dir, b"one"))
        assert await asyncio.to_thread(data_dir.syncing.wait, WAIT)
        with pytest.raises(WriterFailedError, match="busy"):
            writer.drain(timeout=0.05)  # still inside the sync
        data_dir.gate.set()
        writer.drain()
        assert data_dir.syncs == 1
    finally:
        data_dir.gate.set()
        writer.stop()
        data_dir.close()


async def test_a_failed_sync_stops_the_writer_and_is_reported(tmp_path: Path) -> None:
    data_dir = GatedDataDir(tmp_path)
    data_dir.fail_with = OSError(5, "Input/output error")
    reports, writer = start(data_dir)
    try:
        writer.submit(records(data_dir, b"one"))
        assert await asyncio.to_thread(data_dir.syncing.wait, WAIT)
        writer.submit(records(data_dir, b"two"))  # waits behind the failing sync
        data_dir.gate.set()
        await reports.until(lambda: reports.failed)
        assert reports.durable == []  # neither batch was ever called durable
        assert [str(e) for e in reports.failed] == ["[Errno 5] Input/output error"]
        with pytest.raises(WriterFailedError):
            writer.submit(records(data_dir, b"three"))
        with pytest.raises(WriterFailedError, match="failed"):
            writer.drain()
        assert data_dir.syncs == 1  # it stopped: "two" was never synced
    finally:
        writer.stop()
        data_dir.fail_with = None
        data_dir.close()


async def test_submit_waits_while_max_queued_bytes_wait_for_the_thread(tmp_path: Path) -> None:
    data_dir = GatedDataDir(tmp_path)
    reports, writer = start(data_dir, max_queued=10)
    loop = asyncio.get_running_loop()
    try:
        writer.submit(records(data_dir, b"one"))
        assert await asyncio.to_thread(data_dir.syncing.wait, WAIT)
        writer.submit(records(data_dir, b"r2"))  # 10 bytes wait: the limit
        with pytest.raises(WriterFailedError, match="took nothing"):
            writer.submit(records(data_dir, b"lost"), timeout=0.05)
        opener = threading.Timer(0.05, data_dir.gate.set)
        opener.start()
        assert writer.submit(records(data_dir, b"r3")) == 3  # once the thread took r2
        opener.join()
        writer.drain()
    finally:
        data_dir.gate.set()
        writer.stop()
        data_dir.close()
    assert recovered(tmp_path) == [b"one", b"r2", b"r3"]
    with pytest.raises(ValueError, match="max_queued"):
        Writer(data_dir, loop, reports.on_durable, reports.on_failed, max_queued=0)


async def test_commit_here_only_when_the_thread_is_idle(tmp_path: Path) -> None:
    data_dir = GatedDataDir(tmp_path)
    reports, writer = start(data_dir)
    try:
        data_dir.gate.set()
        assert writer.commit_here(records(data_dir, b"here"))  # idle: written and synced
        assert data_dir.syncs == 1
        writer.drain()  # the preallocation it left to the thread
        assert data_dir.free > 0
        data_dir.gate.clear()
        data_dir.syncing.clear()
        writer.submit(records(data_dir, b"there"))
        assert await asyncio.to_thread(data_dir.syncing.wait, WAIT)
        assert not writer.commit_here(records(data_dir, b"not now"))  # busy: submit
        data_dir.gate.set()
        writer.drain()
        data_dir.fail_with = OSError(28, "No space left on device")
        with pytest.raises(OSError, match="No space"):
            writer.commit_here(records(data_dir, b"failing"))
        with pytest.raises(WriterFailedError):
            writer.submit(records(data_dir, b"after"))  # a failure here is the writer's too
    finally:
        data_dir.gate.set()
        writer.stop()
        data_dir.fail_with = None
        data_dir.close()
    assert reports.failed == []  # raised to the caller, not reported
    assert recovered(tmp_path)[:2] == [b"here", b"there"]
