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

import psycopg
import pytest

import tenure
from tenure.backends._base import prefix_watch
from tenure.backends.postgres._ddl import SCHEMA_VERSION
from tenure.backends.postgres._listen import channel
from tenure.errors import LimitExceededError
from tenure.testing.conformance.support import eventually, within
from tests.backends.postgres.database import (
    back_to_version,
    fetch,
    schema_of,
    version_of,
    waits_for_a_lock,
)
from tests.backends.scenarios import check_a_cut_off_cache_lists_again
from tests.netproxy import NetProxy
from tests.postgres.server import PostgresServer


async def _registered(dsn: str, schema: str) -> list[tuple[str, int]]:
    """(prefix, session id) of every registered prefix watch."""
    rows = await fetch(dsn, f"SELECT prefix, sid FROM {schema}.prefix_watches ORDER BY sid")
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
    # Back to version 4's shape: what the previous tenure left.
    await back_to_version(
        postgres_server.dsn,
        schema,
        4,
        [f"DROP FUNCTION {schema}.{function}" for function in ("watch_prefix", "unwatch_prefix")]
        + [f"DROP TABLE {schema}.prefix_watches"],
    )
    async with tenure.connect(url) as client:  # first use: migrated
        assert await version_of(postgres_server.dsn, schema) == SCHEMA_VERSION == 6
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
    schema = schema_of(pg_url)
    async with tenure.connect(pg_url) as client:
        await client.create_node("n")
        session = await client.session("n")
        await session.semaphore("config/a").create(1, b"1")
        async with await psycopg.AsyncConnection.connect(postgres_server.dsn) as blocker:
            await blocker.execute(
                f"SELECT 1 FROM {schema}.semaphores WHERE name = 'config/a' FOR UPDATE"
            )
            arming = asyncio.ensure_future(
                prefix_watch(session._backend_session()).watch_prefix(
                    "config/", data=True, owners=False, waiters=False
                )
            )

            await eventually(
                lambda: waits_for_a_lock(postgres_server.dsn, "watch_prefix"),
                "watch_prefix waiting for config/a's row",
            )
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
        stream = await prefix_watch(session._backend_session()).watch_prefix(
            "config/", data=True, owners=True, waiters=False
        )
        heard: list[str] = []
        async with await psycopg.AsyncConnection.connect(
            postgres_server.dsn, autocommit=True
        ) as listening:
            await listening.execute(f'LISTEN "{channel(schema_of(pg_url), "n")}"')
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


async def test_a_node_arms_no_more_prefix_watches_than_its_bound_whoever_asks(
    postgres_server: PostgresServer, pg_url: str
) -> None:
    # The engine's max_prefix_watches_per_node, in the database: every change of the
    # node compares its name with each of the node's prefix watches (watched()), so
    # their count is bounded, whichever sessions and clients armed them.
    schema, bound = schema_of(pg_url), f"{pg_url}&max_prefix_watches_per_node=3"
    async with tenure.connect(bound) as client, tenure.connect(bound) as other:
        await client.create_node("n")
        sessions = [await client.session("n"), await other.session("n")]
        backends = [prefix_watch(session._backend_session()) for session in sessions]
        streams = [
            await backends[i % 2].watch_prefix(f"p{i}/", data=True, owners=False, waiters=False)
            for i in range(3)
        ]
        for backend in backends:  # neither session is near its own limit (1,000)
            with pytest.raises(
                LimitExceededError, match=r"max_prefix_watches_per_node \(3\) reached on node 'n'"
            ):
                await backend.watch_prefix("q/", data=True, owners=False, waiters=False)
        assert len(await _registered(postgres_server.dsn, schema)) == 3  # none left behind
        await streams[0].aclose()  # one closed: room for one more
        await backends[1].watch_prefix("q/", data=True, owners=False, waiters=False)
        assert len(await _registered(postgres_server.dsn, schema)) == 3
        lock = await sessions[0].mutex("q/x").lock()  # the node goes on serving
        await lock.release()


@pytest.mark.parametrize("end", ["close", "kill", "resume", "drop", "unwatch"])
async def test_the_rows_go_with_their_session(
    postgres_server: PostgresServer, pg_url: str, end: str
) -> None:
    schema = schema_of(pg_url)
    async with tenure.connect(pg_url) as client, tenure.connect(pg_url) as other:
        await client.create_node("n")
        session = await client.session("n")
        keep = await other.session("n")
        stream = await prefix_watch(session._backend_session()).watch_prefix(
            "a/", data=True, owners=False, waiters=False
        )
        await prefix_watch(keep._backend_session()).watch_prefix(
            "b/", data=True, owners=False, waiters=False
        )
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
        await check_a_cut_off_cache_lists_again(writer_client, client, "n", proxy)
