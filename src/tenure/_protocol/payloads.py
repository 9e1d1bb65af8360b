"""What requests, replies and pushes carry: engine commands, reply values, effects. [compiled]

Every :mod:`tenure._core` command, reply value and effect has one schema here, a
:class:`~tenure._protocol.wire.Record` listing its fields in dataclass order with
their wire types. Commands and effects are tagged arrays ``[tag, field, ...]``;
the tags are stable: a tag is never reused or renumbered, and any change to a
layout is a new protocol version. The tests check that every dataclass field is
listed, in order (tests/protocol/test_payloads.py), and that docs/protocol.md shows
each layout exactly as :func:`layout` renders it (tests/protocol/test_docs.py).

Commands also travel on their own: :func:`encode_command` and :func:`decode_command`
are the journal's codec (it logs each command in its wire layout).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import msgspec

from tenure._core import commands as c
from tenure._core import effects as fx
from tenure._core import values as v
from tenure._core.claims import ClaimRecord
from tenure._protocol.cluster import CLUSTER_STATUS, CLUSTER_VIEW, ClusterStatus, ClusterView
from tenure._protocol.node_changes import NodeChanges
from tenure._protocol.wire import (
    BIN,
    BOOL,
    FLOAT,
    STR,
    UINT,
    ArrayOf,
    EnumField,
    Field,
    Optional,
    Record,
    Union,
    WireError,
    any_of,
    as_float,
    describe,
    explain,
    plain,
)
from tenure.errors import ErrorCode

__all__ = [
    "ACQUIRE_STATUS",
    "BROKEN_DEADLOCK",
    "CLIENT_IDENTITY",
    "COMMAND",
    "EFFECT",
    "ERROR_CODE",
    "HELD_GRANT",
    "MISSED",
    "NODE_CHANGES",
    "NODE_CONFIG",
    "OWNER_INFO",
    "QUEUED_ACQUIRE",
    "REPLY_TYPES",
    "SEMAPHORE_DESCRIPTION",
    "SEMAPHORE_SUMMARY",
    "SESSION_SUMMARY",
    "VALUE",
    "WAITER_INFO",
    "ReplyValue",
    "decode_command",
    "encode_command",
    "layout",
    "reply_fits",
]

#: A command's reply, as the wire carries it.
ReplyValue = (
    c.SessionInfo
    | c.AcquireResult
    | v.NodeDescription
    | c.DescribeResult
    | c.SessionState
    | c.NodePage
    | c.SemaphorePage
    | c.SessionPage
    | ClusterView
    | c.RateReservation
    | c.AcquireAllResult
    | c.WatchArmed
    | ClaimRecord
    | bool
    | float
    | bytes
    | None
)

OPT_FLOAT: Final = Optional(FLOAT)
OPT_UINT: Final = Optional(UINT)
OPT_STR: Final = Optional(STR)

#: Error codes travel as their number. A number this side does not know loads as
#: INTERNAL (the message is kept), so a newer peer never breaks an older one.
ERROR_CODE: Final = EnumField(
    "code", {code: int(code) for code in ErrorCode}, unknown=ErrorCode.INTERNAL
)

#: The outcome of an Acquire, as a small number.
ACQUIRE_STATUS: Final = EnumField(
    "status",
    {c.AcquireStatus.GRANTED: 0, c.AcquireStatus.QUEUED: 1, c.AcquireStatus.BUSY: 2},
)

# -- values inside replies (untagged: their position says what they are) ---------------

# Positional on the wire, so the renamed first field (``session_timeout`` before) kept
# its place and its layout: only the attribute it reads changed.
NODE_CONFIG: Final = Record(
    v.NodeConfig,
    [
        ("recovery_window", FLOAT),
        ("lock_delay", FLOAT),
        ("default_lease", OPT_FLOAT),
        ("max_sessions", UINT),
        ("max_semaphores", UINT),
        ("max_waiters", UINT),
        ("max_data_size", UINT),
        ("max_watches_per_session", UINT),
        ("max_missed_per_session", UINT),
        ("max_claims", UINT),  # protocol version 6: left out at its default
    ],
    since=9,
)


NODE_CHANGES: Final[Field] = NodeChanges()

CLIENT_IDENTITY: Final = Record(v.ClientIdentity, [("host", STR), ("pid", UINT), ("name", STR)])

#: A deadlock a server broke (NodeDescription's ``deadlocks``, protocol version 6).
BROKEN_DEADLOCK: Final = Record(
    v.BrokenDeadlock, [("at", OPT_FLOAT), ("session_id", UINT), ("task", UINT), ("cycle", STR)]
)

# Owners and waiters gained who holds and since when in protocol version 2 (``since``
# marks the first layout's length: a version-1 peer reads and sends the short one).
OWNER_INFO: Final = Record(
    v.OwnerInfo,
    [
        ("session_id", UINT),
        ("count", UINT),
        ("data", BIN),
        ("token", UINT),
        ("description", STR),
        ("identity", CLIENT_IDENTITY),
        ("since", OPT_FLOAT),
    ],
    since=4,
)
WAITER_INFO: Final = Record(
    v.WaiterInfo,
    [
        ("session_id", UINT),
        ("count", UINT),
        ("data", BIN),
        ("description", STR),
        ("identity", CLIENT_IDENTITY),
        ("since", OPT_FLOAT),
    ],
    since=3,
)
SEMAPHORE_SUMMARY: Final = Record(
    v.SemaphoreSummary,
    [
        ("name", STR),
        ("limit", UINT),
        ("count", UINT),
        ("owners", UINT),
        ("waiters", UINT),
        ("ephemeral", BOOL),
    ],
)
SESSION_SUMMARY: Final = Record(
    v.SessionSummary,
    [
        ("session_id", UINT),
        ("description", STR),
        ("identity", CLIENT_IDENTITY),
        ("timeout", FLOAT),
        ("created_at", OPT_FLOAT),
        ("expires_in", OPT_FLOAT),
        ("holds", UINT),
        ("waits", UINT),
    ],
)

SEMAPHORE_DESCRIPTION: Final = Record(
    v.SemaphoreDescription,
    [
        ("name", STR),
        ("limit", UINT),
        ("count", UINT),
        ("data", BIN),
        ("ephemeral", BOOL),
        ("owners", ArrayOf(OWNER_INFO)),
        ("waiters", ArrayOf(WAITER_INFO)),
        ("exists", BOOL),
    ],
)

# -- commands ---------------------------------------------------------------------------

_COMMANDS: Final = (
    # nodes: 1..9
    Record(c.CreateNode, [("name", STR), ("config", NODE_CONFIG)], tag=1),
    Record(c.DescribeNode, [("name", STR)], tag=2),
    Record(c.AlterNode, [("name", STR), ("changes", NODE_CHANGES)], tag=3),
    Record(c.DropNode, [("name", STR), ("force", BOOL)], tag=4),
    Record(c.ListNodes, [("after", STR), ("limit", UINT)], tag=5),
    Record(c.SetNodeAnnex, [("name", STR), ("key", STR), ("value", BIN)], tag=6),
    Record(c.GetNodeAnnex, [("name", STR), ("key", STR)], tag=7),
    # sessions: 10..19
    Record(
        c.CreateSession,
        [
            ("node", STR),
            ("protection_key", BIN),
            ("timeout", OPT_FLOAT),
            ("description", STR),
            ("identity", CLIENT_IDENTITY),  # protocol version 2
        ],
        tag=10,
        since=4,
    ),
    Record(
        c.AttachSession,
        [
            ("session_id", UINT),
            ("protection_key", BIN),
            ("seq_no", UINT),
            ("timeout", OPT_FLOAT),  # gained (issue 27): a restated recovery window
            ("description", OPT_STR),  # gained (issue 27)
        ],
        tag=11,
        since=3,
    ),
    Record(c.DetachSession, [("session_id", UINT), ("silent_for", FLOAT)], tag=12),
    Record(c.CloseSession, [("session_id", UINT)], tag=13),
    Record(c.DescribeSession, [("session_id", UINT), ("after", STR), ("limit", UINT)], tag=14),
    Record(c.ResumeSession, [("session_id", UINT), ("protection_key", BIN), ("node", STR)], tag=15),
    Record(c.KillSession, [("node", STR), ("session_id", UINT)], tag=16),
    Record(c.ListSessions, [("node", STR), ("after", UINT), ("limit", UINT)], tag=17),
    # semaphores: 20..39
    Record(
        c.CreateSemaphore,
        [("session_id", UINT), ("name", STR), ("limit", UINT), ("data", BIN)],
        tag=20,
    ),
    Record(
        c.Acquire,
        [
            ("session_id", UINT),
            ("name", STR),
            ("count", UINT),
            ("request_id", UINT),
            ("data", BIN),
            ("timeout", OPT_FLOAT),
            ("ephemeral", BOOL),
            ("lease_ttl", OPT_FLOAT),
            ("hold", UINT),
            ("keep_place", BOOL),  # gained (issue 27): restate a queued request in place
            ("task", UINT),  # protocol version 6: who asks (deadlock detection)
        ],
        tag=21,
        since=9,
    ),
    Record(c.Release, [("session_id", UINT), ("name", STR), ("hold", UINT)], tag=22),
    Record(
        c.CancelAcquire,
        [("session_id", UINT), ("name", STR), ("request_id", UINT), ("hold", UINT)],
        tag=23,
    ),
    Record(
        c.Renew,
        [("session_id", UINT), ("name", STR), ("lease_ttl", OPT_FLOAT), ("hold", UINT)],
        tag=24,
    ),
    Record(c.UpdateSemaphore, [("session_id", UINT), ("name", STR), ("data", BIN)], tag=25),
    Record(c.DeleteSemaphore, [("session_id", UINT), ("name", STR), ("force", BOOL)], tag=26),
    Record(
        c.SwapSemaphoreData,
        [("session_id", UINT), ("name", STR), ("expected", BIN), ("data", BIN)],
        tag=31,
    ),
    Record(
        c.ReserveUnits,
        [
            ("session_id", UINT),
            ("name", STR),
            ("count", FLOAT),
            ("max_wait", OPT_FLOAT),
            ("at", FLOAT),  # (set by the server's host: a client's is replaced)
        ],
        tag=32,
    ),
    Record(
        c.AcquireAll,
        [
            ("session_id", UINT),
            ("names", ArrayOf(STR)),
            ("holds", ArrayOf(UINT)),
            ("request_ids", ArrayOf(UINT)),
            ("count", UINT),
            ("data", BIN),
            ("timeout", OPT_FLOAT),
            ("ephemeral", BOOL),
            ("lease_ttl", OPT_FLOAT),
            ("task", UINT),  # protocol version 6: who asks (deadlock detection)
        ],
        tag=33,
        since=9,
    ),
    Record(
        c.ClaimName,
        [
            ("session_id", UINT),
            ("name", STR),
            ("claim_id", STR),
            ("at_least", FLOAT),
            ("at_most", FLOAT),
            ("data", BIN),
            ("at", FLOAT),  # (set by the server's host: a client's is replaced)
        ],
        tag=34,
    ),
    Record(
        c.ReleaseClaim,
        [("node", STR), ("name", STR), ("claim_id", STR), ("at", FLOAT)],
        tag=35,
    ),
    Record(
        c.DescribeSemaphore,
        [
            ("session_id", UINT),
            ("name", STR),
            ("owners", BOOL),
            ("waiters", BOOL),
            ("watch_data", BOOL),
            ("watch_owners", BOOL),
            ("watch_waiters", BOOL),
            ("watch_repeat", BOOL),
        ],
        tag=27,
    ),
    Record(c.CancelWatch, [("session_id", UINT), ("watch_id", UINT)], tag=28),
    Record(
        c.WatchPrefix,
        [
            ("session_id", UINT),
            ("prefix", STR),
            ("watch_data", BOOL),
            ("watch_owners", BOOL),
            ("watch_waiters", BOOL),
        ],
        tag=40,
    ),
    Record(
        c.ListSemaphores,
        [("node", STR), ("prefix", STR), ("after", STR), ("limit", UINT)],
        tag=29,
    ),
    CLUSTER_STATUS,  # (version 3: not the engine's, the server answers it: _protocol.cluster)
)

#: Any engine command, as ``[tag, field, ...]``.
COMMAND: Final = Union("command", _COMMANDS)

# -- effects ----------------------------------------------------------------------------

_ACQUIRE_FAILED: Final = Record(
    fx.AcquireFailed,
    [
        ("session_id", UINT),
        ("request_id", UINT),
        ("name", STR),
        ("code", ERROR_CODE),
        ("message", STR),
        ("hold", UINT),
    ],
    tag=2,
)
_LEASE_LOST: Final = Record(
    fx.LeaseLost,
    [
        ("session_id", UINT),
        ("name", STR),
        ("token", UINT),
        ("code", ERROR_CODE),
        ("message", STR),
        ("hold", UINT),
    ],
    tag=3,
)

_EFFECTS: Final = (
    Record(
        fx.Granted,
        [
            ("session_id", UINT),
            ("request_id", UINT),
            ("name", STR),
            ("token", UINT),
            ("count", UINT),
            ("lease_ttl", OPT_FLOAT),
            ("hold", UINT),
        ],
        tag=1,
    ),
    _ACQUIRE_FAILED,
    _LEASE_LOST,
    Record(
        fx.WatchFired,
        [
            ("session_id", UINT),
            ("watch_id", UINT),
            ("name", STR),
            ("description", Optional(SEMAPHORE_DESCRIPTION)),
        ],
        tag=4,
    ),
    Record(fx.SessionEnded, [("session_id", UINT), ("code", ERROR_CODE), ("message", STR)], tag=5),
)

#: Any engine effect, as ``[tag, field, ...]``.
EFFECT: Final = Union("effect", _EFFECTS)

#: An ending a session kept for its client (SessionState.missed): tagged as an effect.
MISSED: Final = Union("missed", (_ACQUIRE_FAILED, _LEASE_LOST))

HELD_GRANT: Final = Record(
    c.HeldGrant,
    [("name", STR), ("token", UINT), ("count", UINT), ("lease_ttl", OPT_FLOAT), ("hold", UINT)],
)
QUEUED_ACQUIRE: Final = Record(
    c.QueuedAcquire, [("name", STR), ("request_id", UINT), ("count", UINT), ("hold", UINT)]
)


# -- reply values -----------------------------------------------------------------------

_VALUES: Final = (
    Record(c.SessionInfo, [("session_id", UINT), ("timeout", FLOAT), ("seq_no", UINT)], tag=1),
    Record(
        c.AcquireResult,
        [
            ("status", ACQUIRE_STATUS),
            ("token", OPT_UINT),
            ("count", UINT),
            ("lease_ttl", OPT_FLOAT),
        ],
        tag=2,
    ),
    Record(
        v.NodeDescription,
        [
            ("name", STR),
            ("config", NODE_CONFIG),
            ("sessions", UINT),
            ("semaphores", UINT),
            ("deadlocks", ArrayOf(BROKEN_DEADLOCK)),  # protocol version 6
        ],
        tag=3,
        since=4,
    ),
    Record(
        c.DescribeResult, [("description", SEMAPHORE_DESCRIPTION), ("watch_id", OPT_UINT)], tag=4
    ),
    Record(
        c.SessionState,
        [
            ("session_id", UINT),
            ("holds", ArrayOf(HELD_GRANT)),
            ("waits", ArrayOf(QUEUED_ACQUIRE)),
            ("missed", ArrayOf(MISSED)),
            ("next_after", Optional(STR)),
        ],
        tag=5,
    ),
    Record(c.NodePage, [("names", ArrayOf(STR))], tag=6),
    Record(c.SemaphorePage, [("semaphores", ArrayOf(SEMAPHORE_SUMMARY))], tag=7),
    Record(c.SessionPage, [("sessions", ArrayOf(SESSION_SUMMARY))], tag=8),
    CLUSTER_VIEW,  # (version 3: tenure._protocol.cluster)
    Record(c.RateReservation, [("granted", BOOL), ("wait", FLOAT), ("at", FLOAT)], tag=10),
    Record(
        c.AcquireAllResult,
        [("status", ACQUIRE_STATUS), ("tokens", ArrayOf(UINT)), ("lease_ttl", OPT_FLOAT)],
        tag=11,
    ),
    Record(c.WatchArmed, [("watch_id", UINT)], tag=16),
    Record(
        ClaimRecord,
        [
            ("id", STR),
            ("token", UINT),
            ("granted_at", FLOAT),
            ("at_least", FLOAT),
            ("at_most", FLOAT),
            ("released_at", OPT_FLOAT),
            ("session_id", UINT),
            ("data", BIN),
        ],
        tag=12,
    ),
)

_NONE = type(None)

#: What each command replies: the types its reply value may have.
REPLY_TYPES: Final[Mapping[type, tuple[type, ...]]] = {
    c.CreateNode: (_NONE,),
    c.DescribeNode: (v.NodeDescription,),
    c.AlterNode: (v.NodeDescription,),
    c.DropNode: (_NONE,),
    c.CreateSession: (c.SessionInfo,),
    c.AttachSession: (c.SessionInfo,),
    c.ResumeSession: (c.SessionInfo,),
    c.DetachSession: (_NONE,),
    c.CloseSession: (_NONE,),
    c.DescribeSession: (c.SessionState,),
    c.CreateSemaphore: (_NONE,),
    c.Acquire: (c.AcquireResult,),
    c.Release: (bool,),
    c.CancelAcquire: (bool,),
    c.Renew: (float, int),
    c.UpdateSemaphore: (_NONE,),
    c.DeleteSemaphore: (_NONE,),
    c.SwapSemaphoreData: (bool,),
    c.ReserveUnits: (c.RateReservation,),
    c.AcquireAll: (c.AcquireAllResult,),
    c.ClaimName: (ClaimRecord,),
    c.ReleaseClaim: (bool,),
    c.DescribeSemaphore: (c.DescribeResult,),
    c.CancelWatch: (bool,),
    c.WatchPrefix: (c.WatchArmed,),
    c.ListNodes: (c.NodePage,),
    c.ListSemaphores: (c.SemaphorePage,),
    c.ListSessions: (c.SessionPage,),
    c.KillSession: (_NONE,),
    c.SetNodeAnnex: (_NONE,),
    c.GetNodeAnnex: (bytes,),
    ClusterStatus: (ClusterView,),
}


def reply_fits(command_type: type, value: object) -> bool:
    """Whether ``value`` has a type that replies to a command of ``command_type`` may have."""
    return type(value) in REPLY_TYPES.get(command_type, ())


class _Value(Field):
    """A reply value: nil, a bool, a float, bytes, or one of the tagged records above."""

    wire = "value"

    def __init__(self) -> None:
        self.records = Union("value", _VALUES)
        self.annotation = any_of(
            [None, bool, FLOAT.annotation, BIN.annotation, self.records.annotation]
        )
        records_dump, records_load = self.records.to_wire, self.records.from_wire
        struct = msgspec.Struct

        def dump(value: Any) -> Any:
            if value is None or value is True or value is False:
                return value
            if type(value) is float or type(value) is int:
                return as_float(value)
            try:
                return records_dump(value)
            except WireError:
                # GetNodeAnnex's reply, msgpack bin as it is: rare, so it is looked for
                # only here, costing the records (every lock's replies) nothing.
                if type(value) is bytes:
                    return value
                raise

        def load(value: Any) -> Any:
            return records_load(value) if isinstance(value, struct) else value

        self.dump, self.load = dump, load

    def check(self, raw: object) -> None:
        if raw is None or isinstance(raw, bool | bytes):
            return
        if isinstance(raw, int | float):
            FLOAT.check(raw)
        elif isinstance(raw, list):
            self.records.check(raw)
        else:
            raise WireError(
                f"expected nil, bool, float, bin or a tagged array, got {describe(raw)}"
            )


#: A reply value.
VALUE: Final = _Value()


_command_encoder: Final = msgspec.msgpack.Encoder()
_command_decoder: Final = msgspec.msgpack.Decoder(COMMAND.annotation)
_dump_command: Final = COMMAND.to_wire
_load_command: Final = COMMAND.from_wire


def encode_command(command: object) -> bytes:
    """The msgpack of ``command``'s wire layout ``[tag, field, ...]``.

    Raises:
        WireError: a field does not fit its wire type (the error names it).
    """
    struct = _dump_command(command)
    try:
        body = _command_encoder.encode(struct)
        _command_decoder.decode(body)  # checks it as a peer would
    except (msgspec.MsgspecError, TypeError, ValueError, OverflowError) as error:
        raise explain(COMMAND, plain(struct), error) from None
    return body


def decode_command(body: bytes | msgspec.Raw) -> Any:
    """The command whose wire layout ``body`` holds (the journal passes a Raw of it).

    Raises:
        WireError: ``body`` is not one valid command (the error names the field).
    """
    try:
        return _load_command(_command_decoder.decode(body))
    except (msgspec.MsgspecError, UnicodeDecodeError) as error:
        try:
            raw = msgspec.msgpack.decode(body)
        except (msgspec.MsgspecError, UnicodeDecodeError) as unreadable:
            raise WireError(f"not valid msgpack: {unreadable}") from None
        raise explain(COMMAND, raw, error) from None


def layout(record: Record) -> str:
    """The layout of a record as docs/protocol.md writes it: ``[21, session_id: uint, ...]``."""
    items = [] if record.tag is None else [str(record.tag)]
    items += [f"{name}: {field.wire}" for name, field in record.fields]
    return "[" + ", ".join(items) + "]"
