"""The sans-I/O codec of tenure's native protocol (``tenure://``). [compiled]

Frames are a 4-byte big-endian length and one msgpack array; the messages, their
layouts and the connection state machine are specified in docs/protocol.md. Like
:mod:`tenure._core`, nothing here does I/O, reads a clock or starts a thread (a
test enforces it): a driver feeds bytes in with ``receive_data``, takes messages
out with ``next_event`` and writes what ``send`` returns.

Layer (CONTRIBUTING.md): its modules may import each other, tenure._core and
tenure.errors.
"""

from __future__ import annotations

from tenure._protocol.connection import (
    NEED_DATA,
    ClientConnection,
    ConnectionEnd,
    NeedData,
    ServerConnection,
)
from tenure._protocol.errors import FrameTooLargeError, LocalProtocolError
from tenure._protocol.frames import (
    DEFAULT_MAX_FRAME_SIZE,
    MAX_MAX_FRAME_SIZE,
    MIN_MAX_FRAME_SIZE,
)
from tenure._protocol.messages import (
    PROTOCOL_VERSION,
    SUPPORTED_VERSIONS,
    ClientMessage,
    ConnectionClosed,
    Failure,
    GoingAway,
    Hello,
    Message,
    Ping,
    Pong,
    Push,
    Refused,
    Reply,
    Request,
    ServerMessage,
    Welcome,
    decode_message,
    encode_message,
    version_refusal,
)
from tenure._protocol.payloads import ReplyValue
from tenure._protocol.state import Side, State

__all__ = [
    "DEFAULT_MAX_FRAME_SIZE",
    "MAX_MAX_FRAME_SIZE",
    "MIN_MAX_FRAME_SIZE",
    "NEED_DATA",
    "PROTOCOL_VERSION",
    "SUPPORTED_VERSIONS",
    "ClientConnection",
    "ClientMessage",
    "ConnectionClosed",
    "ConnectionEnd",
    "Failure",
    "FrameTooLargeError",
    "GoingAway",
    "Hello",
    "LocalProtocolError",
    "Message",
    "NeedData",
    "Ping",
    "Pong",
    "Push",
    "Refused",
    "Reply",
    "ReplyValue",
    "Request",
    "ServerConnection",
    "ServerMessage",
    "Side",
    "State",
    "Welcome",
    "decode_message",
    "encode_message",
    "version_refusal",
]
