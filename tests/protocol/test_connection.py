"""Both ends of a connection, back to back: handshake, pipelining, pushes, and every rule."""

from __future__ import annotations

import functools
import itertools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tenure._core import (
    Acquire,
    AcquireResult,
    AcquireStatus,
    CreateSession,
    DescribeNode,
    Granted,
    NodeConfig,
    NodeDescription,
    Release,
    SessionEnded,
    SessionInfo,
    UpdateSemaphore,
    WatchFired,
)
from tenure._protocol import (
    MIN_MAX_FRAME_SIZE,
    NEED_DATA,
    PROTOCOL_VERSION,
    ClientConnection,
    ConnectionClosed,
    ConnectionEnd,
    Failure,
    FrameTooLargeError,
    GoingAway,
    Hello,
    LocalProtocolError,
    Message,
    Ping,
    Pong,
    Push,
    Refused,
    Reply,
    Request,
    ServerConnection,
    Side,
    State,
    Welcome,
    version_refusal,
)
from tenure._protocol.state import TRANSITIONS, Direction
from tenure.errors import ErrorCode, ProtocolError, error_from_code
from tests.compiled import compiled_build
from tests.protocol.helpers import ConnectionPair, drain, frame_of, one_byte_at_a_time, raw_frame

# -- the happy path ---------------------------------------------------------------------


def states(pair: ConnectionPair) -> tuple[State, State]:
    """(client state, server state); a call, so mypy does not pin the state to a literal."""
    return pair.client.state, pair.server.state


def test_handshake_opens_both_ends():
    pair = ConnectionPair()
    assert states(pair) == (State.HANDSHAKE, State.HANDSHAKE)
    pair.handshake(Hello(client_name="c", token="secret"), Welcome(server_name="s"))
    assert states(pair) == (State.OPEN, State.OPEN)
    assert pair.client.version == pair.server.version == PROTOCOL_VERSION


def test_a_ping_is_read_ahead_of_nothing_else():
    """``next_ping`` (a server owes a request its answer, and answers Pings meanwhile)
    reads the next frame only if it is a Ping: a Request before it, and the end of the
    stream, are left to ``next_event``, in order."""
    pair = ConnectionPair()
    pair.handshake(Hello(), Welcome())
    client, server = pair.client, pair.server
    server.receive_data(client.send(Ping(1)) + client.send(Ping(2)))
    assert server.next_ping() == Ping(1)
    assert server.next_ping() == Ping(2)
    assert server.next_ping() is NEED_DATA
    third = client.send(Ping(3))
    server.receive_data(third[:5])  # (a part of it: not read yet)
    assert server.next_ping() is NEED_DATA
    server.receive_data(third[5:])
    assert server.next_ping() == Ping(3)
    server.receive_data(client.send(Request(8, DescribeNode("n"))) + client.send(Ping(4)))
    server.receive_data(b"")
    assert server.next_ping() is NEED_DATA  # a Request first: Ping 4 waits behind it
    assert server.in_flight == {}
    [request, ping, closed] = drain(server)
    assert isinstance(request, Request)
    assert request.request_id == 8
    assert ping == Ping(4)
    assert isinstance(closed, ConnectionClosed)
    assert server.next_ping() is NEED_DATA  # (at the end: nothing)


def test_each_end_learns_what_frame_size_the_other_accepts():
    pair = ConnectionPair(client_max=MIN_MAX_FRAME_SIZE, server_max=2 * MIN_MAX_FRAME_SIZE)
    assert pair.client.peer_max_frame_size == MIN_MAX_FRAME_SIZE  # before anyone says so
    pair.handshake(
        Hello(max_frame_size=pair.client.max_frame_size),
        Welcome(max_frame_size=pair.server.max_frame_size),
    )
    assert pair.server.peer_max_frame_size == MIN_MAX_FRAME_SIZE
    assert pair.client.peer_max_frame_size == 2 * MIN_MAX_FRAME_SIZE


def test_pipelined_requests_answered_out_of_order_with_pushes_in_between():
    pair = ConnectionPair()
    pair.handshake()
    config = NodeConfig()
    requests = [
        Request(1, CreateSession("n", b"key")),
        Request(2, Acquire(1, "lock", 1, request_id=10)),
        Request(3, DescribeNode("n")),
        Request(4, Release(1, "other")),
        Request(5, Acquire(1, "lock2", 1, request_id=11)),
    ]
    # All five go out before any answer comes back, in one write.
    assert pair.send(pair.client, requests) == requests
    assert set(pair.client.in_flight) == set(pair.server.in_flight) == {1, 2, 3, 4, 5}
    answers: list[Message] = [
        Reply(3, NodeDescription("n", config, 1, 0)),
        Push(Granted(1, 10, "lock", token=7, count=1)),
        Reply(1, SessionInfo(1, 30.0, 1)),
        Failure(5, ErrorCode.NOT_FOUND, "no node"),
        Push(WatchFired(1, 3, "lock")),
        Reply(2, AcquireResult(AcquireStatus.QUEUED)),
        Pong(1),
        Reply(4, False),
        Push(SessionEnded(1, ErrorCode.SESSION_EXPIRED, "expired")),
    ]
    assert pair.send(pair.client, Ping(1)) == [Ping(1)]
    assert pair.send(pair.server, answers) == answers
    assert dict(pair.client.in_flight) == dict(pair.server.in_flight) == {}
    error = error_from_code(ErrorCode.NOT_FOUND, "no node")
    assert type(error).__name__ == "NotFoundError"


def _conversation() -> tuple[list[Message], list[Message]]:
    to_server: list[Message] = [Hello(client_name="c")]
    to_server += [
        Request(i, Acquire(1, f"lock-{i}", i + 1, request_id=i, data=bytes(i))) for i in range(8)
    ]
    to_client: list[Message] = [Welcome(server_name="s", instance_id=b"\x01" * 16)]
    to_client += [
        Reply(i, AcquireResult(AcquireStatus.GRANTED, i, i + 1)) for i in range(7, -1, -1)
    ]
    to_client += [
        Push(Granted(1, 9, "x" * 300, 1, 1, 2.5)),
        GoingAway(ErrorCode.UNAVAILABLE, "bye"),
    ]
    return to_server, to_client


def _deliver(split: Any) -> tuple[list[Any], list[Any]]:
    pair = ConnectionPair()
    to_server, to_client = _conversation()
    got_server = pair.send(pair.client, to_server[0], split=split)
    got_client = pair.send(pair.server, to_client[0], split=split)
    got_server += pair.send(pair.client, to_server[1:], split=split)
    got_client += pair.send(pair.server, to_client[1:], split=split)
    return got_server, got_client


def test_one_byte_at_a_time_gives_the_same_events():
    assert _deliver(one_byte_at_a_time) == _conversation()


@given(st.data())
def test_any_split_gives_the_same_events(data):
    def split(payload: bytes) -> list[bytes]:
        cuts = sorted(data.draw(st.sets(st.integers(1, max(1, len(payload) - 1)), max_size=12)))
        edges = [0, *cuts, len(payload)]
        return [payload[a:b] for a, b in itertools.pairwise(edges)]

    assert _deliver(split) == _conversation()


def test_going_away_lets_answers_and_crossed_requests_through():
    pair = ConnectionPair()
    pair.handshake()
    pair.send(pair.client, Request(1, Release(1, "a")))
    crossed = pair.client.send(Request(2, Release(1, "b")))  # not yet delivered
    assert pair.send(pair.server, GoingAway(ErrorCode.UNAVAILABLE, "shutting down")) == [
        GoingAway(ErrorCode.UNAVAILABLE, "shutting down")
    ]
    assert pair.server.state is pair.client.state is State.CLOSING
    with pytest.raises(LocalProtocolError, match="may not send Request in state CLOSING"):
        pair.client.send(Request(3, Release(1, "c")))
    pair.server.receive_data(crossed)
    assert drain(pair.server) == [Request(2, Release(1, "b"))]
    answers: list[Message] = [Reply(1, True), Failure(2, ErrorCode.UNAVAILABLE, "going away")]
    assert pair.send(pair.server, answers) == answers
    pair.client.receive_data(b"")
    assert drain(pair.client) == [ConnectionClosed()]
    assert states(pair)[0] is State.CLOSED


def test_a_refused_hello_closes_the_connection():
    pair = ConnectionPair()
    pair.send(pair.client, Hello(token="wrong"))
    refused = Refused(ErrorCode.AUTHENTICATION, "bad token")
    assert pair.send(pair.server, refused) == [refused]
    assert pair.client.state is pair.server.state is State.CLOSED


def test_a_server_may_refuse_before_any_hello():
    pair = ConnectionPair()
    refused = Refused(ErrorCode.UNAVAILABLE, "too many connections")
    assert pair.send(pair.server, refused) == [refused]
    assert pair.client.state is State.CLOSED


# -- versions (Rule 4) ------------------------------------------------------------------


def test_a_foreign_version_is_refused_clearly():
    server = ServerConnection()
    # A version-14 Hello may have any layout after the version; nothing else is read.
    server.receive_data(frame_of([1, 14, {"whatever": "v14 sends"}, [1, 2, 3]]))
    [hello] = drain(server)
    assert hello == Hello(14, max_frame_size=MIN_MAX_FRAME_SIZE)
    refusal = version_refusal(hello)
    assert refusal == Refused(
        ErrorCode.UNSUPPORTED,
        "protocol version 14 is not supported; "
        "this server speaks 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13",
    )
    with pytest.raises(LocalProtocolError, match="version 14 is not supported"):
        server.send(Welcome(version=14))
    with pytest.raises(LocalProtocolError, match="Welcome is for version 13; Hello was 14"):
        server.send(Welcome())
    server.send(refusal)
    assert server.state is State.CLOSED
    assert version_refusal(Hello()) is None
    assert version_refusal(Hello(version=1)) is None
    assert version_refusal(Hello(version=2)) is None
    assert version_refusal(Hello(version=3)) is None
    assert version_refusal(Hello(version=4)) is None
    assert version_refusal(Hello(version=5)) is None
    assert version_refusal(Hello(version=6)) is None
    assert version_refusal(Hello(version=7)) is None
    assert version_refusal(Hello(version=8)) is None
    assert version_refusal(Hello(version=9)) is None
    assert version_refusal(Hello(version=10)) is None
    assert version_refusal(Hello(version=12)) is None
    assert version_refusal(Hello(version=13)) is None


def test_the_client_only_speaks_its_versions():
    client = ClientConnection()
    with pytest.raises(LocalProtocolError, match="does not speak protocol version 14"):
        client.send(Hello(version=14))
    assert client.state is State.HANDSHAKE


def test_a_welcome_for_another_version_is_a_protocol_error():
    client = ClientConnection()
    client.send(Hello())
    client.receive_data(raw_frame(Welcome(version=1)))
    with pytest.raises(ProtocolError, match="Welcome is for version 1; Hello was 13"):
        client.next_event()


@pytest.mark.parametrize("size", [0, MIN_MAX_FRAME_SIZE - 1, 2**32])
def test_an_announced_frame_size_must_be_sane(size):
    server = ServerConnection()
    server.receive_data(raw_frame(Hello(max_frame_size=size)))
    with pytest.raises(ProtocolError, match=r"Hello\.max_frame_size must be in"):
        server.next_event()
    pair = ConnectionPair()
    pair.send(pair.client, Hello())
    with pytest.raises(LocalProtocolError, match=r"Welcome\.max_frame_size must be in"):
        pair.server.send(Welcome(max_frame_size=size))


# -- request ids and reply types (Rules 2 and 3) ----------------------------------------


def _open_pair() -> ConnectionPair:
    pair = ConnectionPair()
    pair.handshake()
    return pair


def test_a_request_id_in_flight_cannot_be_reused():
    pair = _open_pair()
    pair.send(pair.client, Request(1, Release(1, "a")))
    with pytest.raises(LocalProtocolError, match="request id 1 is already in flight"):
        pair.client.send(Request(1, Release(1, "b")))
    pair.server.receive_data(raw_frame(Request(1, Release(1, "b"))))
    with pytest.raises(ProtocolError, match="request id 1 is already in flight"):
        pair.server.next_event()


def test_an_id_is_free_again_once_answered():
    pair = _open_pair()
    for _ in range(3):
        pair.send(pair.client, Request(1, Release(1, "a")))
        pair.send(pair.server, Reply(1, True))


def test_an_answer_must_be_for_a_request_in_flight():
    pair = _open_pair()
    with pytest.raises(LocalProtocolError, match="Reply for request id 9, not in flight"):
        pair.server.send(Reply(9, None))
    pair.client.receive_data(raw_frame(Failure(9, ErrorCode.INTERNAL, "?")))
    with pytest.raises(ProtocolError, match="Failure for request id 9, not in flight"):
        pair.client.next_event()


def test_a_reply_must_have_the_type_its_command_replies():
    pair = _open_pair()
    pair.send(pair.client, Request(1, Release(1, "a")))
    with pytest.raises(LocalProtocolError, match=r"Reply to request 1 \(Release\) cannot be"):
        pair.server.send(Reply(1, None))
    pair.client.receive_data(raw_frame(Reply(1, SessionInfo(1, 1.0, 1))))
    with pytest.raises(ProtocolError, match=r"\(Release\) cannot be SessionInfo"):
        pair.client.next_event()


# -- sizes, errors and the end of the stream --------------------------------------------


def test_a_frame_too_large_for_the_peer_is_refused_and_nothing_changes():
    pair = ConnectionPair(server_max=MIN_MAX_FRAME_SIZE)
    pair.handshake(welcome=Welcome(max_frame_size=MIN_MAX_FRAME_SIZE))
    big = Request(1, UpdateSemaphore(1, "n", b"x" * MIN_MAX_FRAME_SIZE))
    with pytest.raises(FrameTooLargeError):
        pair.client.send(big)
    assert pair.client.state is State.OPEN
    assert dict(pair.client.in_flight) == {}
    assert pair.send(pair.client, Request(1, Release(1, "a"))) == [Request(1, Release(1, "a"))]


def test_an_oversized_prefix_fails_at_once():
    server = ServerConnection(max_frame_size=MIN_MAX_FRAME_SIZE)
    server.receive_data((MIN_MAX_FRAME_SIZE + 1).to_bytes(4, "big"))
    with pytest.raises(ProtocolError, match="announced"):
        server.next_event()


def test_a_broken_peer_stays_broken_and_may_only_be_told_why():
    pair = _open_pair()
    pair.send(pair.client, Request(1, Release(1, "a")))
    pair.server.receive_data(frame_of([2, "not an id", [13, 1]]))
    with pytest.raises(ProtocolError, match=r"Request\.request_id"):
        pair.server.next_event()
    assert pair.server.their_error is not None
    pair.server.receive_data(raw_frame(Ping(1)) * 1000)  # more bytes change nothing ...
    assert pair.server._reader.buffered == 0  # ... and are not kept
    with pytest.raises(ProtocolError, match=r"Request\.request_id"):
        pair.server.next_event()
    with pytest.raises(LocalProtocolError, match="only GoingAway or Refused may be sent"):
        pair.server.send(Reply(1, True))
    last_word = GoingAway(ErrorCode.PROTOCOL, "Request.request_id must be a uint")
    assert pair.send(pair.server, last_word) == [last_word]
    assert pair.server.state is State.CLOSED
    with pytest.raises(LocalProtocolError, match="in state CLOSED"):
        pair.server.send(GoingAway(ErrorCode.PROTOCOL, "again"))


def test_a_malformed_hello_can_be_refused():
    server = ServerConnection()
    server.receive_data(frame_of([1, 1, 42, None, 1 << 20]))
    with pytest.raises(ProtocolError, match=r"Hello\.client_name: expected a str"):
        server.next_event()
    server.send(Refused(ErrorCode.PROTOCOL, "bad Hello"))
    assert server.state is State.CLOSED


def test_end_of_stream_is_an_event_that_repeats_and_keeps_what_was_in_flight():
    pair = _open_pair()
    pair.send(pair.client, [Request(1, Release(1, "a")), Request(2, Release(1, "b"))])
    pair.client.receive_data(b"")
    assert pair.client.next_event() == ConnectionClosed()
    assert pair.client.next_event() == ConnectionClosed()
    assert pair.client.state is State.CLOSED
    assert set(pair.client.in_flight) == {1, 2}  # the driver fails these
    with pytest.raises(LocalProtocolError, match="after the end of the stream"):
        pair.client.receive_data(b"late")
    with pytest.raises(LocalProtocolError, match="in state CLOSED"):
        pair.client.send(Ping(1))


def test_frames_before_the_end_of_stream_are_still_delivered():
    server = ServerConnection()
    server.receive_data(raw_frame(Hello()) + b"\x00")
    server.receive_data(b"")
    assert server.next_event() == Hello()
    with pytest.raises(ProtocolError, match="middle of a frame"):
        server.next_event()


# -- every (side, state, direction, message type), as the table says (h2 style) --------

SAMPLES: dict[type, Message] = {
    Hello: Hello(),
    Request: Request(2, Release(1, "x")),
    Ping: Ping(1),
    Welcome: Welcome(),
    Refused: Refused(ErrorCode.UNAVAILABLE, "no"),
    Reply: Reply(1, True),
    Failure: Failure(1, ErrorCode.NOT_FOUND, "no"),
    Push: Push(WatchFired(1, 1, "x")),
    Pong: Pong(1),
    GoingAway: GoingAway(ErrorCode.UNAVAILABLE, "bye"),
}


def _in_state(side: Side, state: State) -> ConnectionEnd[Any]:
    """The ``side`` end of a connection in ``state``; request 1 (a Release) in flight if open."""
    pair = ConnectionPair()
    conn = pair.client if side is Side.CLIENT else pair.server
    if state is State.CLOSED:
        pair.send(pair.server, Refused(ErrorCode.UNAVAILABLE, "no"))
        return conn
    if state is State.HANDSHAKE:
        return conn
    pair.send(pair.client, Hello())
    if state is State.GREETING:
        return conn
    pair.send(pair.server, Welcome())
    pair.send(pair.client, Request(1, Release(1, "x")))
    if state is State.CLOSING:
        pair.send(pair.server, GoingAway(ErrorCode.UNAVAILABLE, "bye"))
    return conn


CASES = [
    (side, state, direction, kind)
    for side in Side
    for state in State
    for direction in Direction
    for kind in SAMPLES
]


@pytest.mark.parametrize(
    ("side", "state", "direction", "kind"),
    CASES,
    ids=[f"{r.value}-{s.value}-{d.value}-{k.__name__}" for r, s, d, k in CASES],
)
def test_every_state_and_message_does_what_the_table_says(side, state, direction, kind):
    conn = _in_state(side, state)
    assert conn.state is state
    message = SAMPLES[kind]
    expected = TRANSITIONS[side].get((state, direction, kind))
    if direction is Direction.SEND:
        if expected is None:
            with pytest.raises(LocalProtocolError, match=f"may not send {kind.__name__}"):
                conn.send(message)
            assert conn.state is state
        else:
            assert conn.send(message) == raw_frame(message)
    else:
        conn.receive_data(raw_frame(message))
        if expected is None:
            with pytest.raises(ProtocolError, match=f"may not send {kind.__name__}"):
                conn.next_event()
        else:
            assert conn.next_event() == message
    if expected is not None:
        assert conn.state is expected


def test_the_server_refuses_every_request_before_a_welcome():
    for state in (State.HANDSHAKE, State.GREETING):
        server = _in_state(Side.SERVER, state)
        server.receive_data(raw_frame(Request(1, Release(1, "x"))))
        with pytest.raises(
            ProtocolError, match=f"client may not send Request in state {state.value}"
        ):
            server.next_event()


@pytest.mark.parametrize("side", list(Side))
def test_the_end_of_stream_is_allowed_in_every_state(side):
    for state in State:
        conn = _in_state(side, state)
        conn.receive_data(b"")
        assert conn.next_event() == ConnectionClosed()
        assert conn.state is State.CLOSED
        assert conn.next_event() is not NEED_DATA


# -- random conversations ---------------------------------------------------------------


@given(st.data())
def test_random_conversations_arrive_whole_and_both_ends_agree(data):
    """Random interleavings of requests, pings, answers in any order and pushes."""
    pair = _open_pair()
    next_id = itertools.count()
    client_ids: set[int] = set()
    for _ in range(data.draw(st.integers(1, 25))):
        action = data.draw(st.sampled_from(["request", "ping", "answer", "push", "pong"]))
        batch: list[Message]
        if action == "request":
            ids = [next(next_id) for _ in range(data.draw(st.integers(1, 4)))]
            batch = [Request(i, Release(1, "n")) for i in ids]
            client_ids |= set(ids)
            sender: ConnectionEnd[Any] = pair.client
        elif action == "ping":
            batch, sender = [Ping(data.draw(st.integers(0, 2**64 - 1)))], pair.client
        elif action == "answer" and client_ids:
            answerable = st.sampled_from(sorted(client_ids))
            chosen = data.draw(st.lists(answerable, min_size=1, unique=True))
            batch = [
                Reply(i, data.draw(st.booleans())) if i % 2 else Failure(i, ErrorCode.NOT_FOUND, "")
                for i in chosen
            ]
            client_ids -= set(chosen)
            sender = pair.server
        else:
            batch, sender = [Push(WatchFired(1, data.draw(st.integers(0, 9)), "n"))], pair.server
        split = functools.partial(_cut, pieces=data.draw(st.integers(1, 5)))
        assert pair.send(sender, batch, split=split) == batch
        assert set(pair.client.in_flight) == set(pair.server.in_flight) == client_ids
    assert states(pair) == (State.OPEN, State.OPEN)


def _cut(data: bytes, pieces: int) -> list[bytes]:
    size = max(1, -(-len(data) // pieces))
    return [data[i : i + size] for i in range(0, len(data), size)]


@pytest.mark.parametrize(
    ("case", "make"),
    [
        ("Request([1], ...)", lambda: Request([1], Release(1, "a"))),  # type: ignore[arg-type]
        ("Reply({}, True)", lambda: Reply({}, True)),  # type: ignore[arg-type]
        ("Failure(1, 'NOT_FOUND', 'x')", lambda: Failure(1, "NOT_FOUND", "x")),  # type: ignore[arg-type]
        ("Hello(max_frame_size='big')", lambda: Hello(max_frame_size="big")),  # type: ignore[arg-type]
        ("Ping(-1)", lambda: Ping(-1)),
    ],
)
def test_a_badly_typed_message_is_a_local_error_in_any_state(case, make):
    try:
        message = make()
    except TypeError:
        # The compiled build (mypyc) checks a field's declared type when the message
        # is made, so such a message never reaches send.
        assert compiled_build()
        return
    for side, state in itertools.product(Side, State):
        conn = _in_state(side, state)
        with pytest.raises(LocalProtocolError):
            conn.send(message)
        assert conn.state is state
