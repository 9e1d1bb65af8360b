"""Creating and upgrading the schema: on first use, or by ``tenure migrate URL``.

A migration runs in one transaction under a transaction-scoped advisory lock
(``pg_advisory_xact_lock``) keyed by the schema's name, so two clients using a
database for the first time at once do not race: the second waits, then finds
the version in place. That lock is a short DDL guard that ends with the
transaction, not a coordination lock (those are rows, never advisory locks).
Every statement is idempotent (``IF NOT EXISTS``, ``CREATE OR REPLACE``).

A migration is not bounded by ``request_timeout``, which is the pooled connections'
``statement_timeout``: it is DDL run once, which waits for another client's
migration and, on an upgrade, for the grants holding a table, and which a loaded
server takes longer over than over a call (a 0.5 s bound once cancelled a first
use's ``CREATE`` under load). What the database refuses is one of tenure's errors:
``PermissionDeniedError`` where the role may not create, ``UnavailableError`` else.
"""

from __future__ import annotations

import hashlib
from typing import Any

import psycopg
from psycopg import sql

from tenure.backends.postgres._ddl import HELPERS, SCHEMA_VERSION, TABLES
from tenure.backends.postgres._sql_claims import CLAIM_FUNCTIONS, CLAIM_TABLES
from tenure.backends.postgres._sql_handoffs import HANDOFF_FUNCTIONS, HANDOFF_TABLES
from tenure.backends.postgres._sql_limiters import LIMITER_FUNCTIONS
from tenure.backends.postgres._sql_listing import LISTING_FUNCTIONS
from tenure.backends.postgres._sql_queues import QUEUE_FUNCTIONS
from tenure.backends.postgres._sql_semaphores import SEMAPHORE_FUNCTIONS
from tenure.backends.postgres._sql_sessions import SESSION_FUNCTIONS
from tenure.backends.postgres._sql_sets import SET_FUNCTIONS
from tenure.backends.postgres._sql_watches import WATCH_FUNCTIONS
from tenure.errors import PermissionDeniedError, UnavailableError, UnsupportedError

__all__ = ["ddl", "digest", "migrate", "migrate_url", "schema_version"]


def ddl(schema: str) -> str:
    """Every statement of the current version, for ``schema``."""
    quoted = sql.Identifier(schema).as_string(None)
    literal = sql.Literal(schema).as_string(None)
    text = (
        TABLES
        + CLAIM_TABLES
        + HANDOFF_TABLES
        + HELPERS
        + QUEUE_FUNCTIONS
        + SESSION_FUNCTIONS
        + WATCH_FUNCTIONS
        + SEMAPHORE_FUNCTIONS
        + SET_FUNCTIONS
        + LIMITER_FUNCTIONS
        + LISTING_FUNCTIONS
        + CLAIM_FUNCTIONS
        + HANDOFF_FUNCTIONS
    )
    return text.replace("@S", quoted).replace("@N", literal)


def digest(schema: str) -> str:
    """A hash of every statement of this build: functions fixed within a version
    differ in it, and are replaced on first use too."""
    return hashlib.sha256(ddl(schema).encode()).hexdigest()


async def schema_version(conn: psycopg.AsyncConnection[Any], schema: str) -> int | None:
    """The version of ``schema``'s tables, or None if it has none yet."""
    found = await _stamp(conn, schema)
    return None if found is None else found[0]


async def _stamp(conn: psycopg.AsyncConnection[Any], schema: str) -> tuple[int, str] | None:
    cur = await conn.execute(
        "SELECT to_regclass(format('%%I.meta', %s::text)) IS NOT NULL", [schema]
    )
    row = await cur.fetchone()
    if row is None or not row[0]:
        return None
    # As jsonb: a meta table made before it kept a digest has no such column.
    query = sql.SQL("SELECT to_jsonb(m) FROM {}.meta m WHERE id = 1").format(sql.Identifier(schema))
    cur = await conn.execute(query)
    row = await cur.fetchone()
    if row is None:
        return None
    return (int(row[0]["version"]), str(row[0].get("digest") or ""))


async def migrate(conn: psycopg.AsyncConnection[Any], schema: str) -> bool:
    """Create or upgrade ``schema`` to this build; whether anything was done.

    UnsupportedError if the database holds a newer version than this client knows.
    """
    try:
        return await _migrate(conn, schema)
    except psycopg.errors.InsufficientPrivilege as error:
        raise PermissionDeniedError(
            f"the role may not create or upgrade schema {schema!r} (run `tenure migrate "
            f"URL` as one that may): {error}"
        ) from None
    except psycopg.Error as error:
        raise UnavailableError(f"creating or upgrading schema {schema!r} failed: {error}") from None


async def _migrate(conn: psycopg.AsyncConnection[Any], schema: str) -> bool:
    wanted = (SCHEMA_VERSION, digest(schema))
    found = await _stamp(conn, schema)
    if found == wanted:
        return False
    if found is not None and found[0] > SCHEMA_VERSION:
        raise _newer(schema, found[0])
    async with conn.transaction():
        await conn.execute("SET LOCAL statement_timeout = 0")  # (the module docstring)
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"tenure:{schema}"])
        found = await _stamp(conn, schema)  # another client may have done it
        if found == wanted:
            return False
        if found is not None and found[0] > SCHEMA_VERSION:
            raise _newer(schema, found[0])
        await conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
        await conn.execute(ddl(schema).encode())
        await conn.execute(
            sql.SQL(
                "INSERT INTO {}.meta VALUES (1, %s, %s) "
                "ON CONFLICT (id) DO UPDATE SET version = %s, digest = %s"
            ).format(sql.Identifier(schema)),
            [SCHEMA_VERSION, wanted[1], SCHEMA_VERSION, wanted[1]],
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
