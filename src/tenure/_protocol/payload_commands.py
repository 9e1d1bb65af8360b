"""What requests carry: each engine command's tagged layout, and the journal's codec. [compiled]

Commands are tagged arrays ``[tag, field, ...]`` (:mod:`tenure._protocol.payloads`
says what is stable about tags and layouts). Commands also travel on their own:
:func:`encode_command` and :func:`decode_command` are the journal's codec (it logs
each command in its wire layout).
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from tenure._core import commands as c
from tenure._protocol.admin import READ_BACKUP, RELOAD_FILES
from tenure._protocol.cluster import CLUSTER_STATUS
from tenure._protocol.payload_records import (
    CLIENT_IDENTITY,
    NODE_CHANGES,
    NODE_CONFIG,
    OPT_FLOAT,
    OPT_STR,
)
from tenure._protocol.wire import (
    BIN,
    BOOL,
    FLOAT,
    STR,
    UINT,
    ArrayOf,
    Record,
    Secret,
    Union,
    WireError,
    explain,
    plain,
)

#: A protection key or a hand-off's secret: a credential, whose value a malformed
#: message's error (logged, and said in the GoingAway reason) never shows.
_KEY: Final = Secret(BIN)

_COMMANDS: Final = (
    # nodes: 1..9
    Record(c.CreateNode, [("name", STR), ("config", NODE_CONFIG)], tag=1),
    Record(c.DescribeNode, [("name", STR)], tag=2),
    Record(c.AlterNode, [("name", STR), ("changes", NODE_CHANGES)], tag=3),
    Record(c.DropNode, [("name", STR), ("force", BOOL)], tag=4),
    Record(c.ListNodes, [("after", STR), ("limit", UINT)], tag=5),
    Record(c.SetNodeAnnex, [("name", STR), ("key", STR), ("value", BIN)], tag=6),
    Record(c.GetNodeAnnex, [("name", STR), ("key", STR)], tag=7),
    Record(  # protocol version 9
        c.WhyName, [("node", STR), ("name", STR), ("after", UINT), ("limit", UINT)], tag=8
    ),
    Record(  # protocol version 9
        c.TopNames,
        [("node", STR), ("window", FLOAT), ("sort", STR), ("limit", UINT)],
        tag=9,
    ),
    # sessions: 10..19
    Record(
        c.CreateSession,
        [
            ("node", STR),
            ("protection_key", _KEY),
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
            ("protection_key", _KEY),
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
    Record(
        c.ResumeSession, [("session_id", UINT), ("protection_key", _KEY), ("node", STR)], tag=15
    ),
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
            ("max_hold", OPT_FLOAT),  # protocol version 7: the grant's bound
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
    # protocol version 7: a hold's hand-off (tenure._core.handlers.handoffs)
    Record(
        c.OfferHold,
        [("session_id", UINT), ("name", STR), ("digest", BIN), ("hold", UINT)],
        tag=41,
    ),
    Record(
        c.AdoptHold,
        [
            ("session_id", UINT),
            ("name", STR),
            ("holder", UINT),
            ("holder_hold", UINT),
            ("token", UINT),
            ("secret", _KEY),
            ("hold", UINT),
        ],
        tag=42,
    ),
    CLUSTER_STATUS,  # (version 3: not the engine's, the server answers it: _protocol.cluster)
    # protocol version 8: an operator's acts on the server itself (_protocol.admin)
    READ_BACKUP,
    RELOAD_FILES,
)

#: Any engine command, as ``[tag, field, ...]``.
COMMAND: Final = Union("command", _COMMANDS)


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
