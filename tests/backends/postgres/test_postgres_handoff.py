"""postgres:// hand-offs beyond the kit's: a version-5 schema upgraded in place (its
holds, made before ``owners.offer`` existed, hand off), and the table keeping only the
digest of a hand-off's secret."""

from __future__ import annotations

import hashlib
import uuid

import tenure
from tenure.backends import Handoff
from tenure.backends.postgres._ddl import SCHEMA_VERSION
from tests.backends.postgres.database import back_to_version, fetch, schema_of, version_of
from tests.postgres.server import PostgresServer

_VERSION_6_FUNCTIONS = ("offer_hold", "adopt_hold")


async def test_a_version_5_schema_is_upgraded_and_its_holds_hand_off(
    postgres_server: PostgresServer,
) -> None:
    schema = f"t_{uuid.uuid4().hex[:12]}"
    url = postgres_server.url(schema=schema, pool_size="2")
    async with tenure.connect(url) as old_client:
        await old_client.create_node("n")
        holder = await old_client.session("n")
        lock = await holder.mutex("m").lock(data=b"made at version 5")
        # Back to version 5's shape (back_to_version drops owners.offer).
        await back_to_version(
            postgres_server.dsn,
            schema,
            5,
            [f"DROP FUNCTION {schema}.{function}" for function in _VERSION_6_FUNCTIONS],
        )
        async with tenure.connect(url) as new_client:  # first use: migrated
            assert await version_of(postgres_server.dsn, schema) == SCHEMA_VERSION == 6
            adopter = await new_client.session("n")
            # The old client's own functions are replaced: its hold offers as any.
            adopted = await adopter.adopt(await lock.handoff())
            assert adopted.token > lock.token
            assert adopted.data == b"made at version 5"
            await adopted.release()


async def test_the_table_keeps_the_digest_never_the_secret(
    postgres_server: PostgresServer, pg_url: str
) -> None:
    schema = schema_of(pg_url)
    async with tenure.connect(pg_url) as client:
        await client.create_node("n")
        async with client.session("n") as session:
            lock = await session.mutex("m").lock()
            handoff = Handoff.from_str(await lock.handoff())
            [[offer]] = await fetch(
                postgres_server.dsn,
                f"SELECT offer FROM {schema}.owners WHERE name = 'm' AND sid = %s",
                session.id,
            )
            assert bytes(offer) == hashlib.sha256(handoff.secret).digest()
