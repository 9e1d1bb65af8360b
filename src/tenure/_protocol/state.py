"""The connection state machine, as data. [compiled]

Theory of operation
-------------------
A connection has one :class:`State`, kept by each end. Both ends walk the same
states, the server a little ahead: it leaves GREETING when it *sends* Welcome, the
client when it *receives* it. For each side, :data:`TRANSITIONS` lists every
(state, direction, message type) that is allowed, and the state it leads to.
Anything not listed is an error: :class:`~tenure._protocol.errors.LocalProtocolError`
when this side tries to send it, :class:`~tenure.errors.ProtocolError` when the
peer sent it. docs/protocol.md shows these tables (rendered by :func:`render`;
a test keeps the two equal).

::

    HANDSHAKE --Hello--> GREETING --Welcome--> OPEN --GoingAway--> CLOSING
        |                    |                  |                    |
        +------Refused-------+                  +-- end of stream ---+--> CLOSED
        (Refused, or the end of the stream, from any state leads to CLOSED)

Rule 1: everything that decides whether a message may go is in this file. The
tables say which message types; the rules they cannot say are these, and
:class:`~tenure._protocol.connection.ConnectionEnd` enforces each in one place:

Rule 2 (request ids): a Request's id must not be in flight (sent and not yet
answered); a Reply or Failure must answer a request in flight, and ends it.

Rule 3 (reply types): a Reply's value has the type its request's command replies
(:data:`~tenure._protocol.payloads.REPLY_TYPES`).

Rule 4 (versions): a client sends only a version it speaks; Welcome carries the
Hello's version, which the server must speak (else it answers Refused).

Rule 5 (after the peer broke the protocol): receiving is over, ``next_event``
raises again; this side may send one *last word*, a Refused or GoingAway allowed
in the current state, which leads to CLOSED. (So a server can still tell a broken
client why it is being dropped.)

Rule 6 (end of stream): ConnectionClosed can happen in any state and leads to
CLOSED; bytes in the middle of a frame at that point are a ProtocolError.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Final

from tenure._protocol.messages import (
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
    Welcome,
)

__all__ = ["LAST_WORDS", "TRANSITIONS", "Direction", "Side", "State", "render"]


class Side(enum.Enum):
    """Which end of the connection this is."""

    CLIENT = "client"
    SERVER = "server"


class State(enum.Enum):
    """Where a connection is in its life."""

    HANDSHAKE = "HANDSHAKE"  # nothing yet: the client's Hello is due
    GREETING = "GREETING"  # Hello sent/received: Welcome or Refused is due
    OPEN = "OPEN"  # requests, answers and pushes flow
    CLOSING = "CLOSING"  # GoingAway sent/received: no new requests, answers may follow
    CLOSED = "CLOSED"  # Refused, end of stream, or a last word after a protocol error


class Direction(enum.Enum):
    """Whether this side sends the message or receives it."""

    SEND = "send"
    RECEIVE = "receive"


_H, _G, _O, _C, _X = State.HANDSHAKE, State.GREETING, State.OPEN, State.CLOSING, State.CLOSED
_SEND, _RECV = Direction.SEND, Direction.RECEIVE

#: One side's table: (state, direction, message type) -> next state.
Table = Mapping[tuple[State, Direction, type], State]

_ANSWERS: Final = (Reply, Failure, Push, Pong)

_CLIENT: Final[dict[tuple[State, Direction, type], State]] = {
    (_H, _SEND, Hello): _G,
    (_H, _RECV, Refused): _X,  # a server may refuse before the Hello (e.g. overload)
    (_G, _RECV, Welcome): _O,
    (_G, _RECV, Refused): _X,
    (_O, _SEND, Request): _O,
    (_O, _SEND, Ping): _O,
    **{(_O, _RECV, kind): _O for kind in _ANSWERS},
    (_O, _RECV, GoingAway): _C,
    **{(_C, _RECV, kind): _C for kind in (*_ANSWERS, GoingAway)},
}

_SERVER: Final[dict[tuple[State, Direction, type], State]] = {
    (_H, _RECV, Hello): _G,
    (_H, _SEND, Refused): _X,
    (_G, _SEND, Welcome): _O,
    (_G, _SEND, Refused): _X,
    (_O, _RECV, Request): _O,
    (_O, _RECV, Ping): _O,
    **{(_O, _SEND, kind): _O for kind in _ANSWERS},
    (_O, _SEND, GoingAway): _C,
    # Requests and pings the client sent before it read our GoingAway still arrive;
    # the server answers each (a Request with Failure(UNAVAILABLE)).
    (_C, _RECV, Request): _C,
    (_C, _RECV, Ping): _C,
    **{(_C, _SEND, kind): _C for kind in (*_ANSWERS, GoingAway)},
}

# Rule 6, as data: the end of the stream is allowed in every state.
for _table in (_CLIENT, _SERVER):
    _table.update({(state, _RECV, ConnectionClosed): _X for state in State})

#: Every allowed (state, direction, message type) of each side, and the state it leads to.
TRANSITIONS: Final[Mapping[Side, Table]] = {Side.CLIENT: _CLIENT, Side.SERVER: _SERVER}

#: What may still be sent after the peer broke the protocol (Rule 5).
LAST_WORDS: Final = frozenset({Refused, GoingAway})


def render(side: Side) -> str:
    """One side's table as the Markdown docs/protocol.md shows it."""
    lines = ["| state | sends | receives |", "| --- | --- | --- |"]
    for state in State:
        cells = []
        for direction in Direction:
            moves = [
                kind.__name__ if after is state else f"{kind.__name__} → {after.value}"
                for (before, way, kind), after in TRANSITIONS[side].items()
                if before is state and way is direction
            ]
            cells.append(", ".join(moves) or "—")
        lines.append(f"| {state.value} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)
