"""The PostgreSQL guard: a token check in the same transaction as the write it protects.

One row per resource in a table (``tenure_fence`` by default) holds the highest
token accepted. The check is one upsert that raises the row to the writer's token
only when it is not lower::

    INSERT INTO tenure_fence AS f (resource, token) VALUES ($1, $2)
    ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token
    WHERE f.token <= EXCLUDED.token RETURNING 1

The upsert locks the row (also when its WHERE fails) until the transaction ends,
so a newer holder's check waits for this transaction's commit or rollback, then
sees its token: the check and the caller's write commit together, or neither does.
Tokens are ``numeric(20, 0)``: bigint stops at 2**63-1, tokens at 2**64-1.

psycopg is imported only when a guard touches a connection: this module imports
without it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any, Final

from tenure.errors import FencedError, InvalidArgumentError
from tenure.fencing._token import (
    MAX_RESOURCE_BYTES,
    MAX_TOKEN,
    check_limit,
    check_resource,
    check_token,
)

if TYPE_CHECKING:
    from psycopg import AsyncConnection, Connection

__all__ = ["PostgresFence"]

#: PostgreSQL's longest identifier (NAMEDATALEN - 1); a longer one is cut, silently.
_MAX_IDENTIFIER_BYTES: Final = 63
#: The largest ``max_resource_bytes``: a btree index entry holds at most ~2700 bytes.
_MAX_RESOURCE_LIMIT: Final = 2048


def _identifier(value: object, what: str) -> str:
    """``value`` quoted as an SQL identifier, after checking it is one."""
    if not isinstance(value, str) or not value or "\0" in value:
        raise InvalidArgumentError(f"{what} must be a non-empty str without NUL, got {value!r}")
    if len(value.encode("utf-8", "replace")) > _MAX_IDENTIFIER_BYTES:
        raise InvalidArgumentError(
            f"{what} must be at most {_MAX_IDENTIFIER_BYTES} bytes (PostgreSQL would cut it),"
            f" got {value!r}"
        )
    return '"' + value.replace('"', '""') + '"'


class PostgresFence:
    """Checks fencing tokens in PostgreSQL, inside the transaction of the protected write.

    ::

        fence = PostgresFence()
        with fence.transaction(conn, "invoices", lock.token):  # FencedError if stale
            conn.execute("UPDATE invoices SET ... WHERE ...")

    or, within a transaction of your own, ``fence.check(conn, "invoices", token)``
    before (or after) the write; ``acheck``/``atransaction`` take an
    ``AsyncConnection``. A token equal to the highest seen passes (the holder writes
    again); a lower one raises :class:`~tenure.errors.FencedError` and the
    transaction must roll back (``transaction()`` does it).

    ``table`` (in ``schema`` when given, else on the ``search_path``) is created
    when missing, unless ``create=False``; its creation commits with the first
    check's transaction. Run the check in READ COMMITTED (PostgreSQL's default): in
    REPEATABLE READ or SERIALIZABLE a concurrent check fails with a serialization
    error instead of waiting (still safe; you retry).
    """

    def __init__(
        self,
        *,
        table: str = "tenure_fence",
        schema: str | None = None,
        create: bool = True,
        max_resource_bytes: int = MAX_RESOURCE_BYTES,
    ) -> None:
        """See the class; ``max_resource_bytes`` bounds a resource's name (UTF-8)."""
        quoted = _identifier(table, "table")
        self.table = table if schema is None else f"{schema}.{table}"
        self._name = quoted if schema is None else f"{_identifier(schema, 'schema')}.{quoted}"
        self.create = create
        self.max_resource_bytes = check_limit(
            max_resource_bytes, "max_resource_bytes", 1, _MAX_RESOURCE_LIMIT
        )
        # Databases (host, port, name) where the table was found: not looked for again
        # until a check finds it gone (_forget_on_undefined_table).
        self._seen: set[tuple[str, int, str]] = set()
        self._create_sql = (
            f"CREATE TABLE IF NOT EXISTS {self._name} ("
            " resource text PRIMARY KEY,"
            f" token numeric(20, 0) NOT NULL CHECK (token >= 1 AND token <= {MAX_TOKEN}))"
        )
        self._check_sql = (
            f"INSERT INTO {self._name} AS f (resource, token) VALUES (%s, %s::numeric)"
            " ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token"
            " WHERE f.token <= EXCLUDED.token RETURNING 1"
        )
        self._highest_sql = f"SELECT token FROM {self._name} WHERE resource = %s"

    def __repr__(self) -> str:
        return f"PostgresFence(table={self.table!r})"

    def _arguments(self, resource: object, token: object) -> tuple[str, int]:
        return check_resource(resource, self.max_resource_bytes), check_token(token)

    @staticmethod
    def _where(conn: Connection[Any] | AsyncConnection[Any]) -> tuple[str, int, str]:
        info = conn.info
        return (info.host, info.port, info.dbname)

    @staticmethod
    def _refuse_autocommit(conn: Connection[Any] | AsyncConnection[Any]) -> None:
        from psycopg.pq import TransactionStatus

        if conn.autocommit and conn.info.transaction_status == TransactionStatus.IDLE:
            # Alone in its own transaction, the check's row lock would end before
            # the write: a newer holder could write in between. Refuse, loudly.
            raise InvalidArgumentError(
                "the fencing check must run in the transaction of the write it guards: the"
                " connection is in autocommit mode and outside a transaction (use"
                " fence.transaction(conn, ...) or conn.transaction())"
            )

    # -- synchronous ------------------------------------------------------------------

    def check(self, conn: Connection[Any], resource: str, token: int) -> None:
        """Raise the resource's highest token to ``token``, or raise FencedError if lower.

        Runs in ``conn``'s current transaction (opening one when the connection is
        not in autocommit mode); the row stays locked until that transaction ends.
        """
        resource, token = self._arguments(resource, token)
        self._refuse_autocommit(conn)
        self._ensure_table(conn)
        with self._forget_on_undefined_table(conn):
            row = conn.execute(self._check_sql, (resource, token)).fetchone()
        if row is None:
            highest = conn.execute(self._highest_sql, (resource,)).fetchone()
            raise FencedError(resource, token, int(highest[0]) if highest else 0)

    @contextmanager
    def _forget_on_undefined_table(
        self, conn: Connection[Any] | AsyncConnection[Any]
    ) -> Iterator[None]:
        """A table seen (in a transaction that then rolled back, or dropped) is looked for again."""
        from psycopg import errors

        try:
            yield
        except errors.UndefinedTable:
            self._seen.discard(self._where(conn))
            raise

    @contextmanager
    def transaction(self, conn: Connection[Any], resource: str, token: int) -> Iterator[None]:
        """A transaction (or savepoint) that starts with :meth:`check`; commits at exit.

        A FencedError, or any exception of the block, rolls it back.
        """
        with conn.transaction():
            self.check(conn, resource, token)
            yield

    def highest(self, conn: Connection[Any], resource: str) -> int | None:
        """The highest token ``resource`` has accepted, None if none yet (or no table)."""
        resource = check_resource(resource, self.max_resource_bytes)
        exists = conn.execute("SELECT to_regclass(%s)", (self._name,)).fetchone()
        if exists is None or exists[0] is None:
            return None
        row = conn.execute(self._highest_sql, (resource,)).fetchone()
        return None if row is None else int(row[0])

    def _ensure_table(self, conn: Connection[Any]) -> None:
        if not self.create or self._where(conn) in self._seen:
            return
        from psycopg import errors

        exists = conn.execute("SELECT to_regclass(%s)", (self._name,)).fetchone()
        if exists is not None and exists[0] is not None:
            self._seen.add(self._where(conn))
            return
        # In a savepoint: two first checks racing to create the table make one of
        # them fail (a duplicate catalog entry) once the other committed; then the
        # table is there, and only the savepoint rolls back. Not remembered as
        # seen: the caller's transaction, which the creation joins, may roll back.
        try:
            with conn.transaction():
                conn.execute(self._create_sql)
        except (errors.UniqueViolation, errors.DuplicateTable):
            pass

    # -- asynchronous -----------------------------------------------------------------

    async def acheck(self, conn: AsyncConnection[Any], resource: str, token: int) -> None:
        """:meth:`check` on an ``AsyncConnection``."""
        resource, token = self._arguments(resource, token)
        self._refuse_autocommit(conn)
        await self._aensure_table(conn)
        with self._forget_on_undefined_table(conn):
            cursor = await conn.execute(self._check_sql, (resource, token))
        if await cursor.fetchone() is None:
            cursor = await conn.execute(self._highest_sql, (resource,))
            highest = await cursor.fetchone()
            raise FencedError(resource, token, int(highest[0]) if highest else 0)

    @asynccontextmanager
    async def atransaction(
        self, conn: AsyncConnection[Any], resource: str, token: int
    ) -> AsyncIterator[None]:
        """:meth:`transaction` on an ``AsyncConnection``."""
        async with conn.transaction():
            await self.acheck(conn, resource, token)
            yield

    async def ahighest(self, conn: AsyncConnection[Any], resource: str) -> int | None:
        """:meth:`highest` on an ``AsyncConnection``."""
        resource = check_resource(resource, self.max_resource_bytes)
        exists = await (await conn.execute("SELECT to_regclass(%s)", (self._name,))).fetchone()
        if exists is None or exists[0] is None:
            return None
        row = await (await conn.execute(self._highest_sql, (resource,))).fetchone()
        return None if row is None else int(row[0])

    async def _aensure_table(self, conn: AsyncConnection[Any]) -> None:
        if not self.create or self._where(conn) in self._seen:
            return
        from psycopg import errors

        exists = await (await conn.execute("SELECT to_regclass(%s)", (self._name,))).fetchone()
        if exists is not None and exists[0] is not None:
            self._seen.add(self._where(conn))
            return
        try:  # a savepoint, for the reason _ensure_table gives
            async with conn.transaction():
                await conn.execute(self._create_sql)
        except (errors.UniqueViolation, errors.DuplicateTable):
            pass
