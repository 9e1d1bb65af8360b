"""The untagged records inside commands and replies: settings, identities, descriptions. [compiled]

Their position says what they are (no tag): a node's settings, a client's identity,
a broken deadlock, owners and waiters, summaries and descriptions; and the small
enumerations (error codes, an acquire's status) and optional wire types the
commands' and replies' layouts share (:mod:`tenure._protocol.payloads`).
"""

from __future__ import annotations

from typing import Final

from tenure._core import commands as c
from tenure._core import values as v
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
)
from tenure.errors import ErrorCode

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
        ("max_hold", OPT_FLOAT),  # protocol version 7: left out when None
        ("long_hold", OPT_FLOAT),  # protocol version 10: left out when None
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
