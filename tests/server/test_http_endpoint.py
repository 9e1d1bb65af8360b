"""``tenure serve --http-port``: /metrics, /healthz and /readyz of real server processes.

Each test scrapes a real ``tenure serve`` and parses ``/metrics`` with
prometheus-client's own parser, then checks that the series moved as the actions
taken say they must.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TypeVar

import pytest
from dflockd_client import AsyncDistributedLock

from tenure._core import (
    MAX_COUNT,
    Acquire,
    AcquireStatus,
    Command,
    CreateNode,
    CreateSession,
    Granted,
    Release,
)
from tenure._protocol import GoingAway, Reply
from tenure.server import DataDir, FsyncMode, Journal
from tenure.server._config.serve_config import ConfigError, add_arguments
from tenure.server._faces import settings
from tenure.server._startup import configure

from .http import get, scrape, value
from .wire import WAIT, Clients, ServerProcess, free_port

pytestmark = pytest.mark.timeout(60)

R = TypeVar("R")


def serving(tmp_path: Path, *extra: str) -> tuple[ServerProcess, int]:
    """A server with its HTTP endpoint on a free port (not yet waited for)."""
    http_port = free_port()
    server = ServerProcess(
        tmp_path / "data", "--fsync", "off", "--http-port", str(http_port), *extra
    )
    return server, http_port


async def test_metrics_follow_locks_taken_and_released(tmp_path: Path, wire: Clients) -> None:
    server, http = serving(tmp_path)
    with server:
        before = await scrape(http)
        assert value(before, "tenure_ready") == 1
        assert value(before, "tenure_holds") == 0
        info = {labels: v for (name, labels), v in before.items() if name == "tenure_server_info"}
        assert len(info) == 1
        instance_id = (tmp_path / "data" / "instance-id").read_bytes().hex()
        assert dict(next(iter(info)))["instance_id"] == instance_id
        # Not part of a cluster: no cluster series at all (an alert on them never fires).
        assert not [name for name, _ in before if name.startswith("tenure_cluster_")]

        first = await wire.connect(server.port)
        second = await wire.connect(server.port)
        await first.call(CreateNode("metrics"))
        a = (await first.call(CreateSession("metrics", b"a"))).session_id
        b = (await second.call(CreateSession("metrics", b"b"))).session_id
        mutex = ("job", MAX_COUNT)
        granted = await first.call(Acquire(a, *mutex, 1, ephemeral=True))
        assert granted.status is AcquireStatus.GRANTED
        queued = await second.call(Acquire(b, *mutex, 2, ephemeral=True))
        assert queued.status is AcquireStatus.QUEUED
        failure = await first.fail(CreateSession("no-such-node", b"c"))

        held = await scrape(http)
        assert value(held, "tenure_holds") == 1
        assert value(held, "tenure_waiters") == 1
        assert value(held, "tenure_sessions") == 2
        assert value(held, "tenure_semaphores") == 1
        assert value(held, "tenure_connections", protocol="native") == 2
        assert value(held, "tenure_grant_wait_seconds_count") == 1  # the one granted at once
        assert value(held, "tenure_grant_wait_seconds_bucket", le="0.001") == 1

        await asyncio.sleep(0.3)  # the second waits at least this long
        await first.call(Release(a, "job"))
        push = await second.next_push()
        assert isinstance(push, Granted)
        assert push.request_id == 2

        moved = await scrape(http)
        assert value(moved, "tenure_holds") == 1  # the second's now
        assert value(moved, "tenure_waiters") == 0
        assert value(moved, "tenure_grant_wait_seconds_count") == 2
        assert value(moved, "tenure_grant_wait_seconds_bucket", le="0.001") == 1
        assert value(moved, "tenure_grant_wait_seconds_bucket", le="0.25") == 1
        assert value(moved, "tenure_grant_wait_seconds_sum") >= 0.3
        requests = "tenure_requests_total"
        assert value(moved, requests, command="create_node", result="ok") == 1
        assert value(moved, requests, command="create_session", result="ok") == 2
        assert failure.code.name == "NOT_FOUND"
        assert value(moved, requests, command="create_session", result="not_found") == 1
        assert value(moved, requests, command="acquire", result="ok") == 2
        assert value(moved, requests, command="release", result="ok") == 1
        commits = "tenure_wal_commit_seconds_count"
        assert value(moved, commits) > value(held, commits) > value(before, commits)

        await second.call(Release(b, "job"))
        released = await scrape(http)
        assert value(released, "tenure_holds") == 0
        assert value(released, "tenure_semaphores") == 0  # an idle ephemeral one goes


async def test_a_snapshot_is_timed_and_sized(tmp_path: Path, wire: Clients) -> None:
    server, http = serving(tmp_path)
    with server:
        client = await wire.connect(server.port)
        await client.call(CreateNode("snap"))
        session = (await client.call(CreateSession("snap", b"k"))).session_id
        pairs = 5_100  # 10,200 records: a snapshot is due after 10,000 (COMPACT_EVERY)
        for base in range(0, pairs, 300):
            sent = []
            for i in range(base, min(base + 300, pairs)):
                sent.append(client.send(Acquire(session, "m", MAX_COUNT, i + 1, ephemeral=True)))
                sent.append(client.send(Release(session, "m")))
            for request_id in sent:
                assert isinstance(await client.answer(request_id), Reply)
        server.wait_log('"event": "snapshot_written"')
        [line] = [
            json.loads(line)
            for line in server.output().splitlines()
            if '"event": "snapshot_written"' in line
        ]
        scraped = await scrape(http)
    assert value(scraped, "tenure_snapshot_seconds_count") == 1
    assert value(scraped, "tenure_snapshot_seconds_sum") > 0
    assert value(scraped, "tenure_snapshot_size_bytes") == line["bytes"] > 0
    assert line["records"] >= 10_000


async def test_dflockd_requests_are_counted(tmp_path: Path) -> None:
    server, http = serving(tmp_path)
    with server:
        key = "dflockd-job"
        async with AsyncDistributedLock(
            key, servers=[("127.0.0.1", server.port)], connect_timeout_s=WAIT
        ) as held:
            assert held.token is not None
            during = await scrape(http)
            assert value(during, "tenure_connections", protocol="dflockd") == 1
            assert value(during, "tenure_holds") == 1
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        try:
            writer.write(b"zz\nkey\n1\n")  # no such command
            assert await asyncio.wait_for(reader.readline(), WAIT) == b"error\n"
        finally:
            writer.close()
        after = await scrape(http)
        dflockd = "tenure_dflockd_requests_total"
        assert value(after, dflockd, command="l", result="ok") == 1
        assert value(after, dflockd, command="r", result="ok") == 1
        assert value(after, dflockd, command="unknown", result="error") == 1
        assert value(after, "tenure_grant_wait_seconds_count") == 1
        assert value(after, "tenure_holds") == 0


async def test_healthz_and_readyz_while_stopping(tmp_path: Path, wire: Clients) -> None:
    server, http = serving(tmp_path, "--shutdown-grace", "20")
    with server:
        assert await get(http, "/readyz") == (200, "ready\n")
        assert await get(http, "/healthz") == (200, "ok\n")
        client = await wire.connect(server.port)  # it will not hang up: shutdown waits
        server.proc.send_signal(signal.SIGTERM)
        while not isinstance(await client.next_event(), GoingAway):
            pass  # (each wait bounded by WAIT) the server has begun to stop
        status, body = await get(http, "/readyz")
        assert (status, body) == (503, "stopping\n")
        assert await get(http, "/healthz") == (200, "ok\n")
        assert value(await scrape(http), "tenure_ready") == 0
        await client.close()
        assert await asyncio.to_thread(server.proc.wait, WAIT) == 0


def write_long_log(data_dir: Path, pairs: int) -> None:
    """A data directory whose log replays ``2 * pairs`` commands (no snapshot)."""
    journal = Journal(DataDir(data_dir, FsyncMode.OFF), compact_every=10**9)
    engine = journal.open(0.0)

    def logged(command: Command[R]) -> R:
        result = engine.apply(command, 0.0)
        journal.log_command(command, 0.0)
        return result

    logged(CreateNode("replayed"))
    session = logged(CreateSession("replayed", b"k", None, "the log's")).session_id
    for i in range(pairs):
        logged(Acquire(session, f"m{i % 100}", MAX_COUNT, i + 1, ephemeral=True))
        logged(Release(session, f"m{i % 100}"))
    journal.close()


async def test_readyz_is_503_while_the_log_is_replayed(tmp_path: Path) -> None:
    # 100,000 records take about a second to replay; the endpoint answers between
    # steps of 2,000, so the first answer after it listens says "recovering".
    write_long_log(tmp_path / "data", 50_000)
    server, http = serving(tmp_path)
    try:
        server.wait_log('"event": "http_listening"')
        seen: list[tuple[int, str]] = []
        deadline = time.monotonic() + WAIT
        while not seen or seen[-1][0] != 200:
            assert time.monotonic() < deadline, seen
            seen.append(await get(http, "/readyz"))
        assert seen[0] == (503, "recovering\n"), seen
        assert all(answer == (503, "recovering\n") for answer in seen[:-1]), seen
        assert seen[-1] == (200, "ready\n")
        recovered = await scrape(http)
        assert value(recovered, "tenure_sessions") == 1
        assert value(recovered, "tenure_nodes") >= 1
    finally:
        server.kill()


def resolved(*argv: str) -> None:
    """The settings as ``tenure serve`` checks them (a face's port through the registry)."""
    parser = argparse.ArgumentParser()
    add_arguments(parser, settings())
    configure(parser.parse_args(argv), {})


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--http-port", "web"], "--http-port='web': must be an integer"),
        (["--http-port", "70000"], "--http-port='70000': must be at most 65535"),
        (["--http-port", "-1"], "--http-port='-1': must be at least 0"),
        (["--port", "7000", "--http-port", "7000"], "--port is that port too"),
        (["--dflockd-port", "7001", "--http-port", "7001"], "--http-port is that port too"),
    ],
)
def test_a_bad_http_port_is_a_config_error(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        resolved(*argv)
    assert message in str(caught.value)


def test_http_port_without_the_server_extra_says_which_to_install(tmp_path: Path) -> None:
    # aiohttp made unimportable, as in an install without tenure[server].
    program = (
        "import sys; sys.modules['aiohttp'] = None; from tenure.__main__ import main; "
        f"sys.exit(main(['serve', '--http-port', '9', '--data-dir', {str(tmp_path / 'd')!r}]))"
    )
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=WAIT, check=False
    )
    assert result.returncode == 2, result.stderr
    assert "pip install 'tenure[server]'" in result.stderr
    assert "aiohttp is missing" in result.stderr
    assert not (tmp_path / "d").exists()
