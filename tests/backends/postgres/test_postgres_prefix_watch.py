"""Prefix watches on a real PostgreSQL (schema version 5): what the kit cannot reach.

A prefix watch is a row of ``prefix_watches``; ``watched(node, name)`` makes a change
of any name under a registered prefix notify ``s<name>``, and ``watch_prefix()``
locks what a change locks before the watcher lists (module docstring of
``_sql_watches``). Here: a version-4 schema upgraded in place, the registration
waiting for a change in flight, only names under a prefix notified, the rows gone
with their session, and notifications lost while the LISTEN connection was down
found by listing again.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
import pytest

import tenure
from tenure.backends.postgres._ddl import SCHEMA_VERSION
from tenure.backends.postgres._listen import channel
from tenure.backends.postgres._migrate import schema_version
from tenure.testing.conformance.support import eventually, within
from tests.netproxy import NetProxy
from tests.postgres.server import PostgresServer


def _schema(url: str) -> str:
    return url.split("schema=", 1)[1].split("&", 1)[0]


async def _rows(dsn: str, query: str, *args: object) -> list[tuple[Any, ...]]:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        cur = await conn.execute(query, args)
        return await cur.fetchall()


async def _registered(dsn: str, schema: str) -> list[tuple[str, int]]:
    """(prefix, session id) of every registered prefix watch."""
    rows = await _rows(dsn, f"SELECT prefix, sid FROM {schema}.prefix_watches ORDER BY sid")
    return [(str(prefix), int(sid)) for prefix, sid in rows]


async def test_a_version_4_schema_is_upgraded_and_its_changes_notify_prefixes(
    postgres_server: PostgresServer,
) -> None:
    schema = f"t_{uuid.uuid4().hex[:12]}"
    url = postgres_server.url(schema=schema, pool_size="2")
    async with tenure.connect(url) as old_client:
        await old_client.create_node("n")
        writer = await old_client.session("n")
        await writer.semaphore("config/a").create(1, b"1")
    async with await psycopg.AsyncConnection.connect(postgres_server.dsn) as conn:
        # Back to version 4's shape: what the previous tenure left.
        for function in ("watch_prefix", "unwatch_prefix"):
            await conn.execute(f"DROP FUNCTION {schema}.{function}")
        await conn.execute(f"DROP TABLE {schema}.prefix_watches")
        await conn.execute(f"UPDATE {schema}.meta SET version = 4, digest = 'v4'")
        await conn.commit()
        assert await schema_version(conn, schema) == 4
    async with tenure.connect(url) as client:  # first use: migrated
        async with await psycopg.AsyncConnection.connect(postgres_server.dsn) as conn:
            assert await schema_version(conn, schema) == SCHEMA_VERSION == 5
        writer = await client.session("n")
        async with client.cache("n", prefix="config/") as cache:
            changes = cache.changes()
            await writer.semaphore("config/a").update(b"2")
            change = await within(anext(changes))
            assert change.view is not None
            assert change.view.data == b"2"


async def test_the_registration_waits_for_a_change_in_flight_under_its_prefix(
    postgres_server: PostgresServer, pg_url: str
) -> None:
    """A change holding a semaphore's row commits before the registration does, so the
    watcher's listing (after it) reads the change."""
    schema = _schema(pg_url)
    async with tenure.connect(pg_url) as client:
        await client.create_node("n")
        session = await client.session("n")
        await session.semaphore("config/a").create(1, b"1")
        async with await psycopg.AsyncConnection.connect(postgres_server.dsn) as blocker:
            await blocker.execute(
                f"SELECT 1 FROM {schema}.semaphores WHERE name = 'config/a' FOR UPDATE"
            )
            arming = asyncio.ensure_future(
                session._backend_session().watch_prefix(
                    "config/", data=True, owners=False, waiters=False
                )
            )

            async def blocked() -> bool:
                found = await _rows(
                    postgres_server.dsn,
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                    " AND query LIKE %s",
                    "%watch_prefix%",
                )
                return bool(found[0][0])

            await eventually(blocked, "watch_prefix waiting for config/a's row")
            assert not arming.done()
            await blocker.rollback()
        stream = await within(arming)
        await stream.aclose()


async def test_only_names_under_a_registered_prefix_notify(
    postgres_server: PostgresServer, pg_url: str
) -> None:
    """With a prefix watch the only watch of the node, an acquire outside the prefix
    sends no notification; one under it does (NOTIFYs arrive in commit order)."""
    async with tenure.connect(pg_url) as client:
        await client.create_node("n")
        session = await client.session("n")
        stream = await session._backend_session().watch_prefix(
            "config/", data=True, owners=True, waiters=False
        )
        heard: list[str] = []
        async with await psycopg.AsyncConnection.connect(
            postgres_server.dsn, autocommit=True
        ) as listening:
            await listening.execute(f'LISTEN "{channel(_schema(pg_url), "n")}"')
            lock = await session.mutex("other/x").lock()
            await lock.release()
            lock = await session.mutex("config/x").lock()
            async for notice in listening.notifies():
                if notice.payload.startswith("s"):
                    heard.append(notice.payload)
                if notice.payload == "sconfig/x":
                    break
        assert heard == ["sconfig/x"]
        await lock.release()
        await stream.aclose()


@pytest.mark.parametrize("end", ["close", "kill", "resume", "drop", "unwatch"])
async def test_the_rows_go_with_their_session(
    postgres_server: PostgresServer, pg_url: str, end: str
) -> None:
    schema = _schema(pg_url)
    async with tenure.connect(pg_url) as client, tenure.connect(pg_url) as other:
        await client.create_node("n")
        session = await client.session("n")
        keep = await other.session("n")
        stream = await session._backend_session().watch_prefix(
            "a/", data=True, owners=False, waiters=False
        )
        await keep._backend_session().watch_prefix("b/", data=True, owners=False, waiters=False)
        assert await _registered(postgres_server.dsn, schema) == [
            ("a/", session.id),
            ("b/", keep.id),
        ]
        if end == "close":
            await session.close()
        elif end == "kill":
            await other.kill_session("n", session.id)
        elif end == "resume":
            async with tenure.connect(pg_url) as taker:
                await taker.session("n", resume=session.ticket())
        elif end == "unwatch":
            await stream.aclose()
        else:
            await other.drop_node("n", force=True)
            assert await _registered(postgres_server.dsn, schema) == []
            return
        assert await _registered(postgres_server.dsn, schema) == [("b/", keep.id)]


@asynccontextmanager
async def _through_proxy(server: PostgresServer, url: str) -> AsyncIterator[tuple[NetProxy, str]]:
    async with NetProxy("127.0.0.1", server.port) as proxy:
        yield proxy, url.replace(f":{server.port}/", f":{proxy.port}/")


async def test_changes_while_the_listen_connection_was_down_are_listed_again(
    postgres_server: PostgresServer, pg_url: str
) -> None:
    """Notifications sent while the cache's client had no connection are lost; the
    LISTEN connection's return is a reset, and the cache lists the prefix again."""
    async with (
        _through_proxy(postgres_server, pg_url) as (proxy, proxied),
        tenure.connect(pg_url) as writer_client,
        tenure.connect(proxied) as client,
    ):
        await writer_client.create_node("n", recovery_window=30.0)
        writer = await writer_client.session("n")
        await writer.semaphore("config/a").create(1, b"1")
        async with client.cache("n", prefix="config/") as cache:
            changes = cache.changes()
            proxy.refuse()
            proxy.drop()  # every connection of the cache's client, LISTEN's too
            await writer.semaphore("config/a").update(b"2")  # notified to nobody
            await writer.semaphore("config/b").create(1, b"b")
            proxy.refuse(False)
            told: dict[str, bytes | None] = {}
            while len(told) < 2:
                change = await within(anext(changes), "the cache listing again")
                told[change.name] = None if change.view is None else change.view.data
            assert told == {"config/a": b"2", "config/b": b"b"}
