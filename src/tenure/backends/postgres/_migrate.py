"""Creating and upgrading the schema: on first use, or by ``tenure migrate URL``.

A migration runs in one transaction under a transaction-scoped advisory lock
(``pg_advisory_xact_lock``) keyed by the schema's name, so two clients using a
database for the first time at once do not race: the second waits, then finds
the version in place. That lock is a short DDL guard that ends with the
transaction, not a coordination lock (those are rows, never advisory locks).
Every statement is idempotent (``IF NOT EXISTS``, ``CREATE OR REPLACE``).
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from tenure.backends.postgres._ddl import HELPERS, SCHEMA_VERSION, TABLES
from tenure.backends.postgres._sql_semaphores import SEMAPHORE_FUNCTIONS
from tenure.backends.postgres._sql_sessions import SESSION_FUNCTIONS
from tenure.errors import UnavailableError, UnsupportedError

__all__ = ["ddl", "migrate", "migrate_url", "schema_version"]


def ddl(schema: str) -> str:
    """Every statement of the current version, for ``schema``."""
    quoted = sql.Identifier(schema).as_string(None)
    literal = sql.Literal(schema).as_string(None)
    text = TABLES + HELPERS + SESSION_FUNCTIONS + SEMAPHORE_FUNCTIONS
    return text.replace("@S", quoted).replace("@N", literal)


async def schema_version(conn: psycopg.AsyncConnection[Any], schema: str) -> int | None:
    """The version of ``schema``'s tables, or None if it has none yet."""
    cur = await conn.execute(
        "SELECT to_regclass(format('%%I.meta', %s::text)) IS NOT NULL", [schema]
    )
    row = await cur.fetchone()
    if row is None or not row[0]:
        return None
    query = sql.SQL("SELECT version FROM {}.meta WHERE id = 1").format(sql.Identifier(schema))
    cur = await conn.execute(query)
    row = await cur.fetchone()
    return None if row is None else int(row[0])


async def migrate(conn: psycopg.AsyncConnection[Any], schema: str) -> bool:
    """Create or upgrade ``schema`` to this version; whether anything was done.

    UnsupportedError if the database holds a newer version than this client knows.
    """
    found = await schema_version(conn, schema)
    if found == SCHEMA_VERSION:
        return False
    if found is not None and found > SCHEMA_VERSION:
        raise _newer(schema, found)
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"tenure:{schema}"])
        found = await schema_version(conn, schema)  # another client may have done it
        if found == SCHEMA_VERSION:
            return False
        if found is not None and found > SCHEMA_VERSION:
            raise _newer(schema, found)
        await conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
        await conn.execute(ddl(schema).encode())
        await conn.execute(
            sql.SQL(
                "INSERT INTO {}.meta VALUES (1, %s) ON CONFLICT (id) DO UPDATE SET version = %s"
            ).format(sql.Identifier(schema)),
            [SCHEMA_VERSION, SCHEMA_VERSION],
        )
    return True


def _newer(schema: str, found: int) -> UnsupportedError:
    return UnsupportedError(
        f"schema {schema!r} has version {found}, newer than this tenure's "
        f"{SCHEMA_VERSION}: upgrade tenure"
    )


async def migrate_url(url: str) -> str:
    """Create or upgrade the schema of ``postgres://...`` (``tenure migrate URL``);
    what was done, in a sentence."""
    from tenure.backends.postgres._url import parse_url

    options = parse_url(url, {})
    try:
        conn = await psycopg.AsyncConnection.connect(options.conninfo, autocommit=True)
    except psycopg.Error as error:
        raise UnavailableError(f"cannot connect to PostgreSQL: {error}") from None
    try:
        done = await migrate(conn, options.schema)
    finally:
        await conn.close()
    if done:
        return f"schema {options.schema!r} is now at version {SCHEMA_VERSION}"
    return f"schema {options.schema!r} was already at version {SCHEMA_VERSION}"
