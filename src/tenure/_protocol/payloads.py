"""What requests, replies and pushes carry: engine commands, reply values, effects. [compiled]

Every :mod:`tenure._core` command, reply value and effect has one schema here, a
:class:`~tenure._protocol.wire.Record` listing its fields in dataclass order with
their wire types. Commands and effects are tagged arrays ``[tag, field, ...]``;
the tags are stable: a tag is never reused or renumbered, and any change to a
layout is a new protocol version. The tests check that every dataclass field is
listed, in order (tests/protocol/test_payloads.py), and that docs/protocol.md shows
each layout exactly as :func:`layout` renders it (tests/protocol/test_docs.py).

The commands' layouts and the journal's codec of a command are
:mod:`~tenure._protocol.payload_commands`'s, the untagged records inside commands and
replies :mod:`~tenure._protocol.payload_records`'s; this module has the effects and the
reply values, and re-exports the others' names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import msgspec

from tenure._core import commands as c
from tenure._core import effects as fx
from tenure._core import values as v
from tenure._core.claims import ClaimRecord
from tenure._core.top_report import TopReport
from tenure._core.why_report import WhyReport
from tenure._protocol.admin import FILES_RELOADED, FilesReloaded, ReadBackup, ReloadFiles
from tenure._protocol.blocking import TOP_REPORT, WHY_REPORT
from tenure._protocol.cluster import CLUSTER_VIEW, ClusterStatus, ClusterView
from tenure._protocol.payload_commands import (
    COMMAND,
    decode_command,
    encode_command,
)
from tenure._protocol.payload_records import (
    ACQUIRE_STATUS,
    BROKEN_DEADLOCK,
    CLIENT_IDENTITY,
    ERROR_CODE,
    NODE_CHANGES,
    NODE_CONFIG,
    OPT_FLOAT,
    OPT_UINT,
    OWNER_INFO,
    SEMAPHORE_DESCRIPTION,
    SEMAPHORE_SUMMARY,
    SESSION_SUMMARY,
    WAITER_INFO,
)
from tenure._protocol.wire import (
    BIN,
    BOOL,
    FLOAT,
    STR,
    UINT,
    ArrayOf,
    Field,
    Optional,
    Record,
    Union,
    WireError,
    any_of,
    as_float,
    describe,
)

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
    | FilesReloaded
    | WhyReport
    | TopReport
    | c.RateReservation
    | c.AcquireAllResult
    | c.WatchArmed
    | ClaimRecord
    | bool
    | float
    | bytes
    | None
)

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
    FILES_RELOADED,  # (version 8: tenure._protocol.admin)
    WHY_REPORT,  # (version 9: tenure._protocol.blocking)
    TOP_REPORT,  # (version 9: tenure._protocol.blocking)
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
    c.OfferHold: (c.AcquireResult,),
    c.AdoptHold: (c.AcquireResult,),
    c.DescribeSemaphore: (c.DescribeResult,),
    c.CancelWatch: (bool,),
    c.WatchPrefix: (c.WatchArmed,),
    c.ListNodes: (c.NodePage,),
    c.ListSemaphores: (c.SemaphorePage,),
    c.ListSessions: (c.SessionPage,),
    c.WhyName: (WhyReport,),
    c.TopNames: (TopReport,),
    c.KillSession: (_NONE,),
    c.SetNodeAnnex: (_NONE,),
    c.GetNodeAnnex: (bytes,),
    ClusterStatus: (ClusterView,),
    ReadBackup: (bytes,),
    ReloadFiles: (FilesReloaded,),
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
                # GetNodeAnnex's and ReadBackup's reply, msgpack bin as it is: rare, so it
                # is looked for only here, costing the records (every lock's replies)
                # nothing.
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


def layout(record: Record) -> str:
    """The layout of a record as docs/protocol.md writes it: ``[21, session_id: uint, ...]``."""
    items = [] if record.tag is None else [str(record.tag)]
    items += [f"{name}: {field.wire}" for name, field in record.fields]
    return "[" + ", ".join(items) + "]"
