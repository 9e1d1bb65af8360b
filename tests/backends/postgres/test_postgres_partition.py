"""postgres:// under repeated partitions: the server reclaims the connections a
partition cut off, so max_connections never runs out for good (idle_session_timeout,
server keepalives, the pool's check, the LISTEN heartbeat: _reclaim)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import psycopg
import pytest

import tenure
from tenure.backends.postgres._reclaim import check_pooled, configure_reclaim, reclaim_settings
from tenure.backends.postgres._url import parse_url
from tenure.errors import InvalidArgumentError, UnavailableError
from tests.netproxy import NetProxy
from tests.postgres.fixtures import require_postgres
from tests.postgres.server import PostgresServer

#: Connections the tenure role may open: max_connections less the three reserved
#: for superusers (superuser_reserved_connections), i.e. two clients of pool_size 1.
SLOTS = 4
#: Partitions the test goes through (each must leave the server usable again).
PARTITIONS = 3
#: Bound, in seconds, for a fresh client to get in once the cut-off connections
#: went idle (idle_session_timeout is 2 s here; the rest is a shared machine's slack).
RECLAIM_BOUND = 20.0


async def _connect_within(url: str, bound: float) -> tenure.Client:
    """A client of ``url``, retried until ``bound`` seconds have passed."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + bound
    while True:
        try:
            return await tenure.connect(url)
        except UnavailableError:
            if loop.time() >= deadline:
                raise
        await asyncio.sleep(0.2)


async def test_connections_cut_off_by_partitions_are_reclaimed(tmp_path: Path) -> None:
    require_postgres()
    conf = {"max_connections": str(SLOTS + 3), "superuser_reserved_connections": "3"}
    with PostgresServer(tmp_path / "postgres", extra_conf=conf) as server:
        options = {"schema": f"t_{uuid.uuid4().hex[:12]}", "pool_size": "1"}
        reclaim = {"idle_session_timeout": "2", "server_keepalives_idle": "5"}
        direct = server.url(**options, **reclaim, connect_timeout="2")
        async with NetProxy("127.0.0.1", server.port) as proxy:
            behind = direct.replace(f":{server.port}/", f":{proxy.port}/")
            async with tenure.connect(behind) as cut, tenure.connect(direct) as other:
                await other.create_node("n")
                for partition in range(PARTITIONS):
                    await cut.describe_node("n")
                    proxy.stall()  # cut's connections stay open on the server's side
                    # Every slot is taken: the server says so, and tenure names the limit.
                    with pytest.raises(UnavailableError, match="max_connections"):
                        await tenure.connect(direct)
                    fresh = await _connect_within(direct, RECLAIM_BOUND)
                    async with fresh:
                        await fresh.describe_node("n")
                    proxy.resume()
                    # The partitioned client finds its way back (its pool's check and
                    # its LISTEN reconnect replace what the server closed).
                    loop = asyncio.get_running_loop()
                    deadline = loop.time() + RECLAIM_BOUND
                    while True:
                        try:
                            await cut.describe_node("n")
                            break
                        except UnavailableError:
                            assert loop.time() < deadline, f"no way back after {partition}"
                            await asyncio.sleep(0.2)
                    await other.describe_node("n")


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("idle_session_timeout=0.5", "idle_session_timeout must be in"),
        ("idle_session_timeout=100000", "idle_session_timeout must be in"),
        ("idle_session_timeout=soon", "idle_session_timeout must be a number"),
        ("server_keepalives_idle=0", "server_keepalives_idle must be in"),
        ("server_keepalives_idle=7201", "server_keepalives_idle must be in"),
    ],
)
def test_reclaim_options_are_bounded(query: str, message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        parse_url(f"postgres://u@h/d?{query}", {})


def test_reclaim_options_default_and_off() -> None:
    parsed = parse_url("postgres://u@h/d", {})
    assert (parsed.idle_session_timeout, parsed.server_keepalives_idle) == (60.0, 30.0)
    assert parse_url("postgres://u@h/d?idle_session_timeout=0", {}).idle_session_timeout == 0


def test_older_servers_get_keepalives_only() -> None:
    parsed = parse_url("postgres://u@h/d?idle_session_timeout=4&server_keepalives_idle=9", {})
    assert reclaim_settings(parsed, 130000) == {
        "tcp_keepalives_idle": "9",
        "tcp_keepalives_interval": "3",
        "tcp_keepalives_count": "3",
    }
    assert reclaim_settings(parsed, 150004)["idle_session_timeout"] == "4000"


async def test_the_pool_check_passes_a_quiet_connection_and_fails_a_reclaimed_one(
    postgres_server: PostgresServer,
) -> None:
    options = parse_url(postgres_server.url(idle_session_timeout="1"), {})
    conn = await psycopg.AsyncConnection.connect(options.conninfo, autocommit=True)
    try:
        await configure_reclaim(conn, options)
        await check_pooled(conn)  # quiet: handed out without a round trip
        await asyncio.sleep(2.5)  # the server closes it after 1 s idle
        with pytest.raises(psycopg.OperationalError):
            await check_pooled(conn)
    finally:
        await conn.close()
