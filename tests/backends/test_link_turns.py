"""What a link's connection writes in one turn of the loop (``LinkConnection.send``).

The first request of a turn leaves at once; later ones of the same turn leave
together at its end. A deferred one (the release written on leaving ``async
with``) waits for the turn's end even when it is the first, so the request the
caller sends next leaves with it: one write, which the server reads at once.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

from tenure._protocol.connection import ClientConnection
from tenure.backends._doors import Door
from tenure.backends._link_conn import LinkConnection, LinkProtocol


class Recorder:
    """A transport that records each write."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closing = False

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closing


def _connection(transport: Recorder) -> LinkConnection:
    loop = asyncio.get_running_loop()
    # Real codec and protocol objects (the compiled build checks their types); the
    # link is never reached: nothing is received here.
    codec = ClientConnection()
    protocol = LinkProtocol(cast(Any, None), codec, Door("127.0.0.1", 1))
    return LinkConnection(loop, cast(Any, transport), protocol, codec)


async def test_the_first_frame_of_a_turn_leaves_at_once_the_rest_at_its_end() -> None:
    transport = Recorder()
    conn = _connection(transport)
    conn.send(b"a")
    conn.send(b"b")
    conn.send(b"c")
    assert transport.writes == [b"a"]
    await asyncio.sleep(0)
    assert transport.writes == [b"a", b"bc"]


async def test_a_deferred_frame_leaves_with_the_next_request_of_its_turn() -> None:
    transport = Recorder()
    conn = _connection(transport)
    conn.send(b"release", defer=True)
    assert transport.writes == []  # not yet: the caller may ask more in this turn
    conn.send(b"acquire")
    assert transport.writes == [b"releaseacquire"]  # at once, in one write, in order
    conn.send(b"more")
    assert transport.writes == [b"releaseacquire"]  # the turn's later frames wait
    await asyncio.sleep(0)
    assert transport.writes == [b"releaseacquire", b"more"]


async def test_a_deferred_frame_alone_leaves_at_the_turns_end() -> None:
    transport = Recorder()
    conn = _connection(transport)
    conn.send(b"release", defer=True)
    await asyncio.sleep(0)
    assert transport.writes == [b"release"]
    conn.send(b"next")  # a new turn: its first frame leaves at once again
    assert transport.writes == [b"release", b"next"]


async def test_flush_writes_what_waits_before_a_close() -> None:
    transport = Recorder()
    conn = _connection(transport)
    conn.send(b"release", defer=True)
    conn.flush()
    assert transport.writes == [b"release"]
    await asyncio.sleep(0)
    assert transport.writes == [b"release"]  # the turn's end finds nothing more


async def test_nothing_is_written_to_a_transport_that_is_closing() -> None:
    transport = Recorder()
    conn = _connection(transport)
    conn.send(b"release", defer=True)
    transport.closing = True
    await asyncio.sleep(0)
    assert transport.writes == []
