"""What the postgres:// tests that read the database share: a test's schema, its
rows, its version made older (what a previous tenure left, to upgrade), and a wait
for a call blocked on a row lock."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import psycopg

from tenure.backends.postgres._migrate import schema_version


def schema_of(url: str) -> str:
    """The schema a postgres:// URL names (``?schema=``)."""
    return url.split("schema=", 1)[1].split("&", 1)[0]


async def fetch(dsn: str, query: str, *args: object) -> list[tuple[Any, ...]]:
    """The rows of ``query`` (with ``args``), on a connection of its own (autocommit)."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        cur = await conn.execute(query, args)
        return await cur.fetchall()


async def version_of(dsn: str, schema: str) -> int | None:
    """The version ``schema``'s meta row records."""
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        return await schema_version(conn, schema)


async def back_to_version(dsn: str, schema: str, version: int, undo: Iterable[str]) -> None:
    """Make ``schema`` what an older tenure left at ``version``: the statements ``undo``
    (dropping what later versions added), then meta's version, in one transaction.
    Version 6's column (``owners.offer``) is dropped here for every older version, first:
    the upgrade adds it after the columns ``undo`` drops, as on a database that never had
    it (INSERTs name no columns)."""
    later = [f"ALTER TABLE {schema}.owners DROP COLUMN IF EXISTS offer"] if version < 6 else []
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        for statement in [*later, *undo]:
            await conn.execute(statement)
        await conn.execute(f"UPDATE {schema}.meta SET version = {version}, digest = 'v{version}'")
        await conn.commit()
        assert await schema_version(conn, schema) == version


async def waits_for_a_lock(dsn: str, function: str) -> bool:
    """Whether a call of the SQL function ``function`` waits for a lock now."""
    found = await fetch(
        dsn,
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE %s",
        f"%{function}%",
    )
    return bool(found[0][0])
