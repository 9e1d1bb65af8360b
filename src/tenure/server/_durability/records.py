"""The journal's records: what changed the engine, and how each is applied again.

The engine is deterministic, so its state is fully described by the commands and
ticks that changed it, each with its time. A record is one msgpack array:

* ``[1, now, command]``: a command that succeeded and can change state (read-only
  commands and watches are not logged: watches belong to connections);
  ``[1, now, command, actor]`` for a command that makes something its sender owns
  (:data:`OWNED_BY_SENDER`) when the server knows who sent it: the name of its
  connection's token (:mod:`tenure._core.quotas`), so that a replay gives it the
  same owner. (Older records have no actor: nobody's.)
* ``[2, now]``: a tick that handled at least one deadline;
* ``[3, now]``: a restart: the engine was resumed on a new process's clock, whose
  time was ``now`` (fresh recovery windows and lease TTLs, see
  :func:`tenure._core.snapshot.resume`). The records after it are on that clock.
* ``[4, now, command(, actor)]``: as ``1``, for a command that presents a session's
  protection key (:data:`KEYED`: CreateSession, AttachSession, ResumeSession),
  logged with the key's SHA-256 digest in its place
  (:func:`~tenure._core.session.digest_key`), so that the log never holds a key: the
  engine keeps only the digest, and the replay presents it as such
  (``keys_digested``). (Older logs hold such commands as ``1``, with the key: they
  replay as they are, the key hashed as it is applied.) A server older than this
  record refuses the log rather than take a digest for a key.

The data directory's log (:mod:`tenure.server._durability.journal`) and a cluster's
log in etcd (:mod:`tenure.server._cluster`) hold the same records.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Final

import msgspec

from tenure._core import (
    Acquire,
    AttachSession,
    CancelAcquire,
    CancelWatch,
    Command,
    CreateNode,
    CreateSession,
    DescribeNode,
    DescribeSemaphore,
    DescribeSession,
    DetachSession,
    Engine,
    GetNodeAnnex,
    ListNodes,
    ListSemaphores,
    ListSessions,
    NodeConfig,
    Release,
    Renew,
    ResumeSession,
    TopNames,
    WatchPrefix,
    WhyName,
)
from tenure._core.node_moves import (
    drop_moved_node,
    freeze_node,
    import_moved_node,
    reserve_session_block,
    thaw_node,
)
from tenure._core.session import digest_key
from tenure._core.snapshot import resume
from tenure._protocol.payloads import COMMAND, decode_command, encode_command
from tenure._protocol.wire import WireError
from tenure.errors import CorruptLogError, TenureError

COMMAND_RECORD: Final = 1
TICK_RECORD: Final = 2
RESUME_RECORD: Final = 3
KEYED_RECORD: Final = 4
FREEZE_RECORD: Final = 5
THAW_RECORD: Final = 6
IMPORT_RECORD: Final = 7
DROP_MOVED_RECORD: Final = 8
SESSION_BLOCK_RECORD: Final = 9

#: Commands that present a session's protection key: logged with its digest instead.
KEYED: Final = frozenset({CreateSession, AttachSession, ResumeSession})


#: Commands whose record names who sent them: what they make is the sender's.
OWNED_BY_SENDER: Final = frozenset({CreateSession, CreateNode})

#: Commands that change nothing the journal keeps.
READ_ONLY: Final = frozenset(
    {
        DescribeNode,
        GetNodeAnnex,
        DescribeSemaphore,
        DescribeSession,
        CancelWatch,
        ListNodes,
        ListSemaphores,
        ListSessions,
        TopNames,
        WatchPrefix,
        WhyName,
    }
)


def command_record(
    command: Command[object], now: float, actor: str = "", raw: bytes | None = None
) -> bytes | None:
    """The record of a command that succeeded at ``now`` (None: read-only, not logged),
    sent by ``actor`` (its token's name; "": nobody's).

    ``raw``: the command's wire layout as a client's frame carried it, decoded once
    and logged as it is (the native face's; see
    :meth:`tenure._protocol.connection.ServerConnection.command_bytes`). Encoded by
    tenure's codec, as every client of this project encodes it, those are the very
    bytes :func:`encode_command` would make (``tests/server/durability/test_raw_records.py``
    shows it for every command the native face takes); another encoder's equivalent
    layout (an int for a whole float) replays to the same command. None: the
    command is encoded here (a command of another face, or of the server's own, or
    one the host rewrote). A command of :data:`KEYED` is logged with its key's digest
    (a ``4`` record), never from its frame: the frame holds the key.
    """
    kind = type(command)
    if kind in READ_ONLY:
        return None
    record = COMMAND_RECORD
    if isinstance(command, CreateSession | AttachSession | ResumeSession):  # (KEYED)
        digested = dataclasses.replace(command, protection_key=digest_key(command.protection_key))
        layout = msgspec.Raw(encode_command(digested))
        record = KEYED_RECORD
    else:
        # The command in its wire layout, as encoded (and checked) by the protocol's codec.
        layout = msgspec.Raw(encode_command(command) if raw is None else raw)
    if actor and kind in OWNED_BY_SENDER:
        return msgspec.msgpack.encode([record, now, layout, actor])
    return msgspec.msgpack.encode([record, now, layout])


def tick_record(now: float) -> bytes:
    """The record of a tick at ``now`` that handled deadlines."""
    return msgspec.msgpack.encode([TICK_RECORD, now])


def resume_record(now: float) -> bytes:
    """The record of a resume on a new clock whose time is ``now``."""
    return msgspec.msgpack.encode([RESUME_RECORD, now])


def move_record(kind: int, now: float, subject: object, cell: str = "") -> bytes:
    """The record of a step of a node's move (module docstring): ``kind`` one of
    :data:`FREEZE_RECORD` to :data:`SESSION_BLOCK_RECORD`; ``subject`` the node's
    name, its copy (plain data) or the block."""
    if kind in (FREEZE_RECORD, IMPORT_RECORD):
        return msgspec.msgpack.encode([kind, now, subject, cell])
    return msgspec.msgpack.encode([kind, now, subject])


def apply_move(engine: Engine, kind: int, now: float, subject: object, cell: str) -> None:
    """Apply a step of a node's move (as :func:`move_record` logs it) to ``engine``.

    Raises:
        TenureError: the engine refuses it (nothing changed).
        ValueError: not such a step.
    """
    if kind == FREEZE_RECORD and isinstance(subject, str):
        freeze_node(engine, subject, cell, now)
    elif kind == THAW_RECORD and isinstance(subject, str):
        thaw_node(engine, subject, now)
    elif kind == IMPORT_RECORD and isinstance(subject, dict):
        import_moved_node(engine, subject, cell, now)
    elif kind == DROP_MOVED_RECORD and isinstance(subject, str):
        drop_moved_node(engine, subject)
    elif kind == SESSION_BLOCK_RECORD and type(subject) is int and subject >= 0:
        reserve_session_block(engine, subject)
    else:
        raise ValueError(f"not a step of a node's move: kind {kind!r}, {type(subject).__name__}")


def apply_record(engine: Engine, record: bytes, what: str, where: object) -> None:
    """Apply one logged record to ``engine`` (its effects are left for the caller).

    Raises:
        CorruptLogError: the record is unreadable or no longer applies (``what`` names
            it, ``where`` is the file or store it came from).
    """
    try:
        read = _RECORD.decode(record)
        kind, when = read.kind, read.when
        if kind == TICK_RECORD and not read.command:
            engine.tick(when)
        elif kind in (COMMAND_RECORD, KEYED_RECORD) and read.command:
            command = _logged_command(read.command)
            assert isinstance(command, Command)
            if kind == KEYED_RECORD and type(command) not in KEYED:
                raise ValueError(f"a keyed record of {type(command).__name__}")
            # A logged acquire was let wait: a replay never decides a deadlock again
            # (this engine's limit, or a later version's rule, might decide otherwise).
            limit, engine.deadlock_search_limit = engine.deadlock_search_limit, 0
            # Nor refuses a node the server let in (its --max-nodes or --max-node-*
            # may have been higher then).
            max_nodes, ceilings = engine.max_nodes, engine.node_ceilings
            engine.max_nodes, engine.node_ceilings = sys.maxsize, {}
            # Nor a quota or the memory budget (they may have been higher then); and
            # what the command makes is its logged sender's, as it was.
            enforcing, actor = engine.ledger.enforcing, engine.actor
            engine.ledger.enforcing, engine.actor = False, read.actor
            # A keyed record presents the key's digest (the key was never logged).
            engine.keys_digested = kind == KEYED_RECORD
            try:
                engine.apply(command, when)
            finally:
                engine.deadlock_search_limit = limit
                engine.max_nodes, engine.node_ceilings = max_nodes, ceilings
                engine.ledger.enforcing, engine.actor = enforcing, actor
                engine.keys_digested = False
        elif kind == RESUME_RECORD and not read.command:
            engine.take_effects()
            resume(engine, when)
        elif FREEZE_RECORD <= kind <= SESSION_BLOCK_RECORD and read.command:
            subject = msgspec.msgpack.decode(read.command)
            # As a logged command: what was let in then is let in again.
            enforcing, engine.ledger.enforcing = engine.ledger.enforcing, False
            max_nodes, engine.max_nodes = engine.max_nodes, sys.maxsize
            try:
                apply_move(engine, kind, when, subject, read.actor)
            finally:
                engine.ledger.enforcing, engine.max_nodes = enforcing, max_nodes
        else:
            raise ValueError(f"unknown record kind {kind!r}")
    except TenureError as error:
        raise CorruptLogError(str(where), None, f"{what} no longer applies: {error}") from None
    except (ValueError, TypeError) as error:  # msgspec's errors are ValueErrors
        raise CorruptLogError(str(where), None, f"{what} is unreadable: {error}") from None


class _Record(msgspec.Struct, array_like=True, forbid_unknown_fields=True, gc=False):
    """A logged record as read back: ``[kind, now]``, or ``[1, now, command(, actor)]``
    (a move's step: ``[kind, now, subject(, cell)]``, its cell where an actor is)."""

    kind: int
    when: float
    command: msgspec.Raw = msgspec.Raw()  # the command's own msgpack, decoded apart
    actor: str = ""


_RECORD: Final = msgspec.msgpack.Decoder(_Record)


def _logged_command(logged: msgspec.Raw) -> object:
    """The command of a record: in today's layout, or else in an older one (:func:`_upgraded`)."""
    try:
        return decode_command(logged)
    except WireError:
        older = msgspec.msgpack.decode(logged)
        return decode_command(msgspec.msgpack.encode(_upgraded(older)))


def _upgraded(raw: object) -> object:
    """A logged command in today's layout (layouts changed before the first release).

    * DetachSession was ``[12, session_id]`` before it counted the client's silence:
      it replays as a detach at the time it was logged (``silent_for`` 0);
    * CreateNode's NodeConfig had 8 fields before ``max_missed_per_session``: the
      node gets that setting's default;
    * Acquire, Release, CancelAcquire and Renew had no ``hold`` before a session
      could hold a semaphore more than once: they replay as hold 0.
    """
    if not isinstance(raw, list) or not raw:
        return raw
    if len(raw) == _BEFORE_HOLDS.get(raw[0], -1):
        return [*raw, 0]  # hold 0: the session's only hold, as it was then
    if raw[0] == _DETACH_TAG and len(raw) == 2:
        return [*raw, 0.0]
    config = raw[2] if raw[0] == _CREATE_NODE_TAG and len(raw) == 3 else None
    if isinstance(config, list) and len(config) == 8:
        return [*raw[:2], [*config, NodeConfig().max_missed_per_session]]
    return raw


_DETACH_TAG: Final = COMMAND.by_type[DetachSession].tag
#: Length (tag included) of the commands that gained ``hold``, as they were before.
_BEFORE_HOLDS: Final = {
    COMMAND.by_type[Acquire].tag: 9,
    COMMAND.by_type[Release].tag: 3,
    COMMAND.by_type[CancelAcquire].tag: 4,
    COMMAND.by_type[Renew].tag: 4,
}
_CREATE_NODE_TAG: Final = COMMAND.by_type[CreateNode].tag
