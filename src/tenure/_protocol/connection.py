"""A connection's two ends, sans-I/O: bytes in, messages out, messages in, bytes out. [compiled]

A :class:`ConnectionEnd` owns no socket, timer or task. Its driver does three things::

    conn.receive_data(data)          # bytes from the socket (b"" at end of stream)
    event = conn.next_event()        # a message, ConnectionClosed, or NEED_DATA
    transport.write(conn.send(msg))  # the bytes of one frame

and calls ``next_event`` until it returns NEED_DATA after each ``receive_data``.
The state machine (:mod:`tenure._protocol.state`) decides what may be sent and
received; this module enforces it, plus the rules the tables cannot express.

Errors say whose fault they are: ``next_event`` raises
:class:`~tenure.errors.ProtocolError` when the peer broke the protocol, and the
connection then stays broken; ``send`` raises
:class:`~tenure._protocol.errors.LocalProtocolError` or
:class:`~tenure._protocol.errors.FrameTooLargeError` when this side asked for
something wrong, and then nothing happened: no bytes, no change of state.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final, Generic, TypeVar, cast, final

from tenure._protocol.errors import LocalProtocolError
from tenure._protocol.fanout import FiredPushReader
from tenure._protocol.frames import (
    DEFAULT_MAX_FRAME_SIZE,
    MAX_MAX_FRAME_SIZE,
    MIN_MAX_FRAME_SIZE,
    FrameReader,
    encode_frame,
)
from tenure._protocol.messages import (
    PROTOCOL_VERSION,
    SUPPORTED_VERSIONS,
    ClientMessage,
    ConnectionClosed,
    Failure,
    Hello,
    Message,
    Ping,
    Pong,
    Push,
    Reply,
    Request,
    ServerMessage,
    Welcome,
    decode_message,
    encode_message,
)
from tenure._protocol.older_peers import for_version
from tenure._protocol.payloads import reply_fits
from tenure._protocol.state import LAST_WORDS, TRANSITIONS, Direction, Side, State
from tenure.errors import ProtocolError

__all__ = ["NEED_DATA", "ClientConnection", "ConnectionEnd", "NeedData", "ServerConnection"]

#: What a connection can hand its driver: a message, or the end of the stream.
Event = Message | ConnectionClosed


class NeedData(enum.Enum):
    """The type of :data:`NEED_DATA`."""

    NEED_DATA = "NEED_DATA"


#: ``next_event`` returns this when no whole frame is buffered: feed more bytes.
NEED_DATA: Final = NeedData.NEED_DATA


class _RefusalError(Exception):
    """A rule forbids an event. Raised inside; the entry point picks Local or Remote."""


#: The messages one end receives: the server's (a client's end), the client's (a server's).
#: A type parameter rather than an override of ``next_event`` that only narrows the
#: type: such an override would cost a call on every event, and mypyc compiles no
#: ``if TYPE_CHECKING:`` block in a class body.
InT = TypeVar("InT", bound=Message)


class ConnectionEnd(Generic[InT]):
    """One end of a tenure protocol connection (see the module docstring)."""

    def __init__(self, side: Side, *, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        """Start in HANDSHAKE.

        Args:
            side: which end this is.
            max_frame_size: the largest frame body this end accepts, in bytes
                (MIN_MAX_FRAME_SIZE to MAX_MAX_FRAME_SIZE); a client announces it in
                Hello, a server in Welcome.
        """
        self._side = side
        self._moves = _moves_of(side)
        self._state = State.HANDSHAKE
        self._may_send, self._may_receive = self._moves[self._state]
        self._reader = FrameReader(max_frame_size)
        # A client decodes a change's run of watch pushes once (tenure._protocol.fanout).
        self._decode = FiredPushReader().decode if side is Side.CLIENT else decode_message
        self._their_error: ProtocolError | None = None
        # Requests sent (client) or received (server) and not yet answered, with the
        # type of their command: Rule 2 and Rule 3.
        self._in_flight: dict[int, type] = {}
        self._version: int | None = None
        # Until the peer says otherwise, it accepts what every peer must accept.
        self._peer_max_frame_size = MIN_MAX_FRAME_SIZE
        # The last Request received, and its frame body (ServerConnection.command_bytes).
        self._request: Request | None = None
        self._request_body = b""

    # -- what the driver may look at ----------------------------------------------------

    @property
    def side(self) -> Side:
        """Which end this is."""
        return self._side

    @property
    def state(self) -> State:
        """The current state (see :mod:`tenure._protocol.state`)."""
        return self._state

    @property
    def version(self) -> int | None:
        """The protocol version of the Hello (sent or received), or None before it."""
        return self._version

    @property
    def max_frame_size(self) -> int:
        """The largest frame body this end accepts."""
        return self._reader.max_frame_size

    @property
    def peer_max_frame_size(self) -> int:
        """The largest frame body the peer accepts (``send`` refuses larger ones)."""
        return self._peer_max_frame_size

    @property
    def in_flight(self) -> Mapping[int, type]:
        """Request id -> command type of every request not answered yet (read-only).

        After the connection is lost these are the requests that got no answer.
        """
        return MappingProxyType(self._in_flight)

    @property
    def their_error(self) -> ProtocolError | None:
        """The peer's protocol error, once ``next_event`` has raised one."""
        return self._their_error

    # -- the three verbs ----------------------------------------------------------------

    def receive_data(self, data: bytes) -> None:
        """Hand over bytes received from the peer; ``b""`` means it closed its end.

        Never raises for bad bytes (``next_event`` does). Once the peer broke the
        protocol, what it sends is dropped unread, so it cannot make us buffer.

        Raises:
            LocalProtocolError: bytes after the end of the stream was reported.
        """
        if data and self._reader.eof:
            raise LocalProtocolError("received data after the end of the stream")
        if self._their_error is None or not data:
            self._reader.feed(bytes(data))

    def next_event(self) -> InT | ConnectionClosed | NeedData:
        """The next event from the received bytes, or NEED_DATA.

        Returns:
            A message from the peer; :class:`ConnectionClosed` once the peer closed
            its end (again on every later call); or NEED_DATA.

        Raises:
            ProtocolError: the peer broke the protocol. The connection stays broken:
                every later call raises again. See Rule 5 for what may still be sent.
        """
        if self._their_error is not None:
            raise ProtocolError(*self._their_error.args)
        try:
            body = self._reader.next_body()
            if body is None and not self._reader.eof:
                return NEED_DATA
            event: Event = ConnectionClosed() if body is None else self._decode(body)
            try:
                after = self._check(Direction.RECEIVE, event)
            except _RefusalError as refusal:
                raise ProtocolError(str(refusal)) from None
        except ProtocolError as error:
            self._their_error = error
            raise
        self._commit(Direction.RECEIVE, event, after)
        if type(event) is Request and body is not None:
            self._request, self._request_body = event, body
        # The transition table admits only the peer's messages (Rule 1), so ``event``
        # is an InT or the end of the stream.
        return cast("InT | ConnectionClosed", event)

    def send(self, message: Message, body: bytes | None = None) -> bytes:
        """The bytes of the frame carrying ``message``, for the driver to write.

        ``body``: the message already encoded for this peer's version, by a caller
        that encodes one change for many peers (:mod:`tenure._protocol.fanout`).

        Raises:
            LocalProtocolError: the message is not allowed now, or a field cannot be
                encoded (the error names it). Nothing changed.
            FrameTooLargeError: the frame exceeds the peer's max_frame_size. Nothing
                changed.
        """
        # An older peer gets the layouts it knows; first: the rules below may trust
        # the field types.
        if body is None:
            version = self._version
            older = version is not None and version < PROTOCOL_VERSION
            body = encode_message(for_version(message, version) if older else message)
        try:
            after = self._check(Direction.SEND, message)
        except _RefusalError as refusal:
            raise LocalProtocolError(str(refusal)) from None
        data = encode_frame(body, limit=self._peer_max_frame_size)
        self._commit(Direction.SEND, message, after)
        return data

    # -- the rules ----------------------------------------------------------------------

    def _check(self, direction: Direction, event: Event) -> State:
        """The state ``event`` leads to, or _RefusalError saying which rule forbids it."""
        # Exact types (messages are never subclassed): the table is keyed by them too.
        kind = type(event)
        after = (self._may_send if direction is Direction.SEND else self._may_receive).get(kind)
        if after is None:
            sender = self._side if direction is Direction.SEND else _other(self._side)
            raise _RefusalError(
                f"the {sender.value} may not send {kind.__name__} in state {self._state.value}"
            )
        if direction is Direction.SEND and self._their_error is not None:
            if kind not in LAST_WORDS:  # Rule 5
                raise _RefusalError(
                    f"after the peer's protocol error only {_LAST_WORDS} may be sent"
                )
            after = State.CLOSED
        if kind is Push or kind is Pong:
            return after  # the most common event that is not an answer: nothing more to check
        if type(event) is Request and event.request_id in self._in_flight:  # Rule 2
            raise _RefusalError(f"request id {event.request_id} is already in flight")
        if type(event) is Reply or type(event) is Failure:
            command = self._in_flight.get(event.request_id)
            if command is None:  # Rule 2
                raise _RefusalError(
                    f"{kind.__name__} for request id {event.request_id}, not in flight"
                )
            if isinstance(event, Reply) and not reply_fits(command, event.value):  # Rule 3
                raise _RefusalError(
                    f"Reply to request {event.request_id} ({command.__name__}) cannot be "
                    f"{type(event.value).__name__}"
                )
        if type(event) is Hello or type(event) is Welcome:
            self._check_handshake(direction, event)
        return after

    def _check_handshake(self, direction: Direction, event: Hello | Welcome) -> None:
        """Rule 4, and the frame sizes the handshake announces."""
        if isinstance(event, Hello):
            if direction is Direction.SEND and event.version not in SUPPORTED_VERSIONS:
                raise _RefusalError(f"this client does not speak protocol version {event.version}")
            if event.version not in SUPPORTED_VERSIONS:
                return  # the server answers Refused; nothing else of it is read
        elif event.version != self._version:
            raise _RefusalError(
                f"Welcome is for version {event.version}; Hello was {self._version}"
            )
        elif self._version not in SUPPORTED_VERSIONS:
            raise _RefusalError(f"version {self._version} is not supported: answer Refused")
        if not MIN_MAX_FRAME_SIZE <= event.max_frame_size <= MAX_MAX_FRAME_SIZE:
            raise _RefusalError(
                f"{type(event).__name__}.max_frame_size must be in "
                f"[{MIN_MAX_FRAME_SIZE}, {MAX_MAX_FRAME_SIZE}], got {event.max_frame_size}"
            )

    def _commit(self, direction: Direction, event: Event, after: State) -> None:
        """Apply an event that passed ``_check``."""
        if type(event) is Push:
            pass  # the most common event that is not an answer
        elif type(event) is Request:
            self._in_flight[event.request_id] = type(event.command)
        elif type(event) is Reply or type(event) is Failure:
            del self._in_flight[event.request_id]
        elif isinstance(event, Hello):
            self._version = event.version
            if direction is Direction.RECEIVE:
                self._peer_max_frame_size = event.max_frame_size
        elif isinstance(event, Welcome) and direction is Direction.RECEIVE:
            self._peer_max_frame_size = event.max_frame_size
        if after is not self._state:
            self._state = after
            self._may_send, self._may_receive = self._moves[after]


_Moves = dict[type, State]
_MOVES: dict[Side, dict[State, tuple[_Moves, _Moves]]] = {}


def _moves_of(side: Side) -> dict[State, tuple[_Moves, _Moves]]:
    """TRANSITIONS[side] regrouped by state: (what may be sent, what may be received).

    The rules look up every event in the moves of the current state; a lookup by
    message type alone is much cheaper than one by a (state, direction, type) key.
    """
    if side not in _MOVES:
        moves: dict[State, tuple[_Moves, _Moves]] = {state: ({}, {}) for state in State}
        for (state, direction, kind), after in TRANSITIONS[side].items():
            moves[state][0 if direction is Direction.SEND else 1][kind] = after
        _MOVES[side] = moves
    return _MOVES[side]


_LAST_WORDS: Final = " or ".join(sorted(kind.__name__ for kind in LAST_WORDS))


def _other(side: Side) -> Side:
    return Side.SERVER if side is Side.CLIENT else Side.CLIENT


@final
class ClientConnection(ConnectionEnd[ServerMessage]):
    """The client's end: sends Hello, Request, Ping; receives the server's messages."""

    def __init__(self, *, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        """See :class:`ConnectionEnd`."""
        super().__init__(Side.CLIENT, max_frame_size=max_frame_size)


@final
class ServerConnection(ConnectionEnd[ClientMessage]):
    """The server's end: receives Hello, Request, Ping; sends the server's messages.

    Every Request before a successful handshake (Welcome sent) is a ProtocolError.
    """

    def __init__(self, *, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        """See :class:`ConnectionEnd`."""
        super().__init__(Side.SERVER, max_frame_size=max_frame_size)

    def next_ping(self) -> Ping | NeedData:
        """The next message if it is a Ping, whole in the bytes received (read as
        :meth:`next_event` reads it); else NEED_DATA, and nothing is read: a server
        answers Pings while the request before them is owed its answer, and reads
        what else follows once it is answered."""
        if self._their_error is not None:
            return NEED_DATA
        body = self._reader.next_body_if(_PING_HEAD)
        if body is None:
            return NEED_DATA
        try:
            event = decode_message(body)
            if type(event) is not Ping:  # (a future layout that starts alike)
                raise ProtocolError(f"expected a Ping, got {type(event).__name__}")
            after = self._check(Direction.RECEIVE, event)
        except _RefusalError as refusal:
            self._their_error = ProtocolError(str(refusal))
            raise self._their_error from None
        except ProtocolError as error:
            self._their_error = error
            raise
        self._commit(Direction.RECEIVE, event, after)
        return event

    def command_bytes(self, request: Request) -> bytes | None:
        """The bytes of ``request``'s command as the client encoded them in its frame, so
        that a journal logs them as they are instead of encoding the command again.

        None unless ``request`` is the last Request :meth:`next_event` returned, from a
        client of this protocol version (an older one's layouts are read, and logged,
        as the codec makes them): then the command is to be encoded.
        """
        if request is not self._request or self._version != PROTOCOL_VERSION:
            return None
        return _command_in(self._request_body)


#: How a Ping's frame body starts: an array of two (``[3, nonce]``) and the Ping's tag.
_PING_HEAD: Final = b"\x92\x03"
#: How a Request's frame body starts: an array of three (``[2, request_id, command]``)
#: and the Request's tag.
_REQUEST_HEAD: Final = b"\x93\x02"
#: Where the command starts in a Request's body, by the first byte of its request id
#: (a positive fixint, or a uint 8, 16, 32 or 64).
_COMMAND_START: Final = {0xCC: 4, 0xCD: 5, 0xCE: 7, 0xCF: 11}


def _command_in(body: bytes) -> bytes | None:
    """The command's bytes in ``body``, the frame body of a Request (decoded whole
    already, so the command is the rest of it after the request id), as the peer
    encoded them; None if ``body`` does not start as this codec lays a Request out
    (a whole array of three), and the command is to be encoded afresh."""
    if not body.startswith(_REQUEST_HEAD) or len(body) < 4:
        return None
    first = body[2]
    start = 3 if first < 0x80 else _COMMAND_START.get(first, 0)
    return body[start:] if start else None
