"""The messages of tenure's native protocol, and their wire layout. [compiled]

A frame body is one msgpack array ``[type, field, ...]``: the message type number,
then the message's fields in the order listed here. Client to server: Hello,
Request, Ping. Server to client: Welcome or Refused, Reply, Failure, Push, Pong,
GoingAway. Each message is a frozen dataclass; do not subclass them (the codec
looks messages up by exact type).

Two layouts are fixed for every protocol version, so that peers of different
versions can always tell each other so: Hello starts ``[1, version, ...]`` and
Refused is ``[12, code, message]``. A server that does not speak the Hello's version
reads nothing after it and answers Refused(UNSUPPORTED).
"""

from __future__ import annotations

from typing import Any, Final, final

import msgspec

from tenure._core._dataclass import dataclass
from tenure._core.commands import (
    AcquireAll,
    AdoptHold,
    ClaimName,
    Command,
    KillSession,
    ListNodes,
    ListSemaphores,
    ListSessions,
    OfferHold,
    ReleaseClaim,
    ReserveUnits,
    SwapSemaphoreData,
    TopNames,
    WatchPrefix,
    WhyName,
)
from tenure._core.effects import Effect
from tenure._protocol.admin import ReadBackup, ReloadFiles
from tenure._protocol.cluster import ClusterStatus
from tenure._protocol.errors import LocalProtocolError
from tenure._protocol.frames import DEFAULT_MAX_FRAME_SIZE, MIN_MAX_FRAME_SIZE
from tenure._protocol.payloads import COMMAND, EFFECT, ERROR_CODE, VALUE, ReplyValue
from tenure._protocol.wire import (
    BIN,
    BOOL,
    FLOAT,
    STR,
    UINT,
    Optional,
    Record,
    Secret,
    Union,
    WireError,
    explain,
    plain,
)
from tenure.errors import ErrorCode, ProtocolError

__all__ = [
    "PROTOCOL_VERSION",
    "SINCE_VERSION_2",
    "SINCE_VERSION_3",
    "SINCE_VERSION_4",
    "SINCE_VERSION_5",
    "SINCE_VERSION_6",
    "SINCE_VERSION_7",
    "SINCE_VERSION_8",
    "SINCE_VERSION_9",
    "SUPPORTED_VERSIONS",
    "ClientMessage",
    "ConnectionClosed",
    "Failure",
    "GoingAway",
    "Hello",
    "Message",
    "Ping",
    "Pong",
    "Push",
    "Refused",
    "Reply",
    "Request",
    "ServerMessage",
    "Welcome",
    "decode_message",
    "encode_message",
    "version_refusal",
]

#: The protocol version this code speaks. Any change to a layout or a meaning is a
#: new version; a server may speak several (SUPPORTED_VERSIONS). Version 2 added
#: the listing commands, KillSession, CreateSession's client identity, and who holds
#: and since when on owners and waiters. Version 3 added clusters: Welcome's
#: ``role`` and ``leader``, and ClusterStatus (:mod:`tenure._protocol.cluster`).
#: Version 4 added SwapSemaphoreData (a compare-and-swap of a semaphore's data),
#: version 5 ReserveUnits (a rate limiter's reservation) and AcquireAll (several
#: semaphores, all or none), version 6 WatchPrefix (a watch of every semaphore
#: under a prefix), ClaimName and ReleaseClaim (claims), NodeConfig's ``max_claims``,
#: the asking task's number on Acquire and AcquireAll (deadlock detection) and the
#: broken deadlocks on NodeDescription. Version 7 added OfferHold and AdoptHold (a
#: hold handed off to another session under a new token), and Acquire's and
#: NodeConfig's trailing ``max_hold`` (a grant bounded in time). Version 8 added
#: ReadBackup and ReloadFiles (an operator's acts on the server itself, at the URL every
#: other command takes: :mod:`tenure._protocol.admin`). Version 9 added WhyName (who
#: blocks a name) and TopNames (the most contended names): :mod:`tenure._protocol.blocking`.
#: Version 10 added NodeConfig's trailing ``long_hold`` (a node's own threshold for
#: telling of long holds) and WhyLink's trailing ``waits_elsewhere`` (a chain across
#: nodes); no new command. Version 11 added Request's trailing ``max_staleness`` and
#: ``min_index`` and Reply's trailing ``index``: a read a cluster's standby answers
#: from its own state, within a stated staleness (docs/protocol.md, "Reads from
#: standbys"); no new command. Version 12 added Welcome's trailing ``cell``, ClusterView's
#: ``cell`` and ``cells`` and the error WRONG_CELL: a service of several cells, each
#: node served by one (docs/protocol.md, "Cells"); no new command. Version 13 lets a
#: standby arm watches (a DescribeSemaphore with a watch, a WatchPrefix, a CancelWatch
#: of one, each with ``max_staleness``), fired as it applies the log (docs/protocol.md,
#: "Watches on standbys"); no new message nor field.
PROTOCOL_VERSION: Final = 13
#: The versions a server built from this code accepts in a Hello. To an older peer
#: it sends the layouts of the peer's version
#: (:func:`tenure._protocol.older_peers.for_version`).
SUPPORTED_VERSIONS: Final = frozenset({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, PROTOCOL_VERSION})
#: Commands a version-1 peer does not know (a client must not send them to it).
SINCE_VERSION_2: Final = frozenset({ListNodes, ListSemaphores, ListSessions, KillSession})
#: Commands a version-1 or version-2 peer does not know.
SINCE_VERSION_3: Final = frozenset({ClusterStatus})
#: Commands a peer of version 1 to 3 does not know.
SINCE_VERSION_4: Final = frozenset({SwapSemaphoreData})
#: Commands a peer of version 1 to 4 does not know.
SINCE_VERSION_5: Final = frozenset({ReserveUnits, AcquireAll})
#: Commands a peer of version 1 to 5 does not know.
SINCE_VERSION_6: Final = frozenset({WatchPrefix, ClaimName, ReleaseClaim})
#: Commands a peer of version 1 to 6 does not know.
SINCE_VERSION_7: Final = frozenset({OfferHold, AdoptHold})
#: Commands a peer of version 1 to 7 does not know.
SINCE_VERSION_8: Final = frozenset({ReadBackup, ReloadFiles})
#: Commands a peer of version 1 to 8 does not know.
SINCE_VERSION_9: Final = frozenset({WhyName, TopNames})
#: Welcome.role of a server that is not part of a cluster, of a cluster's leader,
#: and of a standby (which answers ClusterStatus, Ping and, since version 11, a read
#: that allows some staleness: docs/protocol.md 16).
STANDALONE: Final = ""
LEADER: Final = "leader"
STANDBY: Final = "standby"


# -- client to server -------------------------------------------------------------------


@final
@dataclass(frozen=True, slots=True)
class Hello:
    """The client's first message: the protocol version it speaks and who it is.

    ``token`` is an opaque credential (``None``: anonymous); ``max_frame_size`` is
    the largest frame the client accepts, so the server can refuse a reply that
    would not fit instead of breaking the connection.
    """

    version: int = PROTOCOL_VERSION
    client_name: str = ""
    token: str | None = None
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE


@final
@dataclass(frozen=True, slots=True)
class Request:
    """Apply ``command``; the answer is a Reply or Failure with the same ``request_id``.

    ``request_id`` is chosen by the client and must not equal the id of another
    request still awaiting its answer. (It is unrelated to ``Acquire.request_id``,
    which names an acquire within its session.)

    Since version 11: ``max_staleness`` (None: not given, the leader answers) lets a
    cluster's standby answer a read (:data:`~tenure._core.stale_reads.STALE_READS`)
    from its own state, if that state holds everything etcd had committed
    ``max_staleness`` seconds before it read the request, and at least the log entry
    ``min_index`` (a standby's earlier Reply ``index``: a client never reads older than
    it did). Not sent when None and 0; a client sends them only to a server of
    version 11.
    """

    request_id: int
    command: Command[object]
    max_staleness: float | None = None
    min_index: int = 0


@final
@dataclass(frozen=True, slots=True)
class Ping:
    """Ask for a Pong carrying the same ``nonce`` (liveness and round-trip time)."""

    nonce: int


# -- server to client -------------------------------------------------------------------


@final
@dataclass(frozen=True, slots=True)
class Welcome:
    """The handshake succeeded; requests may follow.

    ``instance_id`` names the engine state this server runs. Sessions live in that
    state: a session created under another instance_id cannot be re-attached here
    (treat it as expired). It stays the same across restarts that recover the
    state, and changes when the state starts afresh. ``max_frame_size`` is the
    largest frame the server accepts. ``idle_timeout`` is how long, in seconds, the
    server lets a connection stay silent before closing it (``0``: never); a
    client sends a Ping well within it.

    Since version 3: ``role`` says whether the server is part of a cluster
    (:data:`STANDALONE`: no; :data:`LEADER`; :data:`STANDBY`: it serves no request
    but ClusterStatus, so a client goes to ``leader``, the leader's address as it
    advertises it, None when no leader is known). To an older peer both are left out.

    Since version 6: ``deadlock_detection`` says whether the server looks for
    deadlocks (``tenure serve --deadlock-search-limit 0`` turns it off), so a client
    declares Capability.DEADLOCK_DETECTION only where it holds. Not sent when true;
    to an older peer (which sends no asking task) it is left out.

    Since version 12: ``cell``, the cell of the service this member belongs to (a
    cluster's member; empty: a standalone server), so that a client knows to learn the
    service's cells (ClusterStatus) and send each node's requests to its cell. To an
    older peer it is left out.
    """

    version: int = PROTOCOL_VERSION
    server_name: str = ""
    instance_id: bytes = b""
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE
    idle_timeout: float = 0.0
    role: str = STANDALONE
    leader: str | None = None
    deadlock_detection: bool = True
    cell: str = ""


@final
@dataclass(frozen=True, slots=True)
class Refused:
    """The handshake failed (version, credentials, overload); the server closes next."""

    code: ErrorCode
    message: str


@final
@dataclass(frozen=True, slots=True)
class Reply:
    """The reply of the request ``request_id``: what its command returned.

    Since version 11: ``index``, a standby's answer to a read with ``max_staleness``:
    the index of the last log entry its state holds (0, not sent: any other answer).
    """

    request_id: int
    value: ReplyValue
    index: int = 0


@final
@dataclass(frozen=True, slots=True)
class Failure:
    """The request ``request_id`` raised: ``error_from_code(code, message)`` rebuilds it."""

    request_id: int
    code: ErrorCode
    message: str


@final
@dataclass(frozen=True, slots=True)
class Push:
    """An effect addressed to a session of this connection (a grant, a watch, a loss)."""

    effect: Effect


@final
@dataclass(frozen=True, slots=True)
class Pong:
    """The answer to Ping ``nonce``."""

    nonce: int


@final
@dataclass(frozen=True, slots=True)
class GoingAway:
    """The server is closing this connection: no new requests; answers may still follow.

    ``code`` says why: UNAVAILABLE for a shutdown, PROTOCOL when the client broke the
    protocol, AUTHENTICATION when a reload removed or rotated its token, INTERNAL for
    anything else.
    """

    code: ErrorCode
    reason: str


@final
@dataclass(frozen=True, slots=True)
class ConnectionClosed:
    """Not a message: the peer closed its end of the byte stream, at a frame boundary."""


ClientMessage = Hello | Request | Ping
ServerMessage = Welcome | Refused | Reply | Failure | Push | Pong | GoingAway
Message = ClientMessage | ServerMessage

_OPT_STR: Final = Optional(STR)

#: Every message: ``[type, field, ...]``. Client types are 1..9, server types 11..19.
MESSAGE: Final = Union(
    "message",
    [
        Record(
            Hello,
            [
                ("version", UINT),
                ("client_name", STR),
                ("token", Secret(_OPT_STR)),
                ("max_frame_size", UINT),
            ],
            tag=1,
        ),
        Record(
            Request,
            [
                ("request_id", UINT),
                ("command", COMMAND),
                ("max_staleness", Optional(FLOAT)),  # since version 11
                ("min_index", UINT),  # since version 11
            ],
            tag=2,
            since=2,
        ),
        Record(Ping, [("nonce", UINT)], tag=3),
        Record(
            Welcome,
            [
                ("version", UINT),
                ("server_name", STR),
                ("instance_id", BIN),
                ("max_frame_size", UINT),
                ("idle_timeout", FLOAT),
                ("role", STR),  # since version 3
                ("leader", _OPT_STR),  # since version 3
                ("deadlock_detection", BOOL),  # since version 6
                ("cell", STR),  # since version 12
            ],
            tag=11,
            since=5,
        ),
        Record(Refused, [("code", ERROR_CODE), ("message", STR)], tag=12),
        Record(
            Reply,
            [("request_id", UINT), ("value", VALUE), ("index", UINT)],  # index: version 11
            tag=13,
            since=2,
        ),
        Record(Failure, [("request_id", UINT), ("code", ERROR_CODE), ("message", STR)], tag=14),
        Record(Push, [("effect", EFFECT)], tag=15),
        Record(Pong, [("nonce", UINT)], tag=16),
        Record(GoingAway, [("code", ERROR_CODE), ("reason", STR)], tag=17),
    ],
    root=True,
)
_HELLO: Final = 1
_dump: Final = MESSAGE.to_wire
_load: Final = MESSAGE.from_wire
_encoder: Final = msgspec.msgpack.Encoder()
_decoder: Final = msgspec.msgpack.Decoder(MESSAGE.annotation)
# msgspec's refusals: a value that does not fit, bytes that are not msgpack, text that
# is not UTF-8 (both ways), a number msgpack cannot hold, a type it cannot encode,
# arrays nested deeper than Python's recursion limit.
_REFUSALS: Final = (msgspec.MsgspecError, UnicodeError, TypeError, OverflowError, RecursionError)


def encode_message(message: Message) -> bytes:
    """The msgpack body of ``message``'s frame.

    Raises:
        LocalProtocolError: a field does not fit its wire type (the message names it).
    """
    try:
        struct = _dump(message)
    except WireError as error:
        raise LocalProtocolError(f"cannot encode {error}") from None
    try:
        body: bytes = _encoder.encode(struct)
        _decoder.decode(body)  # what a peer would refuse is not sent
    except _REFUSALS as refusal:
        why = explain(MESSAGE, plain(struct), refusal)
        raise LocalProtocolError(f"cannot encode {why}") from None
    return body


def decode_message(body: bytes) -> Message:
    """The message that a frame body stands for.

    Raises:
        ProtocolError: the body is not a valid message (the message names the field).
    """
    try:
        message: Message = _load(_decoder.decode(body))
    except (*_REFUSALS, WireError) as refusal:
        return _refused(body, refusal)
    if type(message) is Hello and message.version not in SUPPORTED_VERSIONS:
        return Hello(message.version, max_frame_size=MIN_MAX_FRAME_SIZE)
    return message


def _refused(body: bytes, refusal: Exception) -> Message:
    """A Hello of a version we do not speak, or else the ProtocolError saying what is wrong."""
    try:
        raw: Any = msgspec.msgpack.decode(body)
    except _REFUSALS as error:
        # Whatever it is, the cause is the bytes the peer sent.
        detail = str(error) or type(error).__name__
        raise ProtocolError(f"the frame body is not valid msgpack: {detail}") from None
    if (
        isinstance(raw, list)
        and len(raw) >= 2
        and type(raw[0]) is int
        and raw[0] == _HELLO
        and type(raw[1]) is int
        and raw[1] >= 0
        and raw[1] not in SUPPORTED_VERSIONS
    ):
        # A Hello of a version we do not speak: its version is all we may read.
        return Hello(raw[1], max_frame_size=MIN_MAX_FRAME_SIZE)
    why = refusal if isinstance(refusal, WireError) else explain(MESSAGE, raw, refusal)
    raise ProtocolError(f"malformed message: {why}") from None


def version_refusal(hello: Hello) -> Refused | None:
    """The Refused a server must answer ``hello`` with if it does not speak its version."""
    if hello.version in SUPPORTED_VERSIONS:
        return None
    supported = ", ".join(map(str, sorted(SUPPORTED_VERSIONS)))
    return Refused(
        ErrorCode.UNSUPPORTED,
        f"protocol version {hello.version} is not supported; this server speaks {supported}",
    )
