"""Claims on a real PostgreSQL (schema version 5): what the conformance kit cannot reach.

A claim is its semaphore's record and a row of ``claims`` (its times by the
database's clock); these tests read both, upgrade a live version-4 schema, count
max_claims under claims made at once from several connections, and find a claim
whose end no reap got to.
"""

from __future__ import annotations

import uuid

import pytest

import tenure
from tenure._core.claims import parse_claim
from tenure.backends.postgres._ddl import SCHEMA_VERSION
from tests.backends.postgres.database import back_to_version, fetch, schema_of, version_of
from tests.backends.scenarios import claimed_past_max_claims
from tests.postgres.server import PostgresServer

#: What version 5 added (dropped to make a version-4 schema again).
_VERSION_5_FUNCTIONS = (
    "claim",
    "release_claim",
    "claim_due",
    "end_claim",
    "claim_holds",
    "claim_words",
    "remove_semaphore",
)


async def _now(dsn: str) -> float:
    (row,) = await fetch(dsn, "SELECT extract(epoch FROM clock_timestamp())::float8")
    return float(row[0])


async def test_a_claim_is_its_record_and_a_row_on_the_databases_clock(
    postgres_server: PostgresServer, pg_url: str
) -> None:
    schema, dsn = schema_of(pg_url), postgres_server.dsn
    async with tenure.connect(pg_url) as client:
        await client.create_node("n")
        session = await client.session("n")
        before = await _now(dsn)
        claim = await session.claim("nightly", at_least=60.0, at_most=600.0, data=b"\x00job")
        after = await _now(dsn)
        assert claim is not None
        assert before <= claim.granted_at <= after  # the database's clock
        (row,) = await fetch(
            dsn,
            f"SELECT id, token, extract(epoch FROM least_until)::float8,"
            f" extract(epoch FROM ends_at)::float8, s.data, s.lim"
            f" FROM {schema}.claims JOIN {schema}.semaphores s USING (node, name)",
        )
        claim_id, token, least_until, ends_at, data, limit = row
        assert (claim_id, token, limit) == (claim.id, claim.token, 1)
        assert least_until == pytest.approx(claim.granted_at + 60.0, abs=1e-3)
        assert ends_at == pytest.approx(claim.granted_at + 600.0, abs=1e-3)
        assert parse_claim("nightly", bytes(data)).data == b"\x00job"
        assert await claim.release()
        ((ends_at,),) = await fetch(
            dsn, f"SELECT extract(epoch FROM ends_at)::float8 FROM {schema}.claims"
        )
        assert ends_at == pytest.approx(claim.granted_at + 60.0, abs=1e-3)


async def test_a_claim_whose_end_no_reap_got_to_is_ended_by_the_next_claim(
    postgres_server: PostgresServer, pg_url: str
) -> None:
    schema, dsn = schema_of(pg_url), postgres_server.dsn
    async with tenure.connect(pg_url) as client:
        await client.create_node("n")
        session = await client.session("n")
        first = await session.claim("slot", at_least=0.0, at_most=600.0)
        assert first is not None
        await fetch(
            dsn,
            f"UPDATE {schema}.claims SET ends_at = clock_timestamp() - interval '1 second'"
            f" RETURNING 1",
        )
        second = await session.claim("slot", at_least=0.0, at_most=600.0)
        assert second is not None
        assert second.token > first.token
        assert not await client.release_claim("n", "slot", first.id)


async def test_max_claims_is_counted_exactly_under_claims_made_at_once(
    postgres_server: PostgresServer, pg_url: str
) -> None:
    """Claims of twelve names from three clients at once, on a node of max_claims 5:
    exactly five are made (each transaction counts under the node's claim lock)."""
    async with claimed_past_max_claims(pg_url):
        ((count,),) = await fetch(
            postgres_server.dsn, f"SELECT count(*) FROM {schema_of(pg_url)}.claims"
        )
        assert count == 5


async def test_a_version_4_schema_is_upgraded_and_claims_work(
    postgres_server: PostgresServer,
) -> None:
    schema = f"t_{uuid.uuid4().hex[:12]}"
    url = postgres_server.url(schema=schema, pool_size="2")
    async with tenure.connect(url) as old_client:
        await old_client.create_node("n")
        holder = await old_client.session("n")
        lease = await holder.mutex("m").lock()
        # Back to version 4's shape: what the previous tenure left.
        await back_to_version(
            postgres_server.dsn,
            schema,
            4,
            [f"DROP FUNCTION {schema}.{function}" for function in _VERSION_5_FUNCTIONS]
            + [f"DROP TABLE {schema}.claims", f"DROP TABLE {schema}.claim_locks"],
        )
        async with tenure.connect(url) as new_client:  # first use: migrated
            assert await version_of(postgres_server.dsn, schema) == SCHEMA_VERSION == 6
            session = await new_client.session("n")
            claim = await session.claim("nightly", at_least=0.0, at_most=60.0)
            assert claim is not None
            assert claim.token > lease.token
            assert await new_client.release_claim("n", "nightly", claim.id)
            await lease.release()  # the old session goes on with the new functions


async def test_dropping_the_node_forgets_its_claims(
    postgres_server: PostgresServer, pg_url: str
) -> None:
    schema = schema_of(pg_url)
    async with tenure.connect(pg_url) as client:
        await client.create_node("n")
        async with client.session("n") as session:
            assert await session.claim("job", at_least=60.0, at_most=600.0) is not None
        await client.drop_node("n")
        for table in ("claims", "claim_locks", "semaphores"):
            assert await fetch(postgres_server.dsn, f"SELECT * FROM {schema}.{table}") == []
