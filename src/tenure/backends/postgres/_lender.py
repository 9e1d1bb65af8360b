"""The connections calls run on: taken from the pool once, lent in FIFO order.

psycopg_pool's checkout and return cost tens of microseconds each (its locks, a
condition, and an ``asyncio.wait_for``, which is a task in 3.11, for every call
that waits for a connection): a share of a call's client CPU, and most of it when
32 sessions share 10 connections. So the calls keep the connections they took from
the pool and lend them among themselves: an idle one is handed out at once (a
deque), a returned one goes straight to the first waiter (a deque of futures).

The pool still makes, checks and replaces connections: one is taken from it while
fewer than ``size`` are lent out, and one that broke (or is not idle after its
call) goes back to it, to be closed or reset. Each one lent is checked first as
the pool checks its own (:func:`._reclaim.check_pooled`): a connection the server
closed while it sat idle is replaced, not failed.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

import psycopg
from psycopg import pq
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from tenure.backends.postgres._reclaim import check_pooled

__all__ = ["Lender"]

Conn = psycopg.AsyncConnection[Any]


class Lender:
    """Up to ``size`` connections of ``pool``, lent to one call at a time."""

    def __init__(self, pool: AsyncConnectionPool[Any], size: int) -> None:
        self.pool = pool
        self.size = size
        self._idle: deque[Conn] = deque()
        #: Calls waiting for a connection, first come first served. A waiter is
        #: woken with a connection, or with None: a place was freed, take one anew.
        self._waiters: deque[asyncio.Future[Conn | None]] = deque()
        self._taken = 0  # connections this lender holds (idle or lent out)
        self._closed = False

    async def take(self, timeout: float) -> Conn:
        """A connection for one call, within ``timeout`` seconds (else PoolTimeout)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            while self._idle:
                conn = self._idle.popleft()
                try:
                    await check_pooled(conn)
                except psycopg.Error:
                    await self._drop(conn)
                    continue
                return conn
            if self._taken < self.size:
                self._taken += 1
                try:
                    fresh: Conn = await self.pool.getconn(timeout=max(0.0, deadline - loop.time()))
                    return fresh
                except BaseException:
                    self._taken -= 1
                    self._wake_one(None)
                    raise
            conn_or_place = await self._wait(loop, deadline)
            if conn_or_place is not None:
                return conn_or_place

    async def _wait(self, loop: asyncio.AbstractEventLoop, deadline: float) -> Conn | None:
        waiter: asyncio.Future[Conn | None] = loop.create_future()
        self._waiters.append(waiter)
        timer = loop.call_at(deadline, _expire, waiter)
        try:
            return await waiter  # popped from the queue by whoever woke it
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                # Handed a connection (or a place) as it was cancelled: pass it on.
                self._pass_on(waiter.result())
            else:
                self._forget(waiter)
            raise
        except PoolTimeout:
            self._forget(waiter)
            raise
        finally:
            timer.cancel()

    def _forget(self, waiter: asyncio.Future[Conn | None]) -> None:
        """A waiter that gave up leaves the queue (the others keep their turns)."""
        if waiter in self._waiters:
            self._waiters.remove(waiter)

    async def give_back(self, conn: Conn) -> None:
        """A call is done with ``conn``: the next waiter's, or idle. One that broke or is
        mid-transaction goes back to the pool (which closes or resets it)."""
        if self._closed or conn.pgconn.transaction_status != pq.TransactionStatus.IDLE:
            await self._drop(conn)
        else:
            self._pass_on(conn)

    def _pass_on(self, conn: Conn | None) -> None:
        """Hand ``conn`` (or a freed place) to the first live waiter, else keep it idle."""
        if not self._wake_one(conn) and conn is not None:
            self._idle.append(conn)

    def _wake_one(self, conn: Conn | None) -> bool:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(conn)
                return True
        return False

    async def _drop(self, conn: Conn) -> None:
        """``conn`` goes back to the pool (which closes or resets it); a place is free."""
        self._taken -= 1
        self._wake_one(None)
        try:
            await self.pool.putconn(conn)
        except Exception:
            return

    async def release_idle(self) -> None:
        """Give every idle connection back to the pool (to be checked, or closed)."""
        while self._idle:
            await self._drop(self._idle.popleft())

    async def close(self) -> None:
        """Give everything back to the pool before it closes (calls still out give
        theirs back when they end, and the closed pool closes them)."""
        self._closed = True
        await self.release_idle()


def _expire(waiter: asyncio.Future[Conn | None]) -> None:
    if not waiter.done():
        waiter.set_exception(PoolTimeout("no connection became free in time"))
