"""One function call on a connection, spoken to libpq directly (the hot path).

psycopg's ``execute`` builds a cursor, a transformer and a query object, dumps
every parameter through its adapters, and waits through a generator per call:
about 100 us of client CPU per call here, more than the rest of a call together.
Every call of ours is the same shape (``SELECT schema.f($1, ...)``, one row, one
column, autocommit), so :func:`call` does only that: the parameters dumped in a
few type checks, one ``send_query_params``, one future set by a reader callback
on the socket, the one value read back (about 30 us).

The parameters keep the types psycopg would give them (an ``int`` is ``int2``,
``int4``, ``int8`` or ``numeric`` by its size, a ``str`` is ``unknown``), so the
server resolves the same function and casts the same way; anything else is
dumped by psycopg's own adapters. Errors are psycopg's (``error_from_result``):
the caller maps them as before. Unnamed statements only, as before: nothing is
prepared (a transaction-pooling pgbouncer would hand them to other connections).
"""

from __future__ import annotations

import asyncio
import json
import struct
from collections.abc import Sequence
from typing import Any, Final

import psycopg
from psycopg import abc, errors, pq
from psycopg.adapt import PyFormat, Transformer

__all__ = ["call", "dump_args"]

# Type oids (pg_type), as psycopg sends and reads them.
_BOOL, _BYTEA, _INT8, _INT2, _INT4, _TEXT = 16, 17, 20, 21, 23, 25
_JSON, _FLOAT8, _VARCHAR, _NUMERIC, _VOID, _JSONB = 114, 701, 1043, 1700, 2278, 3802
_TEXT_FORMAT, _BINARY_FORMAT = 0, 1

_PACK_FLOAT8: Final = struct.Struct(">d").pack

Dumped = tuple[list[bytes | None], list[int], list[int]]


def dump_args(args: Sequence[object], encoding: str, tx: abc.Transformer) -> Dumped:
    """The parameters, their type oids and formats, as psycopg would send them."""
    params: list[bytes | None] = []
    types: list[int] = []
    formats: list[int] = []
    for arg in args:
        if arg is None:
            params.append(None)
            types.append(0)
            formats.append(_TEXT_FORMAT)
        elif arg is True or arg is False:
            params.append(b"t" if arg else b"f")
            types.append(_BOOL)
            formats.append(_TEXT_FORMAT)
        elif type(arg) is int:
            params.append(str(arg).encode())
            types.append(_int_oid(arg))
            formats.append(_TEXT_FORMAT)
        elif type(arg) is str:
            params.append(arg.encode(encoding))
            types.append(0)  # unknown: the server casts it to what the function takes
            formats.append(_TEXT_FORMAT)
        elif type(arg) is bytes:
            params.append(arg)
            types.append(_BYTEA)
            formats.append(_BINARY_FORMAT)
        elif type(arg) is float:
            params.append(_PACK_FLOAT8(arg))
            types.append(_FLOAT8)
            formats.append(_BINARY_FORMAT)
        else:  # anything rarer: psycopg's own adapters
            dumper = tx.get_dumper(arg, PyFormat.AUTO)
            value = dumper.dump(arg)
            params.append(None if value is None else bytes(value))
            types.append(dumper.oid)
            formats.append(int(dumper.format))
    return params, types, formats


def _int_oid(value: int) -> int:
    """The smallest integer type that holds ``value`` (psycopg's choice)."""
    if -0x8000 <= value < 0x8000:
        return _INT2
    if -0x80000000 <= value < 0x80000000:
        return _INT4
    if -0x8000000000000000 <= value < 0x8000000000000000:
        return _INT8
    return _NUMERIC


class _Reply:
    """Reads a call's results off the socket as they arrive (a reader callback)."""

    __slots__ = ("done", "error", "fd", "finished", "loop", "pgconn", "results")

    def __init__(self, loop: asyncio.AbstractEventLoop, pgconn: pq.abc.PGconn) -> None:
        self.loop = loop
        self.pgconn = pgconn
        self.fd = pgconn.socket
        self.results: list[pq.abc.PGresult] = []
        self.error: BaseException | None = None
        self.finished = False
        #: Set when the results are all in (a new one if a cancelled caller waits on).
        self.done: asyncio.Future[None] = loop.create_future()

    def readable(self) -> None:
        pgconn = self.pgconn
        try:
            pgconn.consume_input()
            while not pgconn.is_busy():
                result = pgconn.get_result()
                if result is None:
                    self._finish()
                    return
                self.results.append(result)
        except (psycopg.Error, OSError) as error:
            self.error = error
            self._finish()

    def _finish(self) -> None:
        self.loop.remove_reader(self.fd)
        self.finished = True
        if not self.done.done():
            self.done.set_result(None)


async def call(conn: psycopg.AsyncConnection[Any], query: bytes, dumped: Dumped) -> Any:
    """``query`` (one row of one column) on ``conn``: its value, or psycopg's error.

    Once sent, the call runs to its answer even if the caller is cancelled: the
    connection must not go back to the pool mid-call, and cancelling a call in
    flight would leave it applied or not. The caller's cancellation waits for the
    answer, then goes on as a CancelledError.
    """
    pgconn = conn.pgconn
    if pgconn.status != pq.ConnStatus.OK:
        raise psycopg.OperationalError("the connection is closed")
    params, types, formats = dumped
    loop = asyncio.get_running_loop()
    try:
        # libpq writes what the socket takes; a failure is psycopg's OperationalError.
        pgconn.send_query_params(
            query, params, param_types=types, param_formats=formats, result_format=0
        )
        while pgconn.flush():  # more than the socket took at once: rare, a few bytes
            await _writable(loop, pgconn.socket)
    except OSError as error:
        raise psycopg.OperationalError(f"sending the call failed: {error}") from None
    except asyncio.CancelledError:
        pgconn.finish()  # half sent: the connection is unusable (the pool drops it)
        raise
    reply = _Reply(loop, pgconn)
    loop.add_reader(reply.fd, reply.readable)
    cancelled = False
    while not reply.finished:
        try:
            await reply.done  # not shielded: a cancelled one is replaced, and waited on
        except asyncio.CancelledError:
            cancelled = True
            if not reply.finished:
                reply.done = loop.create_future()
    if cancelled:
        raise asyncio.CancelledError
    if reply.error is not None:
        if isinstance(reply.error, psycopg.Error):
            raise reply.error
        raise psycopg.OperationalError(f"the connection failed: {reply.error}")
    return _value(reply.results, conn)


async def _writable(loop: asyncio.AbstractEventLoop, fd: int) -> None:
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_writer(fd, wake)
    try:
        await ready
    finally:
        loop.remove_writer(fd)


def _value(results: list[pq.abc.PGresult], conn: psycopg.AsyncConnection[Any]) -> Any:
    """The one value of the results (the first error, if any, raised)."""
    value: Any = None
    for result in results:
        status = result.status
        if status == pq.ExecStatus.TUPLES_OK:
            if result.ntuples and result.nfields:
                value = _load(result, conn)
        elif status != pq.ExecStatus.COMMAND_OK:
            raise errors.error_from_result(result, encoding=conn.info.encoding)
    return value


def _load(result: pq.abc.PGresult, conn: psycopg.AsyncConnection[Any]) -> Any:
    raw = result.get_value(0, 0)
    if raw is None:
        return None
    oid = result.ftype(0)
    if oid in (_JSONB, _JSON):
        return json.loads(raw)
    if oid == _BOOL:
        return raw == b"t"
    if oid == _VOID:
        return None
    if oid == _FLOAT8:
        return float(raw)
    if oid in (_INT2, _INT4, _INT8):
        return int(raw)
    if oid in (_TEXT, _VARCHAR):
        return bytes(raw).decode(conn.info.encoding)
    return Transformer(conn).get_loader(oid, pq.Format.TEXT).load(raw)
