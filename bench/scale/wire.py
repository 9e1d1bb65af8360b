"""A lean native-protocol connection for the scale workers: thousands per process.

The test suite's wire client (``tests.server.wire.WireClient``) keeps every event it
reads, for tests to look at; a worker holding 5,000 connections, or a million
answers, cannot. :class:`Conn` is an :class:`asyncio.Protocol` over the same sans-I/O
codec (``tenure._protocol.ClientConnection``): a request's answer resolves its
future, a push goes to ``on_push``, a Pong is counted, and nothing else is kept.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, cast

from tenure._core import Command
from tenure._protocol import (
    NEED_DATA,
    ClientConnection,
    Failure,
    Hello,
    Ping,
    Pong,
    Push,
    Refused,
    Reply,
    Request,
    Welcome,
)

HOST = "127.0.0.1"


class RequestFailedError(RuntimeError):
    """The server answered a request with a Failure (its message)."""


class Conn(asyncio.Protocol):
    """One connection past its Hello: requests, pings and pushes, nothing kept."""

    def __init__(self, on_push: Callable[[Any], None] | None = None) -> None:
        self.codec = ClientConnection()
        self.transport: asyncio.Transport | None = None
        self.on_push = on_push
        self.welcomed: asyncio.Future[Welcome] = asyncio.get_running_loop().create_future()
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._answers: dict[int, asyncio.Future[Any]] = {}
        self._next = 0
        #: Pings sent (:meth:`ping_nowait`) not answered yet, and those answered.
        self.unanswered = 0
        self.pongs = 0

    @classmethod
    async def open(
        cls, port: int, on_push: Callable[[Any], None] | None = None, name: str = "scale"
    ) -> Conn:
        """Connect to 127.0.0.1:``port`` and say Hello; the connection once welcomed."""
        loop = asyncio.get_running_loop()
        transport, conn = await loop.create_connection(lambda: cls(on_push), HOST, port)
        conn.transport = transport  # (uvloop calls connection_made a turn later)
        transport.write(conn.codec.send(Hello(client_name=name)))
        await conn.welcomed
        return conn

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # (uvloop's is not a subclass)

    def data_received(self, data: bytes) -> None:
        self.codec.receive_data(data)
        while (event := self.codec.next_event()) is not NEED_DATA:
            if isinstance(event, Reply | Failure):
                future = self._answers.pop(event.request_id, None)
                if future is not None and not future.done():
                    if isinstance(event, Reply):
                        future.set_result(event.value)
                    else:
                        future.set_exception(RequestFailedError(event.message))
            elif isinstance(event, Push):
                if self.on_push is not None:
                    self.on_push(event.effect)
            elif isinstance(event, Pong):
                if self.unanswered:
                    self.unanswered -= 1
                    self.pongs += 1
            elif isinstance(event, Welcome):
                if not self.welcomed.done():
                    self.welcomed.set_result(event)
            elif isinstance(event, Refused) and not self.welcomed.done():
                self.welcomed.set_exception(ConnectionError(f"refused: {event}"))

    def connection_lost(self, exc: Exception | None) -> None:
        lost = ConnectionError(f"connection lost: {exc}")
        for future in (*self._answers.values(), self.welcomed):
            if not future.done():
                future.set_exception(lost)
                future.exception()  # (retrieved: a request sent without a wait, as a release)
        self._answers.clear()
        if not self.closed.done():
            self.closed.set_result(None)

    def send(self, command: Command[Any]) -> asyncio.Future[Any]:
        """Send ``command``; a future of its reply value (RequestFailedError on a Failure)."""
        assert self.transport is not None
        self._next += 1
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._answers[self._next] = future
        self.transport.write(self.codec.send(Request(self._next, command)))
        return future

    async def call(self, command: Command[Any]) -> Any:
        """Send ``command`` and wait for its reply value."""
        return await self.send(command)

    def ping_nowait(self) -> None:
        """One Ping, its Pong counted when it comes (``unanswered``, ``pongs``)."""
        assert self.transport is not None
        self._next += 1
        self.unanswered += 1
        self.transport.write(self.codec.send(Ping(self._next)))

    def is_open(self) -> bool:
        """Whether the connection is still up."""
        return not self.closed.done()

    def close(self) -> None:
        """Close the connection (without waiting)."""
        if self.transport is not None:
            self.transport.close()


async def pipelined(conn: Conn, commands: list[Command[Any]], window: int = 2_000) -> list[Any]:
    """Send ``commands`` with at most ``window`` in flight; their reply values, in order."""
    values: list[Any] = []
    for start in range(0, len(commands), window):
        batch = [conn.send(c) for c in commands[start : start + window]]
        values += await asyncio.gather(*batch)
    return values
