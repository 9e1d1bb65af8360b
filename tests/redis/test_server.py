"""The Redis harness itself, against real redis-server: serves, survives kill -9, stops."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import redis

from tests.daemons import process_tree
from tests.redis.fixtures import require_redis
from tests.redis.server import RedisServer, live_pids, ping


def is_redis(pid: int) -> bool:
    """Whether ``pid`` is a live redis-server now (not a zombie, not someone else)."""
    try:
        return b"redis-server" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def test_the_shared_server_serves(redis_server: RedisServer) -> None:
    assert redis_server.url(5) == f"redis://127.0.0.1:{redis_server.port}/5"
    client = redis.Redis.from_url(redis_server.url(5))
    try:
        client.set("harness:shared", b"one")
        assert client.get("harness:shared") == b"one"
        assert client.config_get("appendfsync") == {"appendfsync": "always"}
        assert client.config_get("appendonly") == {"appendonly": "yes"}
        assert client.config_get("bind") == {"bind": "127.0.0.1"}
    finally:
        client.delete("harness:shared")
        client.close()


def test_an_acknowledged_write_survives_kill_9_and_restart(redis_fresh: RedisServer) -> None:
    server = redis_fresh
    pid, port = server.pid, server.port
    assert pid is not None
    assert is_redis(pid)
    client = redis.Redis.from_url(server.url(2))
    try:
        assert client.set("durable", b"acknowledged")
        assert client.incr("counter", 41) == 41
    finally:
        client.close()
    server.kill()
    assert not server.running
    assert not is_redis(pid)
    assert not ping(port)
    server.start()
    assert server.port == port
    assert server.pid != pid
    client = redis.Redis.from_url(server.url(2))
    try:
        assert client.get("durable") == b"acknowledged"
        assert client.incr("counter") == 42
    finally:
        client.close()


async def test_stop_leaves_no_process(tmp_path: Path, redis_fresh: RedisServer) -> None:
    server = redis_fresh
    pid = server.pid
    assert pid is not None
    assert pid in live_pids()
    await server.astop()
    assert not server.running
    assert server.pid is None
    assert pid not in live_pids()
    assert not is_redis(pid)
    assert process_tree(pid) == set()
    assert not ping(server.port)
    assert "ready to accept connections" in server.output().lower()
    await server.astart()  # an orderly stop keeps the data too
    assert ping(server.port)


def test_a_bad_appendfsync_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="appendfsync"):
        RedisServer(tmp_path, appendfsync="sometimes")


def test_extra_configuration_lines_reach_the_server(tmp_path: Path) -> None:
    require_redis()
    with RedisServer(tmp_path / "r", appendfsync="no", extra=["maxmemory 8mb"]) as server:
        client = redis.Redis.from_url(server.url())
        try:
            assert client.config_get("maxmemory") == {"maxmemory": str(8 * 1024 * 1024)}
            assert client.config_get("appendfsync") == {"appendfsync": "no"}
        finally:
            client.close()
    assert server.pid is None
    assert os.path.isdir(tmp_path / "r" / "data")
