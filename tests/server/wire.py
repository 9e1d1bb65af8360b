"""A small test client for a real ``tenure serve``: asyncio streams + ClientConnection.

Also starts and stops server processes (``ServerProcess``): every wait is bounded,
and the process is always killed by whoever started it (use it as a context).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Self

from tenure._core import Command
from tenure._protocol import (
    NEED_DATA,
    ClientConnection,
    ConnectionClosed,
    Failure,
    GoingAway,
    Hello,
    Ping,
    Pong,
    Push,
    Refused,
    Reply,
    Request,
    ServerMessage,
    Welcome,
)
from tenure.server._config.serve_config import ServeConfig
from tenure.server._reception import Sockets, listening_sockets
from tests.ports import free_port as free_port  # re-exported: ports apart between xdist workers

#: Upper bound of any single wait in these tests, in seconds.
WAIT = 10.0
#: Upper bound of a server process's start, to its "listening" line: a bound against a
#: hang, not a measure (a Python start on a loaded machine has taken over 10 s).
START_WAIT = 60.0

Event = ServerMessage | ConnectionClosed


class ServerProcess:
    """``python -m tenure serve`` (or ``command`` ``serve``) on a free port and a data
    directory; killed on exit."""

    def __init__(
        self,
        data_dir: Path,
        *extra: str,
        env: dict[str, str] | None = None,
        command: Sequence[str] = (sys.executable, "-m", "tenure"),
    ) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.log_path = data_dir.parent / f"{data_dir.name}-{self.port}.log"
        self._log = self.log_path.open("wb")
        args = ["--port", str(self.port), "--data-dir", str(data_dir), *extra]
        self.proc = subprocess.Popen(
            [*command, "serve", *args],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
        )

    def __enter__(self) -> Self:
        try:
            self.wait_listening()
        except BaseException:
            self.kill()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()

    def wait_listening(self) -> None:
        """Until the server logs that it listens (no probe connection: it would count)."""
        deadline = time.monotonic() + START_WAIT
        while time.monotonic() < deadline:
            if '"msg": "listening"' in self.output():
                return
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited {self.proc.returncode}: {self.output()}")
            time.sleep(0.02)
        raise AssertionError(f"server did not listen within {START_WAIT}s: {self.output()}")

    def wait_log(self, text: str) -> None:
        """Until ``text`` appears in the server's log (bounded by WAIT)."""
        deadline = time.monotonic() + WAIT
        while text not in self.output():
            assert time.monotonic() < deadline, f"{text!r} never logged: {self.output()}"
            time.sleep(0.02)

    def output(self) -> str:
        """Everything the server logged so far (also after it was stopped)."""
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def lines(self) -> list[str]:
        """The lines the server logged so far, each whole: a line it is still writing
        (read while it runs, under load) is left out."""
        output = self.output()
        return output[: output.rfind("\n") + 1].splitlines()

    def signal(self, signum: int) -> int:
        """Send ``signum`` and wait (bounded) for the exit code."""
        self.proc.send_signal(signum)
        return self.proc.wait(timeout=WAIT)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=WAIT)
        self._log.close()


class WireClient:
    """One connection: send requests, read answers and pushes (each wait bounded)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.codec = ClientConnection()
        self.pushes: list[Any] = []  # effects pushed to this connection, in order
        self.events: list[Event] = []  # every event read, in order
        self._backlog: list[Event] = []
        self._next_id = 0
        self.welcome: Welcome | None = None

    async def hello(self, **fields: Any) -> Event:
        self.writer.write(self.codec.send(Hello(client_name="test", **fields)))
        return await self.next_event()

    async def next_event(self) -> Event:
        """The next message from the server (or ConnectionClosed), within WAIT."""
        while not self._backlog:
            event = self.codec.next_event()
            if event is NEED_DATA:
                try:
                    data = await asyncio.wait_for(self.reader.read(65536), WAIT)
                except ConnectionResetError:
                    # A killed server's kernel resets a connection with unread
                    # requests in it: that is the stream's end (what was read stays).
                    data = b""
                self.codec.receive_data(data)
                continue
            assert not isinstance(event, type(NEED_DATA))
            self._backlog.append(event)
        event = self._backlog.pop(0)
        self.events.append(event)
        if isinstance(event, Push):
            self.pushes.append(event.effect)
        return event

    def send(self, command: Command[Any], **fields: Any) -> int:
        """Send ``command`` (``fields``: the Request's others, ``max_staleness``...)."""
        self._next_id += 1
        self.writer.write(self.codec.send(Request(self._next_id, command, **fields)))
        return self._next_id

    async def answer(self, request_id: int) -> Reply | Failure:
        """The Reply or Failure of ``request_id`` (pushes before it are kept in ``pushes``)."""
        while True:
            event = await self.next_event()
            if isinstance(event, Reply | Failure) and event.request_id == request_id:
                return event
            if isinstance(event, Refused | ConnectionClosed):
                raise AssertionError(f"no answer to request {request_id}: {event}")

    async def call(self, command: Command[Any]) -> Any:
        """Send ``command``; its reply value, or AssertionError on Failure."""
        answer = await self.answer(self.send(command))
        assert isinstance(answer, Reply), answer
        return answer.value

    async def fail(self, command: Command[Any]) -> Failure:
        """Send ``command``; its Failure (AssertionError if it succeeds)."""
        answer = await self.answer(self.send(command))
        assert isinstance(answer, Failure), answer
        return answer

    async def next_push(self) -> Any:
        """The next effect pushed (skipping other events), within WAIT."""
        seen = len(self.pushes)
        while len(self.pushes) == seen:
            event = await self.next_event()
            if isinstance(event, ConnectionClosed):
                raise AssertionError("connection closed while waiting for a push")
        return self.pushes[seen]

    async def ping(self, nonce: int) -> Pong:
        self.writer.write(self.codec.send(Ping(nonce)))
        while True:
            event = await self.next_event()
            if isinstance(event, Pong):
                return event

    async def until_closed(self) -> list[Event]:
        """Every event up to the end of the stream (GoingAway, answers...), within WAIT."""
        seen: list[Event] = []
        while True:
            event = await self.next_event()
            seen.append(event)
            if isinstance(event, ConnectionClosed):
                return seen
            if isinstance(event, GoingAway | Refused):
                continue

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(OSError, TimeoutError):
            await asyncio.wait_for(self.writer.wait_closed(), WAIT)


class Clients:
    """Every WireClient a test opened, so that all are closed at its end."""

    def __init__(self) -> None:
        self.opened: list[WireClient] = []

    async def connect(
        self,
        port: int,
        *,
        hello: bool = True,
        tls: ssl.SSLContext | None = None,
        token: str | None = None,
    ) -> WireClient:
        """A connection (over TLS with ``tls``); with ``hello``, its handshake must succeed."""
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection("127.0.0.1", port, ssl=tls), WAIT
        )
        client = WireClient(reader, writer)
        self.opened.append(client)
        if hello:
            welcome = await client.hello(token=token)
            assert isinstance(welcome, Welcome), welcome
            client.welcome = welcome
        return client

    async def close_all(self) -> None:
        for client in self.opened:
            await client.close()


#: The listening sockets tests of this process bound (:func:`bound`), closed after each
#: test by tests/server/conftest.py's ``close_bound``.
BOUND: list[Sockets] = []


def bound(config: ServeConfig) -> Sockets:
    """The listening sockets of ``config``'s ports, for a Server in a test's own process
    (``tenure serve`` and a cluster member bind their own): closed after the test."""
    sockets = listening_sockets(config)
    BOUND.append(sockets)
    return sockets
