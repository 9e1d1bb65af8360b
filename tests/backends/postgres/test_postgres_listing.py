"""Listing, identity and kill_session on a real PostgreSQL: what the kit cannot reach.

Pages come from one function each, sorted ``COLLATE "C"`` whatever the database's
collation; times are the database's ``clock_timestamp()``; a version-1 schema is
upgraded in place on first use (columns added, NULL where a time is not known);
kill_session ends a session as its expiry would, also one whose client is cut off.
"""

from __future__ import annotations

import uuid
from urllib.parse import urlsplit

import pytest

import tenure
from tenure._core.values import ClientIdentity
from tenure.backends.postgres._ddl import SCHEMA_VERSION
from tenure.errors import PermissionDeniedError
from tests.backends.postgres.database import back_to_version, version_of
from tests.backends.store_listing import (
    check_identity_and_times,
    check_kill_partitioned,
    check_kill_session,
    check_nodes_in_order,
    check_semaphores_by_prefix,
)
from tests.netproxy import NetProxy
from tests.postgres.server import DATABASE, PostgresServer


async def test_nodes_are_listed_in_code_point_order(pg_url: str) -> None:
    await check_nodes_in_order(pg_url)


async def test_semaphores_page_by_prefix_with_counts(pg_url: str) -> None:
    await check_semaphores_by_prefix(pg_url)


async def test_owners_waiters_and_sessions_carry_identity_and_database_time(pg_url: str) -> None:
    await check_identity_and_times(pg_url)


async def test_kill_session_ends_it_as_expiry_with_lock_delay(pg_url: str) -> None:
    await check_kill_session(pg_url, lock_delay=0.5)


async def test_kill_session_of_a_partitioned_client(
    postgres_server: PostgresServer, pg_url: str
) -> None:
    async with NetProxy("127.0.0.1", postgres_server.port) as proxy:
        through = pg_url.replace(f":{postgres_server.port}/", f":{proxy.port}/")
        await check_kill_partitioned(proxy, through, pg_url)


#: What version 1 did not have (the upgrade adds it back, empty).
_VERSION_2_COLUMNS = {
    "sessions": ("host", "pid", "client_name", "created_at"),
    "owners": ("granted_at",),
    "waiters": ("queued_at",),
}


async def test_a_version_1_schema_is_upgraded_in_place(postgres_server: PostgresServer) -> None:
    """Rows of version 1 (no identity, no times) read as defaults after the upgrade; a
    session that lived through it carries on."""
    schema = f"t_{uuid.uuid4().hex[:12]}"
    url = postgres_server.url(schema=schema, pool_size="2")
    async with tenure.connect(url) as old_client:
        await old_client.create_node("n")
        session = await old_client.session("n", description="from v1", recovery_window=20)
        lease = await session.mutex("m").lock()
        waiting = await old_client.session("n")
        # Back to version 1's shape (its functions of these signatures never read the
        # new columns): what a database made by the previous tenure holds.
        await back_to_version(
            postgres_server.dsn,
            schema,
            1,
            [
                f"ALTER TABLE {schema}.{table} DROP COLUMN {column}"
                for table, columns in _VERSION_2_COLUMNS.items()
                for column in columns
            ],
        )
        async with tenure.connect(url) as new_client:  # first use: migrated
            backend = new_client.backend
            (listed,) = await backend.list_semaphores("n", prefix="", after="", limit=9)
            assert (listed.name, listed.owners) == ("m", 1)
            sessions = await backend.list_sessions("n", after=0, limit=9)
            old = next(s for s in sessions if s.session_id == session.id)
            assert (old.description, old.identity, old.created_at) == (
                "from v1",
                ClientIdentity(),
                None,
            )
            (owner,) = (
                await (await new_client.session("n")).semaphore("m").describe(owners=True)
            ).owners
            assert (owner.token, owner.since, owner.description) == (lease.token, None, "from v1")
            await lease.release()  # the session of before goes on with the new functions
            again = await waiting.mutex("m").lock(timeout=5)
            (owner,) = (await waiting.semaphore("m").describe(owners=True)).owners
            assert owner.token == again.token
            assert owner.since is not None
        assert await version_of(postgres_server.dsn, schema) == SCHEMA_VERSION


async def test_a_read_only_role_lists_sessions_but_cannot_kill_them(
    postgres_server: PostgresServer, pg_url: str
) -> None:
    role = f"ro_{uuid.uuid4().hex[:12]}"
    schema = pg_url.split("schema=", 1)[1].split("&", 1)[0]
    async with tenure.connect(pg_url) as client:  # makes the schema
        await client.create_node("n")
        victim = await client.session("n")
        postgres_server.psql(
            f"CREATE ROLE {role} LOGIN PASSWORD 'read-only'",
            f"GRANT USAGE ON SCHEMA {schema} TO {role}",
            f"GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {role}",
            db=DATABASE,
        )
        try:
            auth = urlsplit(pg_url).netloc.split("@", 1)[0]
            async with tenure.connect(pg_url.replace(auth, f"{role}:read-only", 1)) as reader:
                listed = await reader.backend.list_sessions("n", after=0, limit=9)
                assert [s.session_id for s in listed] == [victim.id]
                with pytest.raises(PermissionDeniedError):
                    await reader.backend.kill_session("n", victim.id)
            assert victim.lost_reason is None
            (still,) = await client.backend.list_sessions("n", after=0, limit=9)
            assert still.session_id == victim.id
        finally:
            postgres_server.psql(f"DROP OWNED BY {role}", f"DROP ROLE {role}", db=DATABASE)
