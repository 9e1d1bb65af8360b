"""Calls: one ``SELECT schema.op(...)`` on a pooled connection, errors mapped, retries.

Every operation is one function call, one round trip, one transaction
(autocommit). What a failure means:

* a SQLSTATE of class ``TN`` (raised by the functions, :mod:`._ddl`) is a tenure
  error: mapped by :data:`ERRORS`;
* a deadlock, a serialization failure or a row lock not available (40P01, 40001,
  55P03: a function never waits for a row named before one it holds, and fails
  instead, :mod:`._sql_queues`) rolled everything back: the call is sent again;
* a connection that failed before the call was sent (the pool could not connect)
  is tried again until the call's retry deadline; one lost *after* sending leaves
  the call applied or not. Idempotent calls (every session call carries its fence
  and an acquire its request id) are sent again; the others (create, delete) raise
  UnavailableError saying the call may or may not have been applied.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from typing import Any, Final, Protocol

import psycopg
from psycopg import abc, sql
from psycopg.adapt import Transformer
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from tenure.backends.postgres import _wire
from tenure.backends.postgres._lender import Lender
from tenure.backends.postgres._wire import dump_args
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

__all__ = ["ERRORS", "Caller", "PgSessionCalls", "first_done"]

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
_AGAIN: Final = frozenset({"40P01", "40001", "55P03"})

#: Longest pause between two tries of a call (seconds).
MAX_BACKOFF: Final = 1.0

#: Bounds of the pause before a call that met a locked row (55P03) runs again
#: (seconds): the first, and the most it doubles to while the row stays locked.
LOCKED_PAUSE: Final = 0.004
MAX_LOCKED_PAUSE: Final = 0.1
#: The pause's own generator: the random module's shared one is the application's.
_JITTER: Final = random.Random()


class PgSessionCalls(Protocol):
    """How a session's parts call the schema's functions (its store, a
    :class:`~tenure.backends.postgres._store.PgStore`, over a :class:`Caller`): fenced
    by the session, reading without its fence, or with its id and secret alone."""

    async def call(self, function: str, *args: object, idempotent: bool = True) -> Any:
        """A function of this session (its fence first)."""

    async def read_now(self, function: str, *args: object) -> Any:
        """A function that reads, without the session's fence (within its deadline)."""

    async def call_unfenced(self, function: str, *args: object) -> None:
        """A function with the session's id and secret, bounded by connect_timeout."""


class Caller:
    """Runs the schema's functions on the pool (see the module docstring)."""

    def __init__(self, pool: AsyncConnectionPool[Any], schema: str, connect_timeout: float) -> None:
        self.pool = pool
        #: The pool's connections the calls run on (:mod:`._lender`).
        self.lender = Lender(pool, pool.max_size)
        self.schema = schema
        self.connect_timeout = connect_timeout
        #: Each function's query, as bytes: psycopg composes an ``sql.Composed``
        #: again on every execute (tens of microseconds), and caches bytes.
        self._queries: dict[tuple[str, int], bytes] = {}
        self._checking: asyncio.Task[None] | None = None
        #: psycopg's adapters, for a parameter of a type the wire does not dump itself.
        self._tx: abc.Transformer = Transformer()

    def _query(self, function: str, arity: int) -> bytes:
        query = self._queries.get((function, arity))
        if query is None:
            query = self._queries[function, arity] = (
                sql.SQL("SELECT {}.{}({})")
                .format(
                    sql.Identifier(self.schema),
                    sql.Identifier(function),
                    # libpq's own placeholders: the wire sends them as they are.
                    sql.SQL(", ").join([sql.SQL(f"${i}") for i in range(1, arity + 1)]),
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
        backoff, locked_pause = 0.05, LOCKED_PAUSE
        while True:
            sent: list[bool] = []
            try:
                left = max(0.1, deadline - loop.time())
                return await self._once(query, args, left, sent)
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
                            f"{function} kept meeting deadlocks, serialization failures or "
                            f"locked rows ({state}) until its deadline"
                        ) from None
                    if state == "55P03":
                        # Its holder is mid-transaction: a moment's pause, at random so
                        # that two calls that met this way do not meet again in step.
                        await asyncio.sleep(_JITTER.random() * locked_pause)
                        locked_pause = min(MAX_LOCKED_PAUSE, locked_pause * 2)
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
        """One try on a pooled connection. Waiting for the connection is cancelled at
        once (nothing was sent); once sent, the call runs to its answer even if the
        caller is cancelled (:func:`._wire.call`): cancelling a call in flight would
        leave it applied or not, and the caller's cleanup (withdrawing an acquire)
        must come after it; psycopg's cancel of a running query can wait seconds."""
        conn = await self.lender.take(wait)
        try:
            sent.append(True)
            dumped = dump_args(args, conn.info.encoding, self._tx)
            return await _wire.call(conn, query, dumped)
        finally:
            await self.lender.give_back(conn)

    def _check_pool(self) -> None:
        """A connection broke: have the pool test its idle ones (once at a time)."""
        if self._checking is None or self._checking.done():
            self._checking = asyncio.ensure_future(self._check())

    async def _check(self) -> None:
        try:
            await self.lender.release_idle()  # lent no more before the pool checked them
            await self.pool.check()
        except Exception:
            return


async def first_done(first: asyncio.Future[Any], second: asyncio.Future[Any]) -> None:
    """Until either future is done: ``asyncio.wait(..., FIRST_COMPLETED)`` of two
    futures without its sets and checks (twice per call). Cancelling it cancels
    neither future."""
    if first.done() or second.done():
        return
    waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def wake(_: asyncio.Future[Any]) -> None:
        if not waiter.done():
            waiter.set_result(None)

    first.add_done_callback(wake)
    second.add_done_callback(wake)
    try:
        await waiter
    finally:
        first.remove_done_callback(wake)
        second.remove_done_callback(wake)


def _message(error: psycopg.Error) -> str:
    diag = error.diag.message_primary
    return diag if diag else str(error).strip()
