"""Calls: one ``SELECT schema.op(...)`` on a pooled connection, errors mapped, retries.

Every operation is one function call, one round trip, one transaction
(autocommit). What a failure means:

* a SQLSTATE of class ``TN`` (raised by the functions, :mod:`._ddl`) is a tenure
  error: mapped by :data:`ERRORS`;
* a deadlock or serialization failure (40P01, 40001) rolled everything back: the
  call is sent again;
* a connection that failed before the call was sent (the pool could not connect)
  is tried again until the call's retry deadline; one lost *after* sending leaves
  the call applied or not. Idempotent calls (every session call carries its fence
  and an acquire its request id) are sent again; the others (create, delete) raise
  UnavailableError saying the call may or may not have been applied.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from typing import Any, Final

import psycopg
from psycopg import sql
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from tenure.errors import (
    AlreadyExistsError,
    InvalidArgumentError,
    LimitExceededError,
    NotFoundError,
    PermissionDeniedError,
    PreconditionFailedError,
    SessionClosedError,
    SessionExpiredError,
    TenureError,
    UnavailableError,
)

__all__ = ["ERRORS", "Caller"]

#: The functions' SQLSTATEs and the errors they are.
ERRORS: Final[dict[str, type[TenureError]]] = {
    "TN001": SessionExpiredError,
    "TN002": SessionClosedError,
    "TN003": SessionExpiredError,  # taken over by a resumed client: fenced off
    "TN400": InvalidArgumentError,
    "TN404": NotFoundError,
    "TN409": AlreadyExistsError,
    "TN412": PreconditionFailedError,
    "TN413": LimitExceededError,
}

#: SQLSTATEs after which the transaction was rolled back and may simply run again.
_AGAIN: Final = frozenset({"40P01", "40001"})

#: Longest pause between two tries of a call (seconds).
MAX_BACKOFF: Final = 1.0


class Caller:
    """Runs the schema's functions on the pool (see the module docstring)."""

    def __init__(self, pool: AsyncConnectionPool[Any], schema: str, connect_timeout: float) -> None:
        self.pool = pool
        self.schema = schema
        self.connect_timeout = connect_timeout
        #: Each function's query, as bytes: psycopg composes an ``sql.Composed``
        #: again on every execute (tens of microseconds), and caches bytes.
        self._queries: dict[tuple[str, int], bytes] = {}
        self._checking: asyncio.Task[None] | None = None

    def _query(self, function: str, arity: int) -> bytes:
        query = self._queries.get((function, arity))
        if query is None:
            query = self._queries[function, arity] = (
                sql.SQL("SELECT {}.{}({})")
                .format(
                    sql.Identifier(self.schema),
                    sql.Identifier(function),
                    sql.SQL(", ").join([sql.Placeholder()] * arity),
                )
                .as_bytes(None)
            )
        return query

    async def call(
        self,
        function: str,
        args: Sequence[object],
        *,
        idempotent: bool = True,
        within: float | None = None,
    ) -> Any:
        """``SELECT schema.function(args)``'s value; tries again for ``within`` seconds
        (default: connect_timeout) while the database cannot be reached."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self.connect_timeout if within is None else within)
        query = self._query(function, len(args))
        backoff = 0.05
        while True:
            sent: list[bool] = []
            try:
                left = max(0.1, deadline - loop.time())
                return await _uncancelled(self._once(query, args, left, sent), sent)
            except psycopg.Error as error:
                state = error.sqlstate or ""
                mapped = ERRORS.get(state)
                if mapped is not None:
                    raise mapped(_message(error)) from None
                if state == "42501":
                    raise PermissionDeniedError(f"{function}: {_message(error)}") from None
                if state in _AGAIN:
                    # Rolled back whole: run it again at once, within the deadline.
                    if loop.time() >= deadline:
                        raise UnavailableError(
                            f"{function} kept meeting deadlocks or serialization failures "
                            f"({state}) until its deadline"
                        ) from None
                    continue
                if state == "57014":  # statement_timeout: rolled back, not applied
                    raise UnavailableError(
                        f"the database did not answer {function} within request_timeout"
                    ) from None
                if not isinstance(error, psycopg.OperationalError):
                    raise UnavailableError(
                        f"the database refused {function} ({state}): {_message(error)}"
                    ) from None
                self._check_pool()
                if sent and not idempotent:  # sent: it may have been applied
                    raise UnavailableError(
                        f"lost the connection to the database during {function}: it may or "
                        "may not have been applied (check, e.g. with describe)"
                    ) from None
                if loop.time() >= deadline:
                    raise UnavailableError(
                        f"cannot reach the database for {function}: {_message(error)}"
                    ) from None
            except PoolTimeout as error:
                if loop.time() >= deadline:
                    raise UnavailableError(
                        f"cannot reach the database for {function}: {error}"
                    ) from None
            await asyncio.sleep(min(backoff, max(0.0, deadline - loop.time())))
            backoff = min(MAX_BACKOFF, backoff * 2)

    async def _once(
        self, query: bytes, args: Sequence[object], wait: float, sent: list[bool]
    ) -> Any:
        async with self.pool.connection(timeout=wait) as conn:
            sent.append(True)
            cursor = await conn.execute(query, args)
            row = await cursor.fetchone()
        return None if row is None else row[0]

    def _check_pool(self) -> None:
        """A connection broke: have the pool test its idle ones (once at a time)."""
        if self._checking is None or self._checking.done():
            self._checking = asyncio.ensure_future(self._check())

    async def _check(self) -> None:
        try:
            await self.pool.check()
        except Exception:
            return


async def _uncancelled(call: Coroutine[Any, Any, Any], sent: list[bool]) -> Any:
    """Run ``call`` to its end even if the caller is cancelled once it was sent.

    A call is one short transaction: cancelling it in flight would leave it applied
    or not (the caller's cleanup, e.g. withdrawing an acquire, must run after it),
    and psycopg's cancel of a running query can wait seconds for the server. So
    the caller's cancellation waits for the answer (bounded by request_timeout),
    then goes on as a CancelledError. A call still waiting for a pooled connection
    (``sent`` empty) was not sent: it is cancelled at once.
    """
    task = asyncio.ensure_future(call)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        if not sent:
            task.cancel()
        await asyncio.wait({task})
        if not task.cancelled():
            task.exception()  # retrieved: the caller is cancelled, that is its answer
        raise


def _message(error: psycopg.Error) -> str:
    diag = error.diag.message_primary
    return diag if diag else str(error).strip()
