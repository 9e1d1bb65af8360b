"""Fuzzing a real ``tenure serve`` end to end: whatever a client sends, the server copes.

One server process serves the whole module. Each example opens a raw connection,
sends bytes (random bytes; frames of random msgpack; valid messages mutated: fields
swapped, cut, extended, replaced, unknown tags, bad lengths; well-typed requests of
random commands; each with or without a valid Hello first), and checks that the
server:

* only ever sends well-formed frames of server messages (decoded with the codec);
* does what the reference codec says it must (:func:`predict` runs the same input
  through a ``ServerConnection``): a Welcome for a valid Hello, one answer per
  request (never ``Failure(INTERNAL)``), one Pong per Ping in order; on a protocol
  error at most a last word (Refused or GoingAway, PROTOCOL) and then the end of
  the connection, without waiting for the client to hang up;
* never hangs: every wait is bounded.

After each example a separate, well-behaved client must still get a full round
trip (handshake, node, session, acquire, release), and the server's log must hold
no traceback and no error.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from dataclasses import fields as dc_fields
from pathlib import Path
from typing import Any, get_type_hints

import msgpack
import pytest
from hypothesis import HealthCheck, currently_in_test_context, event, given, settings
from hypothesis import strategies as st

from tenure._core import (
    MAX_COUNT,
    Acquire,
    AcquireStatus,
    AlterNode,
    CloseSession,
    Command,
    CreateNode,
    CreateSemaphore,
    CreateSession,
    DeleteSemaphore,
    DescribeNode,
    DescribeSemaphore,
    DropNode,
    GetNodeAnnex,
    NodeConfig,
    Release,
    SessionInfo,
    SetNodeAnnex,
)
from tenure._protocol import (
    MAX_MAX_FRAME_SIZE,
    MIN_MAX_FRAME_SIZE,
    NEED_DATA,
    ClientConnection,
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
    ServerConnection,
    Welcome,
    version_refusal,
)
from tenure._protocol.frames import FrameReader, encode_frame
from tenure._protocol.messages import (
    MESSAGE,
    SUPPORTED_VERSIONS,
    decode_message,
    encode_message,
)
from tenure._protocol.wire import MAX_UINT, MIN_INT
from tenure.compat.dflockd import codec as dflockd
from tenure.errors import ErrorCode, ProtocolError
from tests.protocol.helpers import field_sites, replace_at, wire_of
from tests.protocol.strategies import (
    COMMAND_TYPES,
    commands_,
    finite_floats,
    for_hint,
    messages,
    scalars,
    text,
    uints,
)

from .wire import WAIT, Clients, ServerProcess

#: Examples per test; ``TENURE_FUZZ_EXAMPLES=5000`` fuzzes for longer.
EXAMPLES = int(os.environ.get("TENURE_FUZZ_EXAMPLES", "100"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,  # a real server and a subprocess: examples take what they take
    suppress_health_check=[HealthCheck.too_slow],
)

pytestmark = pytest.mark.timeout(60 + EXAMPLES // 2)

#: The server's max_frame_size (its default).
MAX_FRAME = 1 << 20
HELLO = encode_frame(encode_message(Hello(client_name="fuzz")))
_CONFIG_FIELDS = [f.name for f in dc_fields(NodeConfig)]


# -- the server, and a client that checks it is still healthy ---------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data_dir: Path = tmp_path_factory.mktemp("fuzz") / "data"
    with ServerProcess(data_dir) as process:
        yield process
        assert process.proc.poll() is None, f"the server exited: {process.output()}"
        assert_clean_log(process)


_health_checks = itertools.count()


async def assert_healthy(server: ServerProcess) -> None:
    """The process runs, a fresh client gets a full round trip, the log has no traceback."""
    assert server.proc.poll() is None, f"the server exited: {server.output()}"
    clients = Clients()
    try:
        client = await clients.connect(server.port)
        node, key = f"health-{next(_health_checks)}", os.urandom(16)
        assert await client.call(CreateNode(node)) is None
        session = (await client.call(CreateSession(node, key, timeout=60.0))).session_id
        result = await client.call(Acquire(session, "m", MAX_COUNT, request_id=1, ephemeral=True))
        assert result.status is AcquireStatus.GRANTED
        assert await client.call(Release(session, "m")) is True
        assert await client.call(CloseSession(session)) is None
        assert await client.call(DropNode(node, force=False)) is None
        assert (await client.ping(7)).nonce == 7
    finally:
        await clients.close_all()
    assert_clean_log(server)


def assert_clean_log(server: ServerProcess) -> None:
    """No traceback and nothing logged as an error: the server never thought it failed."""
    log = server.output()
    assert "Traceback" not in log, log[-4000:]
    for level in ("error", "critical"):
        assert f'"level": "{level}"' not in log, log[-4000:]


# -- what the server must do: the reference codec's verdict ------------------------------


@dataclass
class Verdict:
    """What a ServerConnection makes of the input (as the server answers it)."""

    welcomed: bool = False  # a valid Hello of a version we speak was read
    max_frame_size: int = MIN_MAX_FRAME_SIZE  # the largest frame we accept (Hello says)
    requests: list[int] = field(default_factory=list)  # request ids read, in order
    pings: list[int] = field(default_factory=list)  # Ping nonces read, in order
    end: str = "open"  # "open" (wants more), "closed", "protocol" or "unsupported"


def note(what: str) -> None:
    """Count ``what`` in Hypothesis' statistics (``--hypothesis-show-statistics``)."""
    if currently_in_test_context():
        event(what)


def predict(data: bytes, *, eof: bool) -> Verdict:
    """Feed ``data`` to a ServerConnection, answering each message as the server does."""
    codec = ServerConnection(max_frame_size=MAX_FRAME)
    if data:
        codec.receive_data(data)  # (b"" would mean the end of the stream)
    if eof:
        codec.receive_data(b"")
    verdict = Verdict()
    try:
        while (received := codec.next_event()) is not NEED_DATA:
            if isinstance(received, ConnectionClosed):
                verdict.end = "closed"
                break
            if isinstance(received, Hello):
                if version_refusal(received) is not None:
                    verdict.end = "unsupported"  # nothing more is read
                    break
                codec.send(Welcome(version=received.version, instance_id=bytes(16)))
                verdict.welcomed = True
                verdict.max_frame_size = received.max_frame_size
            elif isinstance(received, Request):
                verdict.requests.append(received.request_id)
                codec.send(Failure(received.request_id, ErrorCode.INTERNAL, "answered"))
            elif isinstance(received, Ping):
                verdict.pings.append(received.nonce)
                codec.send(Pong(received.nonce))
    except ProtocolError:
        verdict.end = "protocol"
    return verdict


class _Collector(asyncio.Protocol):
    """Keeps every byte received (even those just before a reset) and how it ended."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.eof = False
        self.arrived = asyncio.Event()  # set when bytes arrive
        self.lost: asyncio.Future[Exception | None] = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        self.data += data
        self.arrived.set()

    def eof_received(self) -> None:
        self.eof = True  # returning None: the transport closes, connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.arrived.set()
        if not self.lost.done():
            self.lost.set_result(exc)


class Raw:
    """A raw connection to the server: bytes out, every byte in kept, then the verdict."""

    def __init__(self, transport: asyncio.Transport, peer: _Collector) -> None:
        self.transport = transport
        self.peer = peer
        self.sent = bytearray()
        self._fed = 0  # bytes of peer.data given to receive()'s codec

    @classmethod
    async def open(cls, port: int) -> Raw:
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(WAIT):
            transport, peer = await loop.create_connection(_Collector, "127.0.0.1", port)
        return cls(transport, peer)

    def send(self, data: bytes) -> None:
        self.sent += data
        self.transport.write(data)

    async def send_in_pieces(self, data: bytes, cuts: list[int]) -> None:
        """Send ``data`` cut at ``cuts``, yielding to the loop between the pieces."""
        start = 0
        for cut in [*sorted({cut % (len(data) + 1) for cut in cuts}), len(data)]:
            self.send(data[start:cut])
            start = cut
            await asyncio.sleep(0)

    async def receive(self, codec: ClientConnection) -> Welcome | Reply:
        """The next Welcome or Reply, read with ``codec`` (which sent what it answers)."""
        async with asyncio.timeout(WAIT):
            while True:
                if len(self.peer.data) > self._fed:
                    codec.receive_data(bytes(self.peer.data[self._fed :]))
                    self._fed = len(self.peer.data)
                answer = codec.next_event()
                if answer is not NEED_DATA:
                    assert isinstance(answer, Welcome | Reply), answer
                    return answer
                assert not self.peer.lost.done(), "the server closed a valid connection"
                self.peer.arrived.clear()
                await self.peer.arrived.wait()

    async def conclude(self) -> None:
        """Hang up if the server may wait for more; wait for its close; check all it sent."""
        data = bytes(self.sent)
        verdict = predict(data, eof=False)
        hang_up = verdict.end == "open"  # the server waits for more: tell it there is none
        if hang_up:
            verdict = predict(data, eof=True)
            # The server may have closed first (a session's window passed in silence,
            # section 12) and reset the socket: the collector has how it ended.
            with contextlib.suppress(OSError):
                self.transport.write_eof()
        async with asyncio.timeout(WAIT):  # the server must close: it never hangs
            lost = await self.peer.lost
        clean = self.peer.eof and lost is None
        note(f"{verdict.end}, {'welcomed' if verdict.welcomed else 'no Welcome'}")
        note("requests answered" if verdict.requests else "no requests")
        note("closed cleanly" if clean else "reset")
        check_answers(verdict, bytes(self.peer.data), clean=clean)

    def close(self) -> None:
        self.transport.abort()


async def exchange(port: int, data: bytes) -> None:
    """Send ``data`` on a fresh connection and check everything the server does with it."""
    raw = await Raw.open(port)
    try:
        raw.send(data)
        if data[:1] not in (b"", b"\x00"):
            await dflockd_conclude(raw, data)
        else:
            await raw.conclude()
    finally:
        raw.close()


#: Every line a dflockd answer may be (spec §5): a first byte other than a native
#: frame's (0) makes the connection a dflockd one.
DFLOCKD_ANSWER = re.compile(
    rb"ok|ok \S+|ok [0-9a-f]{32} \d+|ok \{.*\}|acquired [0-9a-f]{32} \d+|queued|timeout"
    rb"|error(_[a-z_]+)?"
)


async def dflockd_conclude(raw: Raw, data: bytes) -> None:
    """Hang up; the server answers each whole request once, in dflockd words, and closes."""
    # A fatal frame makes the server close first and reset the socket: then there is
    # nothing to hang up, and the collector has how it ended.
    with contextlib.suppress(OSError):
        raw.transport.write_eof()
    async with asyncio.timeout(WAIT):
        lost = await raw.peer.lost
    clean = raw.peer.eof and lost is None
    reader = dflockd.LineReader()
    reader.feed(data)
    reader.feed(b"")
    requests = 0
    while (item := reader.next_frame()) is not None:
        requests += 1
        if isinstance(item, dflockd.FrameError) and item.fatal:
            break
    lines = bytes(raw.peer.data).split(b"\n")
    tail = lines.pop()
    summary = f"{data!r} -> {bytes(raw.peer.data)!r}"
    assert all(DFLOCKD_ANSWER.fullmatch(line) for line in lines), summary
    if clean:
        assert tail == b"", summary
        assert len(lines) == requests, summary
    else:
        assert len(lines) <= requests, summary
    note("dflockd: " + ("closed cleanly" if clean else "reset"))


def check_answers(verdict: Verdict, data: bytes, *, clean: bool) -> None:
    """What the server sent is well-formed and what ``verdict`` requires.

    ``clean``: the server closed with an orderly end of stream. After a reset (the
    server closed with our bytes unread), the end of what it sent may be missing.
    A protocol error may end with a last word or without one (it is a MAY).
    """
    reader = FrameReader(max_frame_size=verdict.max_frame_size)  # never send more (section 1)
    reader.feed(data)
    if clean:
        reader.feed(b"")
    sent: list[Message] = []
    while (frame := reader.next_body()) is not None:  # ProtocolError: a cut frame
        sent.append(decode_message(frame))  # ProtocolError: a malformed one
    assert verdict.end != "open"
    summary = f"{verdict} -> {sent}"
    if verdict.welcomed and (clean or sent):
        assert isinstance(sent[0], Welcome), summary
        assert sent[0].version in SUPPORTED_VERSIONS, summary
        sent = sent[1:]
    word = sent[-1] if sent and isinstance(sent[-1], Refused | GoingAway) else None
    answers = sent[:-1] if word is not None else sent
    # Between the handshake and the last word: answers, Pongs and Pushes, after Welcome.
    allowed = (Reply, Failure, Pong, Push) if verdict.welcomed else ()
    assert all(isinstance(message, allowed) for message in answers), summary
    answered = [m.request_id for m in answers if isinstance(m, Reply | Failure)]
    internal = [m for m in answers if isinstance(m, Failure) and m.code is ErrorCode.INTERNAL]
    assert not internal, summary  # INTERNAL: "a bug or an unexpected failure in the server"
    for message in answers:  # what the engine made of the requests
        if isinstance(message, Failure | Reply | Push):
            note(
                f"Failure({message.code.name})"
                if isinstance(message, Failure)
                else type(message).__name__
            )
    pongs = [m.nonce for m in answers if isinstance(m, Pong)]
    if isinstance(word, GoingAway) and word.reason.startswith("silent for"):
        # Sessions of short windows were made, and one passed between two frames: the
        # connection is closed for silence (section 12); what crossed it is unanswered.
        assert word.code is ErrorCode.UNAVAILABLE, summary
        assert set(answered) <= set(verdict.requests), summary
        assert pongs == verdict.pings[: len(pongs)], summary
        note("closed for silence")
        return
    if clean:  # every request answered once, every Ping in order
        assert sorted(answered) == sorted(verdict.requests), summary
        assert pongs == verdict.pings, summary
    else:
        assert pongs == verdict.pings[: len(pongs)], summary
    if verdict.end == "closed":
        assert word is None, summary
        return
    if verdict.end == "unsupported":  # MUST answer Refused(UNSUPPORTED) (section 4)
        assert word is not None or not clean, summary
        expected: type[Refused | GoingAway] = Refused
        code = ErrorCode.UNSUPPORTED
    else:  # "protocol": a last word MAY be sent (section 10, rule 5)
        expected = GoingAway if verdict.welcomed else Refused
        code = ErrorCode.PROTOCOL
    note("a last word" if word is not None else "closed without a last word")
    if word is not None:
        assert isinstance(word, expected), summary
        assert word.code is code, summary


async def run(server: ServerProcess, data: bytes) -> None:
    await exchange(server.port, data)
    await assert_healthy(server)


# -- what to send ------------------------------------------------------------------------

msgpack_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(MIN_INT, MAX_UINT)
    | st.floats()
    | text
    | st.binary(max_size=16)
    | st.builds(msgpack.ExtType, st.integers(0, 127), st.binary(max_size=8)),
    lambda children: (
        st.lists(children, max_size=6)
        | st.dictionaries(text | st.integers(0, 9), children, max_size=3)
    ),
    max_leaves=16,
)
#: Arrays that look like a message: a small type number (or not a number), then anything.
message_like = st.builds(
    lambda tag, rest: [tag, *rest],
    st.integers(0, 20) | msgpack_values,
    st.lists(msgpack_values, max_size=6),
)
#: Well-formed Requests of well-typed commands: the engine sees these.
requests = st.builds(
    lambda rid, command: wire_of(Request(rid, command)), st.integers(0, 3), commands_
)
valid_bodies = st.one_of(
    requests,
    st.builds(lambda nonce: wire_of(Ping(nonce)), st.integers(0, MAX_UINT)),
    messages.map(wire_of),  # any message: the server's own ones are errors here
)


def pack(body: object) -> bytes:
    return bytes(msgpack.packb(body, use_bin_type=True, datetime=False))


@st.composite
def mutated(draw: st.DrawFn) -> object:
    """A valid message body, changed in one way (a field replaced, swapped, cut...)."""
    wire: Any = draw(valid_bodies)
    sites = [path for _, path in field_sites(MESSAGE, wire)]
    how = draw(st.sampled_from(["replace", "swap", "truncate", "extend", "tag", "unwrap"]))
    if how == "replace" and sites:
        return replace_at(wire, draw(st.sampled_from(sites)), draw(msgpack_values))
    # The other changes apply to the message array or to an array nested in it.
    arrays = [()] + [path for path in sites if isinstance(_at(wire, path), list)]
    path = draw(st.sampled_from(arrays))
    target = list(_at(wire, path))
    if how == "swap" and len(target) >= 2:
        i, j = draw(st.permutations(range(len(target))))[:2]
        target[i], target[j] = target[j], target[i]
    elif how == "truncate" and target:
        target = target[: draw(st.integers(0, len(target) - 1))]
    elif how == "extend":
        target = target + draw(st.lists(msgpack_values, min_size=1, max_size=2))
    elif how == "tag" and target:
        target[0] = draw(st.integers(MIN_INT, MAX_UINT) | msgpack_values)
    elif how == "unwrap":
        return draw(msgpack_values)  # not an array at all
    return replace_at(wire, path, target) if path else target


def _at(wire: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        wire = wire[step]
    return wire


#: Bodies msgpack itself would never pack: each one must be rejected by the decoder.
broken_bodies = st.sampled_from(
    [
        pack([1, 1, "x", None, MAX_FRAME]) + b"\x00",  # a byte after the value
        b"\x95\x01\x01\xa2\xff\xfe\xc0\xce\x00\x10\x00\x00",  # a str that is not UTF-8
        b"\x93\x02\x01\x93\x03\xa1n\x82\xa1a\x01\xa1a\x02",  # a map repeating a key
        b"\x93\x02\x01\x93\x03\xa1n\x81\x01\x02",  # a map key that is not a str
        b"\x92\x01\xdb\xff\xff\xff\xff",  # a str claiming 4 GiB
        b"\x92\x01\xdd\xff\xff\xff\xff",  # an array claiming 2**32 items
        b"\x92\x01\xdf\xff\xff\xff\xff",  # a map claiming 2**32 pairs
        b"\x92\x03\xd7\xff" + bytes(8),  # a timestamp (ext -1)
        b"\x92\x03\xcb" + struct.pack(">d", float("nan")),  # Ping(NaN)
        b"\x92\x03",  # cut short
        b"\xc1",  # never valid msgpack
        b"",  # an empty body
    ]
)


@st.composite
def frames(draw: st.DrawFn) -> bytes:
    """One frame: a body of some kind, under a right (mostly) or wrong length prefix."""
    body = draw(
        st.one_of(
            message_like.map(pack),
            msgpack_values.map(pack),
            valid_bodies.map(pack),
            mutated().map(pack),
            broken_bodies,
        )
    )
    length = draw(
        st.one_of(
            st.just(len(body)),
            st.just(len(body)),
            st.integers(0, len(body) + 16),  # cut the body, or wait for more
            st.sampled_from([MAX_FRAME, MAX_FRAME + 1, MAX_MAX_FRAME_SIZE]),
        )
    )
    return struct.pack(">I", length) + body


# -- the tests ---------------------------------------------------------------------------


@FUZZ
@given(data=st.binary(max_size=400), hello_first=st.booleans())
async def test_random_bytes(server: ServerProcess, data: bytes, hello_first: bool) -> None:
    await run(server, (HELLO if hello_first else b"") + data)


@FUZZ
@given(body=message_like | msgpack_values, hello_first=st.booleans())
async def test_frame_of_random_msgpack(
    server: ServerProcess, body: object, hello_first: bool
) -> None:
    await run(server, (HELLO if hello_first else b"") + encode_frame(pack(body)))


@FUZZ
@given(
    sent=st.lists(frames(), min_size=1, max_size=4),
    hello_first=st.booleans(),
    cuts=st.lists(st.integers(0, 1 << 16), max_size=4),
)
async def test_valid_mutated_and_broken_frames(
    server: ServerProcess, sent: list[bytes], hello_first: bool, cuts: list[int]
) -> None:
    raw = await Raw.open(server.port)
    data = (HELLO if hello_first else b"") + b"".join(sent)
    try:
        await raw.send_in_pieces(data, cuts)
        if data[:1] not in (b"", b"\x00"):
            await dflockd_conclude(raw, data)
        else:
            await raw.conclude()
    finally:
        raw.close()
    await assert_healthy(server)


@FUZZ
@given(
    bodies=st.lists(requests | mutated(), min_size=1, max_size=6), garbage=st.binary(max_size=40)
)
async def test_handshake_then_requests_then_garbage(
    server: ServerProcess, bodies: list[object], garbage: bytes
) -> None:
    await run(server, HELLO + b"".join(encode_frame(pack(body)) for body in bodies) + garbage)


# Commands on a live session: the engine's paths, reached through the server.

_NODE_COMMANDS = (CreateNode, DescribeNode, AlterNode, DropNode, SetNodeAnnex, GetNodeAnnex)
_KEY = b"fuzz-key"


def session_commands(session_id: int, node: str) -> st.SearchStrategy[Command[Any]]:
    """Well-typed commands that mostly name this session, its node and a few semaphores.

    Short timeouts and leases make timers fire while the connection is open; the
    other values still range over everything the wire allows.
    """
    short = st.floats(0.0, 0.05)
    overrides: dict[str, st.SearchStrategy[Any]] = {
        "session_id": st.just(session_id) | uints,
        "node": st.just(node) | text,
        "protection_key": st.just(_KEY) | st.binary(max_size=8),
        "seq_no": st.integers(0, 4) | uints,
        "count": st.integers(1, 3) | uints,
        "limit": st.integers(0, 3) | uints,
        "request_id": st.integers(0, 3),
        "watch_id": st.integers(0, 5) | uints,
        "timeout": st.none() | short | finite_floats,
        "lease_ttl": st.none() | short | finite_floats,
        "changes": st.dictionaries(st.sampled_from(_CONFIG_FIELDS) | text, scalars, max_size=3),
        # Up to the node's max_data_size (64 KiB): a Describe may not fit a small frame.
        "data": st.binary(max_size=8) | st.sampled_from([65_000, 65_536]).map(bytes),
    }
    semaphores = st.sampled_from(["a", "b"]) | text
    choices = []
    for cls in COMMAND_TYPES:
        hints = get_type_hints(cls)
        fields = {f.name: overrides.get(f.name, for_hint(hints[f.name])) for f in dc_fields(cls)}
        if "name" in fields:
            fields["name"] = (st.just(node) | text) if cls in _NODE_COMMANDS else semaphores
        choices.append(st.builds(cls, **fields))
    return st.one_of(choices)


@FUZZ
@given(
    data=st.data(),
    max_frame_size=st.sampled_from([MIN_MAX_FRAME_SIZE, MAX_FRAME]),
    garbage=st.just(b"") | st.binary(max_size=20),
)
async def test_commands_on_a_live_session(
    server: ServerProcess, data: st.DataObject, max_frame_size: int, garbage: bytes
) -> None:
    node = f"fuzz-{next(_nodes)}"
    codec = ClientConnection(max_frame_size=max_frame_size)
    raw = await Raw.open(server.port)
    try:
        raw.send(codec.send(Hello(client_name="fuzz", max_frame_size=max_frame_size)))
        assert isinstance(await raw.receive(codec), Welcome)
        raw.send(codec.send(Request(1, CreateNode(node, NodeConfig(recovery_window=0.2)))))
        raw.send(codec.send(Request(2, CreateSession(node, _KEY, timeout=0.2))))
        assert await raw.receive(codec) == Reply(1, None)
        info = await raw.receive(codec)
        assert isinstance(info, Reply)
        assert isinstance(info.value, SessionInfo)
        session_id = info.value.session_id
        commands = data.draw(st.lists(session_commands(session_id, node), min_size=1, max_size=8))
        for request_id, command in enumerate(commands, 3):
            raw.send(encode_frame(encode_message(Request(request_id, command))))
        raw.send(garbage)
        await raw.conclude()
    finally:
        raw.close()
    await assert_healthy(server)


_nodes = itertools.count()


def exactly_max_frame_size() -> bytes:
    """A valid Request frame whose body is exactly MAX_FRAME bytes (a long node name)."""
    overhead = len(encode_message(Request(1, CreateNode(""))))
    name = "x" * (MAX_FRAME - overhead)
    while len(frame := encode_frame(encode_message(Request(1, CreateNode(name))))) > 4 + MAX_FRAME:
        name = name[:-1]  # the str header grew with the name
    assert len(frame) == 4 + MAX_FRAME
    return frame


def hello(**fields: Any) -> bytes:
    return encode_frame(encode_message(Hello(**fields)))


EDGE_CASES = {
    "nothing": b"",
    "empty frame": b"\x00\x00\x00\x00",
    "length 2**32-1 first": b"\xff\xff\xff\xff",
    "length max+1 after hello": HELLO + struct.pack(">I", MAX_FRAME + 1),
    "length max, then hang up": HELLO + struct.pack(">I", MAX_FRAME) + b"\x92",
    "a body of exactly max_frame_size": HELLO + exactly_max_frame_size(),
    "hello announcing 65535": hello(max_frame_size=65535),
    "hello announcing 2**32": hello(max_frame_size=MAX_MAX_FRAME_SIZE + 1),
    "hello version 0": hello(version=0),
    "hello version 2**64-1, then junk": hello(version=MAX_UINT) + b"junk",
    "request before hello": encode_frame(encode_message(Request(1, DropNode("n", True)))),
    "ping before hello": encode_frame(encode_message(Ping(1))),
    "two hellos": HELLO + HELLO,
    "welcome from a client": HELLO + encode_frame(encode_message(Welcome())),
    "the same request id twice": HELLO
    + encode_frame(encode_message(Request(5, CreateNode("")))) * 2,
    "pings in order": HELLO + b"".join(encode_frame(encode_message(Ping(n))) for n in (3, 1, 2)),
}


@pytest.mark.parametrize("data", list(EDGE_CASES.values()), ids=list(EDGE_CASES))
async def test_edge_cases(server: ServerProcess, data: bytes) -> None:
    await run(server, data)


async def test_a_reply_too_large_for_the_client_is_a_failure(server: ServerProcess) -> None:
    # Not random, but the same edge from the other side: the server must never send a
    # frame beyond what the client announced; it answers LIMIT_EXCEEDED and goes on.
    clients = Clients()
    try:
        client = await clients.connect(server.port, hello=False)
        client.codec = ClientConnection(max_frame_size=MIN_MAX_FRAME_SIZE)  # refuses more
        assert isinstance(await client.hello(max_frame_size=MIN_MAX_FRAME_SIZE), Welcome)
        node = f"fuzz-{next(_nodes)}"
        await client.call(CreateNode(node))
        session = (await client.call(CreateSession(node, _KEY, timeout=1.0))).session_id
        await client.call(CreateSemaphore(session, "big", 1, bytes(MIN_MAX_FRAME_SIZE)))
        failure = await client.fail(DescribeSemaphore(session, "big"))
        assert failure.code is ErrorCode.LIMIT_EXCEEDED
        assert (await client.ping(1)).nonce == 1
        assert await client.call(DeleteSemaphore(session, "big", force=True)) is None
    finally:
        await clients.close_all()
    await assert_healthy(server)


def test_the_server_never_failed(server: ServerProcess) -> None:
    # Last in the module: after everything above, the one server still runs, clean.
    assert server.proc.poll() is None, f"the server exited: {server.output()}"
    assert_clean_log(server)


async def test_a_backup_read_is_answered_before_an_end_of_stream_closes(
    server: ServerProcess,
) -> None:
    # Found by test_commands_on_a_live_session (CI, 2026-11-28): a backup read still
    # waiting for its first bytes, a later request answered at once, then the client's
    # end of stream: the connection closed with the read's answer owed. Now the
    # connection's later frames wait for a read's answer, as for a reload's.
    from tenure._protocol.admin import ReadBackup

    codec = ClientConnection(max_frame_size=MIN_MAX_FRAME_SIZE)
    raw = await Raw.open(server.port)
    try:
        raw.send(codec.send(Hello(client_name="fuzz", max_frame_size=MIN_MAX_FRAME_SIZE)))
        assert isinstance(await raw.receive(codec), Welcome)
        for request_id, command in enumerate((ReadBackup(0, 2326), ReadBackup(0, 0)), 1):
            raw.send(encode_frame(encode_message(Request(request_id, command))))
        await raw.conclude()  # (every request answered, in order, then closed)
    finally:
        raw.close()
    await assert_healthy(server)
