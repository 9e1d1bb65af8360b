"""Whatever the peer sends, a connection yields valid events or raises ProtocolError.

Never another exception, and never a hang (``drain`` is bounded, pytest-timeout
watches the rest). Four kinds of input: random bytes, random msgpack values in
well-formed frames, valid messages with one field replaced by a random value, and
valid frames with bytes flipped, cut or inserted.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tenure._core import Release
from tenure._protocol import (
    ClientConnection,
    ConnectionClosed,
    ConnectionEnd,
    Hello,
    Ping,
    Request,
    ServerConnection,
    Welcome,
)
from tenure._protocol.messages import MESSAGE
from tenure._protocol.wire import MAX_UINT, MIN_INT
from tenure.errors import ProtocolError
from tests.protocol.helpers import (
    ConnectionPair,
    drain,
    field_sites,
    frame_of,
    raw_frame,
    replace_at,
    wire_of,
)
from tests.protocol.strategies import messages, text

CLIENT_EVENTS = (Hello, Request, Ping, ConnectionClosed)

msgpack_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(MIN_INT, MAX_UINT)
    | st.floats()
    | text
    | st.binary(max_size=8),
    lambda children: st.lists(children, max_size=6) | st.dictionaries(text, children, max_size=3),
    max_leaves=12,
)
#: Arrays that start like a message: a small tag, then anything.
bodies = st.builds(
    lambda tag, rest: [tag, *rest], st.integers(0, 20), st.lists(msgpack_values, max_size=6)
)


def fresh_server(after_handshake: bool) -> ServerConnection:
    pair = ConnectionPair()
    if after_handshake:
        pair.handshake()
        pair.send(pair.client, Request(1, Release(1, "held")))
    return pair.server


def check(conn: ConnectionEnd[Any], data: bytes, *, eof: bool, allowed: tuple[type, ...]) -> None:
    """Feed ``data`` (then the end of the stream, if ``eof``) and check every outcome."""
    conn.receive_data(data)
    if eof:
        conn.receive_data(b"")
    try:
        events = drain(conn)
    except ProtocolError:
        # Broken for good: it says so again rather than yielding anything.
        with pytest.raises(ProtocolError):
            conn.next_event()
        return
    assert all(isinstance(event, allowed) for event in events), events
    if eof:
        assert events[-1:] == [ConnectionClosed()]


@settings(max_examples=300)
@given(st.binary(max_size=400), st.booleans(), st.booleans())
def test_random_bytes_into_a_server(data, after_handshake, eof):
    check(fresh_server(after_handshake), data, eof=eof, allowed=CLIENT_EVENTS)


@given(st.lists(bodies, max_size=3), st.booleans(), st.booleans())
def test_random_msgpack_frames_into_a_server(frames, after_handshake, eof):
    data = b"".join(frame_of(body) for body in frames)
    check(fresh_server(after_handshake), data, eof=eof, allowed=CLIENT_EVENTS)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(messages, msgpack_values, st.data())
def test_a_valid_message_with_one_field_replaced(message, value, data):
    wire = wire_of(message)
    sites = [path for _, path in field_sites(MESSAGE, wire)]
    if sites:
        wire = replace_at(wire, data.draw(st.sampled_from(sites)), value)
    for after_handshake in (False, True):
        check(fresh_server(after_handshake), frame_of(wire), eof=False, allowed=CLIENT_EVENTS)
    client = ClientConnection()
    client.send(Hello())
    check(client, frame_of(wire), eof=False, allowed=(Welcome, *_server_types()))


def _server_types() -> tuple[type, ...]:
    return tuple(
        record.cls for record in MESSAGE.records if record.tag is not None and record.tag > 10
    )


@given(
    messages,
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=4),
    st.data(),
)
def test_valid_frames_with_bytes_flipped_cut_or_inserted(message, flips, data):
    frame = bytearray(raw_frame(Hello()) + raw_frame(message))
    for position, byte in flips:
        frame[position % len(frame)] = byte
    cut = data.draw(st.integers(0, len(frame)))
    insert = data.draw(st.binary(max_size=6))
    mangled = bytes(frame[:cut]) + insert + bytes(frame[cut:])
    check(ServerConnection(), mangled, eof=data.draw(st.booleans()), allowed=CLIENT_EVENTS)


def test_every_event_from_a_valid_stream_is_what_was_sent():
    # The positive control of the tests above: valid frames give exactly their messages.
    server = fresh_server(after_handshake=True)
    sent: list[Any] = [Ping(1), Request(2, Release(1, "x")), Ping(2)]
    server.receive_data(b"".join(raw_frame(message) for message in sent))
    assert drain(server) == sent
