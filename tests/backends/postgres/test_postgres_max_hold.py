"""max_hold on postgres:// (issue 50): schema version 6's columns, added to a version-5
schema in place; the bound kept by the database's clock (the kit's test_max_hold)."""

from __future__ import annotations

import asyncio
import uuid

import pytest

import tenure
from tenure.backends.postgres._ddl import SCHEMA_VERSION
from tenure.errors import LeaseLostError
from tests.backends.postgres.database import back_to_version, fetch, version_of
from tests.postgres.server import PostgresServer

pytestmark = pytest.mark.timeout(60)


async def test_a_version_5_schema_is_upgraded_and_its_grants_are_bounded(
    postgres_server: PostgresServer,
) -> None:
    schema = f"t_{uuid.uuid4().hex[:12]}"
    url = postgres_server.url(schema=schema, pool_size="2")
    async with tenure.connect(url) as old_client:
        await old_client.create_node("n")
        holder = await old_client.session("n")
        lease = await holder.mutex("old").lock()
        # Back to version 5's shape: its acquire of ten arguments, no max_hold columns.
        await back_to_version(
            postgres_server.dsn,
            schema,
            5,
            [
                f"DROP FUNCTION {schema}.acquire",
                # (a stand-in for version 5's acquire of ten arguments, which the
                # migration must drop: a call of ten would reach it)
                f"CREATE FUNCTION {schema}.acquire(bigint, bytea, int, text, bigint, numeric, "
                "bytea, float8, boolean, bigint) RETURNS jsonb LANGUAGE sql "
                "AS $$ SELECT '{}'::jsonb $$",
                f"DROP FUNCTION {schema}.grant_end",
                f"ALTER TABLE {schema}.owners DROP COLUMN ends_at",
                f"ALTER TABLE {schema}.waiters DROP COLUMN max_hold",
            ],
        )
        async with tenure.connect(url) as new_client:  # first use: migrated
            assert await version_of(postgres_server.dsn, schema) == SCHEMA_VERSION == 6
            session = await new_client.session("n")
            bounded = await session.mutex("new", max_hold=1.0).lock()
            rows = await fetch(
                postgres_server.dsn,
                f"SELECT name, ends_at IS NOT NULL, lease_deadline = ends_at FROM {schema}.owners "
                "ORDER BY name",
            )
            assert [tuple(row) for row in rows] == [("new", True, True), ("old", False, None)]
            async with asyncio.timeout(30):
                assert isinstance(await bounded.lost, LeaseLostError)
            assert lease.held  # a grant of before has no bound
            await lease.release()  # the old session goes on with the new functions
            functions = await fetch(
                postgres_server.dsn,
                "SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
                "WHERE n.nspname = %s AND p.proname = 'acquire'",
                schema,
            )
            assert functions[0][0] == 1  # the ten-argument acquire is gone
