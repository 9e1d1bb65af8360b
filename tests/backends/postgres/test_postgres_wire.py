"""The calls' own path to libpq (_wire) and the connections they lend each other (_lender)."""

from __future__ import annotations

import asyncio
import decimal
from typing import Any

import psycopg
import pytest
from psycopg._queries import PostgresQuery
from psycopg.adapt import Transformer
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from tenure.backends.postgres import _wire
from tenure.backends.postgres._calls import first_done
from tenure.backends.postgres._lender import Lender
from tests.postgres.server import PostgresServer

#: Values of every kind the backend passes (and two it does not: psycopg dumps them).
VALUES: list[object] = [
    None,
    True,
    False,
    0,
    -(2**15),
    2**15,
    -(2**31) - 1,
    2**31,
    2**63 - 1,
    -(2**63),
    2**63,
    2**64 - 1,
    "name é",
    "",
    b"\x00\xffbytes",
    b"",
    1.5,
    -0.0,
    float("inf"),
    decimal.Decimal("1.25"),
    [1, 2],
]


def test_parameters_get_the_types_psycopg_gives_them() -> None:
    # The server resolves the same function and casts the same way only then.
    tx = Transformer()
    _, types, _ = _wire.dump_args(VALUES, "utf-8", tx)
    query = PostgresQuery(tx)
    query.convert(b"SELECT f(" + b", ".join([b"%s"] * len(VALUES)) + b")", VALUES)
    assert tuple(types) == tuple(query.types)


async def test_values_go_and_come_back_as_psycopg_would_carry_them(
    postgres_server: PostgresServer,
) -> None:
    async with await psycopg.AsyncConnection.connect(postgres_server.dsn, autocommit=True) as conn:
        tx = Transformer()

        async def roundtrip(value: object, cast: str) -> Any:
            return await _wire.call(
                conn, f"SELECT $1::{cast}".encode(), _wire.dump_args([value], "utf-8", tx)
            )

        assert await roundtrip(2**64 - 1, "numeric") == 2**64 - 1
        assert await roundtrip(-(2**63), "int8") == -(2**63)
        assert await roundtrip(b"\x00\xff", "bytea") == b"\x00\xff"
        assert await roundtrip("é", "text") == "é"
        assert await roundtrip(True, "boolean") is True
        assert await roundtrip(0.1, "float8") == 0.1
        assert await roundtrip(None, "int8") is None
        assert await roundtrip('{"a": [1, null]}', "jsonb") == {"a": [1, None]}
        assert await _wire.call(conn, b"SELECT pg_sleep(0)", ([], [], [])) is None  # void
        with pytest.raises(psycopg.errors.DivisionByZero):
            await roundtrip(0, "int4 / 0")
        assert await roundtrip(7, "int4") == 7  # the connection is usable after an error


async def test_a_call_cancelled_in_flight_waits_for_its_answer(
    postgres_server: PostgresServer,
) -> None:
    async with await psycopg.AsyncConnection.connect(postgres_server.dsn, autocommit=True) as conn:
        calling = asyncio.ensure_future(_wire.call(conn, b"SELECT pg_sleep(0.3)", ([], [], [])))
        await asyncio.sleep(0.1)
        calling.cancel()
        with pytest.raises(asyncio.CancelledError):
            await calling
        # It returned only once answered: the connection is idle, not mid-call.
        assert conn.pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert await _wire.call(conn, b"SELECT 1", ([], [], [])) == 1


async def test_the_lender_hands_connections_over_in_turn(postgres_server: PostgresServer) -> None:
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        postgres_server.dsn, min_size=1, max_size=1, kwargs={"autocommit": True}, open=False
    )
    await pool.open(wait=True)
    lender = Lender(pool, 1)
    try:
        first = await lender.take(1.0)
        with pytest.raises(PoolTimeout):
            await lender.take(0.1)  # the only one is lent out
        waiting = asyncio.ensure_future(lender.take(5.0))
        gave_up = asyncio.ensure_future(lender.take(5.0))
        await asyncio.sleep(0.05)
        gave_up.cancel()  # leaves the queue; the first waiter keeps its turn
        await lender.give_back(first)
        assert await waiting is first
        await lender.give_back(first)
        assert await lender.take(0.1) is first  # idle: at once
        first.pgconn.finish()  # broken: it goes back to the pool, a place is free
        await lender.give_back(first)
        fresh = await lender.take(5.0)
        assert fresh is not first
        assert not fresh.closed
        await lender.give_back(fresh)
    finally:
        await lender.close()
        await pool.close()


async def test_first_done_returns_at_the_first_and_cancels_neither() -> None:
    loop = asyncio.get_running_loop()
    first: asyncio.Future[None] = loop.create_future()
    second: asyncio.Future[None] = loop.create_future()
    waiting = asyncio.ensure_future(first_done(first, second))
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert not first.done()
    assert not second.done()
    loop.call_soon(second.set_result, None)
    await first_done(first, second)
    assert not first.done()
