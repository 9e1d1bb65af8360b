"""postgres:// with no row every grant shares (schema version 3, issue 26).

Tokens come from a sequence (the proof of their order is in docs/guarantees.md);
a change notifies watchers only of a watched semaphore; far from max_semaphores a
creation takes the node's row shared. What each of those must still keep:
tokens above every token of an upgraded schema's counter, every watched change
heard, and the limit exact under concurrent creations.
"""

from __future__ import annotations

import asyncio
import uuid

import psycopg

import tenure
from tenure.backends.postgres import PgBackend
from tenure.backends.postgres._ddl import SCHEMA_VERSION
from tenure.backends.postgres._listen import channel
from tenure.backends.postgres._migrate import schema_version
from tenure.errors import LimitExceededError
from tests.backends.postgres.database import back_to_version
from tests.postgres.server import PostgresServer


async def test_a_version_2_schema_hands_its_counter_over_to_the_sequence(
    postgres_server: PostgresServer,
) -> None:
    """The upgrade drops the counter row; tokens go on above its last value, and a
    session that lived through the upgrade keeps its grant and token."""
    schema = f"t_{uuid.uuid4().hex[:12]}"
    url = postgres_server.url(schema=schema, pool_size="2")
    async with tenure.connect(url) as old_client:
        await old_client.create_node("n")
        session = await old_client.session("n", recovery_window=20)
        lease = await session.mutex("m").lock()
        # What version 2 left: a counter row, already past every token granted.
        last = lease.token + 1000
        await back_to_version(
            postgres_server.dsn,
            schema,
            2,
            [
                f"CREATE TABLE {schema}.counter (id int PRIMARY KEY CHECK (id = 1),"
                " last_token bigint NOT NULL)",
                f"INSERT INTO {schema}.counter VALUES (1, {last:d})",
                f"DROP TABLE {schema}.watches",
            ],
        )
        async with tenure.connect(url) as new_client:  # first use: migrated
            fresh = await (await new_client.session("n")).mutex("other").lock()
            assert fresh.token > last
            async with await psycopg.AsyncConnection.connect(postgres_server.dsn) as conn:
                assert await schema_version(conn, schema) == SCHEMA_VERSION
                cur = await conn.execute("SELECT to_regclass(%s)", [f"{schema}.counter"])
                assert await cur.fetchone() == (None,)
            (owner,) = (await session.semaphore("m").describe(owners=True)).owners
            assert owner.token == lease.token
            await lease.release()
            again = await session.mutex("m").lock()
            assert again.token > fresh.token


async def test_only_a_watched_semaphore_notifies_its_changes(pg_url: str) -> None:
    """Grants and releases of an unwatched semaphore send nothing on the node's
    channel; a watched one's do, and closing the watch removes its registration."""
    schema = pg_url.rsplit("schema=", 1)[1].split("&", 1)[0]
    async with tenure.connect(pg_url) as client:
        await client.create_node("n")
        session = await client.session("n")
        backend = client.backend
        assert isinstance(backend, PgBackend)
        options = backend.options
        listener = await psycopg.AsyncConnection.connect(options.conninfo, autocommit=True)
        try:
            await listener.execute(f"LISTEN {channel(schema, 'n')}")
            watch = session.semaphore("loud").watch()
            assert not (await anext(watch)).exists  # armed: registered, then read
            await (await session.mutex("quiet").lock()).release()
            await (await session.mutex("loud").lock()).release()
            # Notifications come in commit order: once the watched one's arrived,
            # any of the unwatched one's would have arrived before it.
            heard: list[str] = []
            async for note in listener.notifies(timeout=10):
                heard.append(note.payload)
                if note.payload == "sloud":
                    break
            assert "sloud" in heard
            assert "squiet" not in heard
            async with await psycopg.AsyncConnection.connect(options.conninfo) as conn:
                cur = await conn.execute(f"SELECT name FROM {schema}.watches")
                assert await cur.fetchall() == [("loud",)]
                await watch.aclose()
                await conn.commit()
                cur = await conn.execute(f"SELECT count(*) FROM {schema}.watches")
                assert await cur.fetchone() == (0,)
        finally:
            await listener.close()


async def test_max_semaphores_holds_for_concurrent_creations_far_from_it(
    pg_url: str, postgres_server: PostgresServer
) -> None:
    """A limit above the server's max_connections: creations start on the shared
    lock, and those near the limit take it exclusively; never one too many."""
    async with await psycopg.AsyncConnection.connect(postgres_server.dsn) as conn:
        cur = await conn.execute("SELECT current_setting('max_connections')::int")
        row = await cur.fetchone()
        assert row is not None
    limit = row[0] + 3
    async with tenure.connect(pg_url) as one, tenure.connect(pg_url) as two:
        await one.create_node("n", max_semaphores=limit)
        sessions = [await one.session("n"), await two.session("n")]
        results = await asyncio.gather(
            *(sessions[i % 2].mutex(f"m{i}").lock() for i in range(limit + 5)),
            return_exceptions=True,
        )
        refused = [r for r in results if isinstance(r, LimitExceededError)]
        assert len(refused) == 5, [r for r in results if isinstance(r, BaseException)][:3]
        assert (await one.describe_node("n")).semaphores == limit
