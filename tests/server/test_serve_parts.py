"""The pieces of ``tenure serve`` that need no process: settings and the session table."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from tenure._core import (
    MAX_COUNT,
    Acquire,
    AcquireFailed,
    AttachSession,
    CreateNode,
    CreateSession,
    DeleteSemaphore,
    DescribeNode,
    Granted,
    Release,
    SemaphoreDescription,
    SessionEnded,
    WatchFired,
)
from tenure._core.values import (
    MAX_PREFIX_WATCHES_PER_NODE,
    MAX_WATCHES_PER_SEMAPHORE,
    NO_IDENTITY,
    OwnerInfo,
)
from tenure._protocol import Failure, GoingAway, Reply
from tenure.errors import ErrorCode
from tenure.server import DataDir, Journal, _session_table
from tenure.server._config.serve_config import ConfigError, ServeConfig, add_arguments, resolve
from tenure.server._durability.identity import instance_id
from tenure.server._durability.storage import FsyncMode
from tenure.server._serve import Server
from tenure.server._server_host import wal_host
from tenure.server._session_table import SessionTable

from .wire import WAIT, Clients, bound


def parse(*argv: str, env: dict[str, str] | None = None) -> ServeConfig:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return resolve(parser.parse_args(argv), env or {})


def test_defaults() -> None:
    config = parse()
    assert (config.host, config.port, config.data_dir) == ("127.0.0.1", 6388, Path("tenure-data"))
    assert config.fsync is FsyncMode.ALWAYS
    assert set(config.sources.values()) == {"default"}


def test_flag_beats_env_beats_default() -> None:
    env = {"TENURE_PORT": "7000", "TENURE_HOST": "0.0.0.0", "TENURE_FSYNC": "OFF"}
    config = parse("--port", "7001", env=env)
    assert (config.port, config.host, config.fsync) == (7001, "0.0.0.0", FsyncMode.OFF)
    assert config.sources["port"] == "flag"
    assert config.sources["host"] == "env"
    assert config.fields()["fsync"] == "off"


@pytest.mark.parametrize(
    ("argv", "env", "named"),
    [
        (["--port", "70000"], {}, "--port"),
        ([], {"TENURE_MAX_FRAME_SIZE": "10"}, "TENURE_MAX_FRAME_SIZE"),
        (["--max-connections", "0"], {}, "--max-connections"),
        ([], {"TENURE_FSYNC": "never"}, "TENURE_FSYNC"),
        (["--port", "eighty"], {}, "--port"),
    ],
)
def test_bad_values_name_their_setting(argv: list[str], env: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        parse(*argv, env=env)


def test_the_prefix_watch_bounds_are_settings() -> None:
    """Issue 47's bounds: ``--max-prefix-watches-per-node`` (1 to 1000000, the engine's
    default) and ``--quota-prefix-watches`` (0: none), by flag and environment."""
    default = parse()
    assert default.max_prefix_watches_per_node == MAX_PREFIX_WATCHES_PER_NODE == 1_000
    assert default.quota_prefix_watches == 0
    assert parse("--max-prefix-watches-per-node", "7").max_prefix_watches_per_node == 7
    env = {"TENURE_MAX_PREFIX_WATCHES_PER_NODE": "8", "TENURE_QUOTA_PREFIX_WATCHES": "9"}
    both = parse(env=env)
    assert (both.max_prefix_watches_per_node, both.quota_prefix_watches) == (8, 9)
    for bad in ("0", "1000001"):
        with pytest.raises(ConfigError, match="--max-prefix-watches-per-node"):
            parse("--max-prefix-watches-per-node", bad)


def test_the_watches_per_semaphore_bound_is_a_setting() -> None:
    """Issue 47, round two: ``--max-watches-per-semaphore`` (1 to 1000000, the
    engine's default), by flag and environment."""
    assert parse().max_watches_per_semaphore == MAX_WATCHES_PER_SEMAPHORE == 1_000
    assert parse("--max-watches-per-semaphore", "7").max_watches_per_semaphore == 7
    env = {"TENURE_MAX_WATCHES_PER_SEMAPHORE": "8"}
    assert parse(env=env).max_watches_per_semaphore == 8
    for bad in ("0", "1000001"):
        with pytest.raises(ConfigError, match="--max-watches-per-semaphore"):
            parse("--max-watches-per-semaphore", bad)


def grant(session_id: int, request_id: int = 1) -> Granted:
    return Granted(session_id, request_id, "m", 10 + request_id, 1)


def test_table_routes_to_owner_and_queues_for_detached() -> None:
    table: SessionTable[str] = SessionTable()
    table.attach(1, "a")
    table.attach(2, "b")
    table.detach(2)
    routed, overflowed = table.route([grant(1), grant(2, 1), grant(2, 2)])
    assert routed == [("a", grant(1))]
    assert overflowed == []
    assert table.queued(2) == 2
    assert table.attach(2, "c") == [grant(2, 1), grant(2, 2)]
    assert table.owner(2) == "c"
    assert table.queued(2) == 0


def test_table_moves_sessions_and_drops_only_what_a_connection_owns() -> None:
    table: SessionTable[str] = SessionTable()
    table.attach(1, "a")
    table.attach(2, "a")
    table.attach(2, "b")  # moved by a newer attach
    assert table.drop_connection("a") == [1]
    assert table.owner(1) is None
    assert table.owner(2) == "b"
    assert table.owned_by("b") == [2]


def test_session_ended_is_delivered_then_forgotten() -> None:
    table: SessionTable[str] = SessionTable()
    table.attach(1, "a")
    ended = SessionEnded(1, ErrorCode.SESSION_EXPIRED, "gone")
    assert table.route([ended]) == ([("a", ended)], [])
    assert table.owner(1) is None
    failed = AcquireFailed(2, 1, "m", ErrorCode.SESSION_EXPIRED, "gone")
    table.route([failed])  # session 2 is detached: queued...
    table.route([SessionEnded(2, ErrorCode.SESSION_EXPIRED, "gone")])
    assert table.queued(2) == 0  # ...and dropped when it ends


def test_table_overflow_is_reported_once() -> None:
    table: SessionTable[str] = SessionTable(max_queued=2)
    routed, overflowed = table.route([grant(5, n) for n in range(5)])
    assert routed == []
    assert overflowed == [5]


def test_a_detached_watcher_keeps_only_the_latest_firing_of_each_watch() -> None:
    """A repeating watch on a busy semaphore must not overflow a detached session."""
    table: SessionTable[str] = SessionTable(max_queued=10)

    def fired(watch_id: int, n: int) -> WatchFired:
        return WatchFired(7, watch_id, "cfg", SemaphoreDescription("cfg", 1, 0, b"%d" % n, False))

    routed, overflowed = table.route(
        [grant(7, 1)] + [fired(watch_id, n) for n in range(1_000) for watch_id in (1, 2)]
    )
    assert (routed, overflowed) == ([], [])
    # (Queued without their state: the client describes after its re-attach.)
    assert table.attach(7, "a") == [grant(7, 1), WatchFired(7, 1, "cfg"), WatchFired(7, 2, "cfg")]


def test_a_detached_session_s_firings_wait_without_their_state() -> None:
    """Issue 47: each queued firing of a distinct change held a description of its
    own, as big as the group it lists (no estimate counted them: 500 detached
    watchers of a 2,000-holder semaphore's owners kept 96 MB). A firing waits as its
    ids and name (nil: the client describes to learn it); an attached one keeps its
    state."""
    table: SessionTable[str] = SessionTable()
    table.attach(8, "a")
    owners = tuple(
        OwnerInfo(sid, 1, b"x" * 100, sid, "", NO_IDENTITY, 0.0) for sid in range(1, 2_001)
    )
    listed = SemaphoreDescription("g", MAX_COUNT, 2_000, b"", False, owners)
    routed, _ = table.route([WatchFired(7, 3, "g", listed), WatchFired(8, 4, "g", listed)])
    assert routed == [("a", WatchFired(8, 4, "g", listed))]
    (kept,) = table.attach(7, "b")
    assert kept == WatchFired(7, 3, "g", None)


def _lines_run(call: Callable[[], object], module: str) -> int:
    """How many lines of ``module``'s code ``call`` runs (its functions' and their
    comprehensions'): the work done, counted, not timed."""
    lines = 0

    def local(frame: FrameType, event: str, arg: object) -> Any:
        nonlocal lines
        if event == "line":
            lines += 1
        return local

    def calls(frame: FrameType, event: str, arg: object) -> Any:
        return local if event == "call" and frame.f_code.co_filename == module else None

    before = sys.gettrace()  # (a coverage run's tracer: put back after)
    sys.settrace(calls)
    try:
        call()
    finally:
        sys.settrace(before)
    return lines


def test_a_detached_session_s_firings_replace_in_constant_work_per_firing() -> None:
    """Issue 47: each firing replaced its watch's older one by scanning the whole queue,
    so one change of a node cost the square of a detached session's prefix watches.
    A change that fires every one of 400 watches, routed to a detached session that
    has each one's firing queued, runs the same lines per firing as the first change:
    no scan of what is queued. The order: a replaced firing moves to the end."""
    table: SessionTable[str] = SessionTable()
    watches = range(1, 401)

    def change(n: int) -> list[WatchFired]:
        return [
            WatchFired(7, w, "s", SemaphoreDescription("s", 1, 0, b"%d" % n, False))
            for w in watches
        ]

    first = _lines_run(lambda: table.route(change(0)), _session_table.__file__)
    table.route([grant(7, 1)])
    second = _lines_run(lambda: table.route(change(1)), _session_table.__file__)
    assert table.queued(7) == 401
    # About ten lines per firing, whatever is queued (the old scan: about 400 more).
    assert first <= 20 * len(watches)
    assert second <= first + 10, (first, second)
    table.route([WatchFired(7, 5, "s", None)])
    assert table.attach(7, "a") == [
        grant(7, 1),
        *[WatchFired(7, w, "s") for w in watches if w != 5],
        WatchFired(7, 5, "s", None),
    ]


def test_instance_id_is_kept_unless_the_state_is_fresh(tmp_path: Path) -> None:
    first = instance_id(tmp_path, fresh=True)
    assert len(first) == 16
    assert instance_id(tmp_path, fresh=False) == first
    assert instance_id(tmp_path, fresh=True) != first


class FailingDataDir(DataDir):
    """A disk whose writes or syncs start failing on demand (the server under test is
    real; with ``--fsync always`` its writer thread is the one that fails)."""

    broken: str | None = None  # "write" or "sync": which of them fails

    def write(self, data: bytes | bytearray) -> None:
        if self.broken == "write":
            raise OSError(5, "Input/output error")
        super().write(data)

    def sync(self) -> None:
        if self.broken == "sync":
            raise OSError(5, "Input/output error")
        super().sync()


@pytest.mark.parametrize("failing", ["write", "sync"])
async def test_failed_commit_is_fatal_and_nothing_is_acknowledged(
    tmp_path: Path, failing: str
) -> None:
    loop = asyncio.get_running_loop()
    data_dir = FailingDataDir(tmp_path / "data")
    journal = Journal(data_dir)
    engine = journal.open(loop.time())
    config = ServeConfig(port=0, data_dir=tmp_path / "data")
    server = Server(config, wal_host(config, journal, engine), bound(config), b"0" * 16)
    _, port = await server.start()
    clients = Clients()
    try:
        client = await clients.connect(port)
        assert await client.call(CreateNode("ok")) is None
        data_dir.broken = failing
        client.send(CreateNode("lost"))
        events = await client.until_closed()
        assert not any(isinstance(event, Reply | Failure) for event in events)
        assert await asyncio.wait_for(server.wait(), WAIT) == 1
        data_dir.broken = None
        with pytest.raises(OSError, match="not open"):
            data_dir.sync()  # aborted: the journal's file is closed
    finally:
        await clients.close_all()
    reopened = Journal(DataDir(tmp_path / "data"))
    try:
        # A failed write leaves nothing; after a failed sync the written record may
        # be read back or not (as after a crash): it was never acknowledged.
        expected = [["ok"]] if failing == "write" else [["ok"], ["lost", "ok"]]
        assert sorted(reopened.open(0.0).nodes) in expected
    finally:
        reopened.close()


class SlowDataDir(DataDir):
    """A disk whose syncs take a while (so batches pile up behind them), and that
    remembers how much of the log each one made durable."""

    durable = 0  # bytes of the segment known durable
    syncs = 0

    def sync(self) -> None:
        time.sleep(0.01)
        end = self._end  # written before this sync began: durable once it returns
        super().sync()
        self.durable, self.syncs = end, self.syncs + 1

    def durable_bytes(self) -> bytes:
        (segment,) = self.path.glob("wal-*.log")
        return segment.read_bytes()[: self.durable]


async def test_answers_leave_in_order_and_only_once_their_records_are_durable(
    tmp_path: Path,
) -> None:
    loop = asyncio.get_running_loop()
    data_dir = SlowDataDir(tmp_path / "data")
    journal = Journal(data_dir)
    engine = journal.open(loop.time())
    config = ServeConfig(port=0, data_dir=data_dir.path)
    server = Server(config, wal_host(config, journal, engine), bound(config), b"3" * 16)
    _, port = await server.start()
    clients = Clients()
    try:
        client = await clients.connect(port)
        names: dict[int, str] = {}
        for burst in range(8):  # bursts sent while earlier ones are being synced
            for n in range(10):
                name = f"node-{burst:02}-{n:02}"
                names[client.send(CreateNode(name))] = name
            names[client.send(DescribeNode(f"node-{burst:02}-00"))] = ""  # reads wait too
            await asyncio.sleep(0.003)
        answered = []
        for _ in names:
            answer = await client.next_event()
            assert isinstance(answer, Reply), answer
            answered.append(answer.request_id)
            name = names[answer.request_id] or names[answer.request_id - 10]
            # Every answer (a read's too) tells of a change already on the disk.
            assert name.encode() in data_dir.durable_bytes()
        assert answered == sorted(names)  # one connection: never out of order
        assert data_dir.syncs < len(names)  # group commit: batches shared syncs
    finally:
        await clients.close_all()
        server.stop()
        assert await asyncio.wait_for(server.wait(), WAIT) == 0


@asynccontextmanager
async def running(path: Path, *, compact_every: int = 100_000) -> AsyncIterator[tuple[Server, int]]:
    """A real Server in this process (so a test can reach its knobs); stopped at the end."""
    journal = Journal(DataDir(path), compact_every=compact_every)
    engine = journal.open(asyncio.get_running_loop().time())
    config = ServeConfig(port=0, data_dir=path)
    server = Server(config, wal_host(config, journal, engine), bound(config), b"1" * 16)
    _, port = await server.start()
    try:
        yield server, port
    finally:
        server.stop()
        assert await asyncio.wait_for(server.wait(), WAIT) == 0


async def test_snapshots_are_taken_while_serving(tmp_path: Path) -> None:
    clients = Clients()
    try:
        async with running(tmp_path / "data", compact_every=3) as (server, port):
            client = await clients.connect(port)
            data = tmp_path / "data"
            journal = server.served.commit.journal
            assert journal is not None
            for n in range(7):
                await client.call(CreateNode(f"n{n}"))
                # A forked child writes each snapshot while the server goes on serving.
                await until(lambda: journal.snapshot_fd is None)
            snapshots = sorted(data.glob("snapshot-*.bin"))
            assert len(snapshots) == 1  # the older ones (and their segments) are gone
            assert snapshots[0].name > "snapshot-0000000000000001.bin"
            assert not list(data.glob("*.tmp"))
    finally:
        await clients.close_all()
    reopened = Journal(DataDir(tmp_path / "data"))
    try:
        assert len(reopened.open(0.0).nodes) == 7
    finally:
        reopened.close()


async def until(condition: Callable[[], bool]) -> None:
    """Poll ``condition`` (bounded by WAIT)."""
    for _ in range(int(WAIT / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition never held")


async def test_overflowing_push_queue_closes_the_session(tmp_path: Path) -> None:
    clients = Clients()
    try:
        async with running(tmp_path / "data") as (server, port):
            server._table.max_queued = 1
            first = await clients.connect(port)
            await first.call(CreateNode("n"))
            s1 = (await first.call(CreateSession("n", b"k1"))).session_id
            second = await clients.connect(port)
            s2 = (await second.call(CreateSession("n", b"k2"))).session_id
            await first.call(Acquire(s1, "m", MAX_COUNT, request_id=1, ephemeral=True))
            await second.call(Acquire(s2, "x", 1, request_id=1, ephemeral=True))
            await second.call(Acquire(s2, "m", MAX_COUNT, request_id=2, ephemeral=True))
            await second.close()
            await until(lambda: server._table.owner(s2) is None)
            assert await first.call(Release(s1, "m")) is True  # Granted: queued for s2
            await first.call(DeleteSemaphore(s1, "x", force=True))  # LeaseLost: one too many
            await until(lambda: s2 not in server.host.engine.sessions)
            again = await clients.connect(port)
            failure = await again.fail(AttachSession(s2, b"k2", 2))
            assert failure.code is ErrorCode.SESSION_EXPIRED
            assert (await again.call(DescribeNode("n"))).sessions == 1
    finally:
        await clients.close_all()


async def test_requests_crossing_going_away_fail_unavailable(tmp_path: Path) -> None:
    clients = Clients()
    try:
        async with running(tmp_path / "data") as (server, port):
            client = await clients.connect(port)
            server.stop()
            request_id = client.send(CreateNode("late"))  # sent before reading GoingAway
            events = await client.until_closed()
            assert isinstance(events[0], GoingAway)
            assert events[0].code is ErrorCode.UNAVAILABLE
            failure = events[1]
            assert isinstance(failure, Failure)
            assert (failure.request_id, failure.code) == (request_id, ErrorCode.UNAVAILABLE)
    finally:
        await clients.close_all()
