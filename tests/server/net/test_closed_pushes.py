"""A push to a connection already closed is skipped quietly (issue 47).

Between reading a connection's end of stream (its codec CLOSED) and detaching its
sessions, the engine may still route their watch firings there. Each was logged as
a warning with its traceback: a tenant that closes connections with many watches
armed wrote 600 of them in one run of the fault suite's tenant scenario, each a
cost to the server's loop and its log, paid by everyone. Pushes in flight die with
a connection (docs/protocol.md section 11: its client lists again after its
re-attach), so nothing is owed to it, and nothing is logged.
"""

from __future__ import annotations

import asyncio
import logging
import socket

import pytest

from tenure._core import SemaphoreDescription, WatchFired
from tenure._protocol import ServerConnection, State
from tenure.server._config.serve_config import ServeConfig
from tenure.server._net.gate import Conn
from tenure.server._net.outbox import Outboxes


async def test_a_push_to_a_closed_connection_is_skipped_without_a_log_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ours, theirs = socket.socketpair()
    reader, writer = await asyncio.open_connection(sock=ours)
    try:
        codec = ServerConnection()
        codec.receive_data(b"")  # its end of stream, before any Hello
        codec.next_event()  # read: ConnectionClosed
        assert codec.state is State.CLOSED
        conn = Conn(reader, writer, codec)  # (a real one: the compiled build checks)
        flushes: list[None] = []
        outboxes = Outboxes(ServeConfig(), lambda: flushes.append(None))
        fired = WatchFired(1, 7, "s", SemaphoreDescription.missing("s"))
        with caplog.at_level(logging.DEBUG):
            for _ in range(100):
                outboxes.push(conn, fired)
        assert [r.getMessage() for r in caplog.records] == []
        assert conn.outbox == []
        assert flushes == []
    finally:
        writer.close()
        theirs.close()
