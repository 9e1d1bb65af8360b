"""What a peer of an older protocol version is sent: :func:`for_version`.

Each protocol version is spoken on (``SUPPORTED_VERSIONS``): a server answers an
older client, and a client speaks to an older server, in the layouts that peer
knows. A field a version added is left out for an older peer (at its default it is
not even sent: :class:`tenure._protocol.wire.Record`), and a value it cannot mean is
put back to what that peer knew. Its own module, beside the messages it rewrites:
only the messages to older peers pass through it (a peer of today's version is sent
the message as it is), so it stays in the pure build, off the compiled hot path.
"""

from __future__ import annotations

import dataclasses
from typing import Final

from tenure._core.commands import Acquire, AcquireAll, CreateSession, DescribeResult
from tenure._core.effects import SessionEnded, WatchFired
from tenure._core.values import (
    NO_IDENTITY,
    NodeConfig,
    NodeDescription,
    OwnerInfo,
    SemaphoreDescription,
    WaiterInfo,
)
from tenure._core.why_report import WhyReport
from tenure._protocol.cluster import ClusterView
from tenure._protocol.messages import (
    STANDALONE,
    Failure,
    Message,
    Push,
    Reply,
    Request,
    Welcome,
)
from tenure.errors import ErrorCode

__all__ = ["for_version"]


def for_version(message: Message, version: int | None) -> Message:
    """``message`` as a peer of protocol ``version`` may receive it.

    A version-1 or version-2 peer knows Welcome without ``role`` and ``leader``; a
    version-1 peer also knows owners and waiters without who holds and since when,
    and CreateSession without the client's identity: they are left out (at their
    defaults they are not even sent, see wire.Record), so it reads the layouts it
    always did. A peer of version 1 to 5 knows Acquire and AcquireAll without the
    asking task, and NodeDescription without the broken deadlocks (left out alike),
    and does not know NodeConfig's ``max_claims``: a node's description reaches it
    with the setting at its default (left out). A peer of version 1 to 6 does not
    know NodeConfig's ``max_hold`` (nor Acquire's, which a client sends only to a
    server of version 7: :attr:`Capability.MAX_HOLD`): a node's description reaches
    it with none (left out). A peer of version 1 to 9 does not know NodeConfig's
    ``long_hold`` (a client sends it only to a server of version 10): a node's
    description reaches it with none (left out); nor a chain link's
    ``waits_elsewhere`` (what a holder waits for in other nodes): left out, the
    holder's ``waiting_for`` still names those waits. A peer of version 1 to 10 knows
    Request without ``max_staleness`` and ``min_index`` (the read goes to the leader, as
    any: it is only fresher) and Reply without ``index``: left out. A peer of version 1
    to 11 knows Welcome without ``cell``, ClusterView without ``cell`` and ``cells`` (left
    out) and no code WRONG_CELL (sent UNAVAILABLE, the same message).
    """
    if version is None or version >= 12:
        return message
    message = _before_version_12(message)
    if version >= 11:
        return message
    message = _before_version_11(message)
    if version >= 10:
        return message
    message = _before_version_10(message)
    if version >= 7:  # (versions 8 and 9 changed no layout, only added commands)
        return message
    message = _before_version_7(message)
    if version >= 6:
        return message
    message = _before_version_6(message)
    if version >= 3:  # versions 4 and 5 changed no layout, only added commands
        return message
    if type(message) is Welcome:
        return dataclasses.replace(message, role=STANDALONE, leader=None)
    if version != 1:
        return message
    if type(message) is Request and isinstance(message.command, CreateSession):
        return Request(
            message.request_id, dataclasses.replace(message.command, identity=NO_IDENTITY)
        )
    if type(message) is Reply and isinstance(message.value, DescribeResult):
        described = message.value.description
        return Reply(
            message.request_id,
            dataclasses.replace(message.value, description=_version_1(described)),
        )
    if type(message) is Push and isinstance(message.effect, WatchFired):
        effect = message.effect
        if effect.description is not None:
            return Push(dataclasses.replace(effect, description=_version_1(effect.description)))
    return message


def _before_version_12(message: Message) -> Message:
    """``message`` without what version 12 added: Welcome's ``cell``, ClusterView's
    ``cell`` and ``cells`` (left out), and the code WRONG_CELL, which such a peer
    reads as UNAVAILABLE (the message still names the cell that serves the node); in a
    SessionEnded (its session's node moves to another cell), as SESSION_EXPIRED."""
    if type(message) is Welcome and message.cell:
        return dataclasses.replace(message, cell="")
    if type(message) is Reply and type(message.value) is ClusterView and message.value.cell:
        view = dataclasses.replace(message.value, cell="", cells=())
        return Reply(message.request_id, view, message.index)
    if type(message) is Failure and message.code == ErrorCode.WRONG_CELL:
        return Failure(message.request_id, ErrorCode.UNAVAILABLE, message.message)
    if (
        type(message) is Push
        and type(message.effect) is SessionEnded
        and message.effect.code == ErrorCode.WRONG_CELL
    ):
        # (Its node moves to another cell, which such a peer cannot follow: the session
        # is as good as ended for it, and it must stop counting on what it held.)
        ended = SessionEnded(
            message.effect.session_id, ErrorCode.SESSION_EXPIRED, message.effect.message
        )
        return Push(ended)
    return message


def _before_version_11(message: Message) -> Message:
    """``message`` without what version 11 added: Request's ``max_staleness`` and
    ``min_index``, Reply's ``index`` (at their defaults: not even sent)."""
    if type(message) is Request and (message.max_staleness is not None or message.min_index):
        return Request(message.request_id, message.command)
    if type(message) is Reply and message.index:
        return Reply(message.request_id, message.value)
    return message


def _before_version_10(message: Message) -> Message:
    """``message`` without what version 10 added: NodeConfig's ``long_hold`` and a
    chain link's ``waits_elsewhere`` (left empty: not even sent)."""
    if type(message) is Reply:
        value = message.value
        if type(value) is NodeDescription and value.config.long_hold is not None:
            config = dataclasses.replace(value.config, long_hold=None)
            return Reply(message.request_id, dataclasses.replace(value, config=config))
        if type(value) is WhyReport and value.chain:
            chain = tuple(
                dataclasses.replace(link, waits_elsewhere=()) if link.waits_elsewhere else link
                for link in value.chain
            )
            return Reply(message.request_id, dataclasses.replace(value, chain=chain))
    return message


def _before_version_7(message: Message) -> Message:
    """``message`` without what version 7 added: NodeConfig's ``max_hold`` (None, it
    is not even sent)."""
    if type(message) is Reply:
        value = message.value
        if type(value) is NodeDescription and value.config.max_hold is not None:
            config = dataclasses.replace(value.config, max_hold=None)
            return Reply(message.request_id, dataclasses.replace(value, config=config))
    return message


#: NodeConfig's default ``max_claims``: what a peer of version 1 to 5 is told.
_DEFAULT_MAX_CLAIMS: Final = NodeConfig().max_claims


def _before_version_6(message: Message) -> Message:
    """``message`` without what version 6 added: the asking task, the broken deadlocks,
    and NodeConfig's ``max_claims`` (at its default, it is not even sent)."""
    if type(message) is Request:
        command = message.command
        if (type(command) is Acquire or type(command) is AcquireAll) and command.task:
            return Request(message.request_id, dataclasses.replace(command, task=0))
    elif type(message) is Welcome:
        if not message.deadlock_detection:
            return dataclasses.replace(message, deadlock_detection=True)
    elif type(message) is Reply:
        value = message.value
        if type(value) is NodeDescription:
            config = value.config
            if config.max_claims != _DEFAULT_MAX_CLAIMS:
                config = dataclasses.replace(config, max_claims=_DEFAULT_MAX_CLAIMS)
            if value.deadlocks or config is not value.config:
                described = dataclasses.replace(value, config=config, deadlocks=())
                return Reply(message.request_id, described)
    return message


def _version_1(description: SemaphoreDescription) -> SemaphoreDescription:
    return dataclasses.replace(
        description,
        owners=tuple(OwnerInfo(o.session_id, o.count, o.data, o.token) for o in description.owners),
        waiters=tuple(WaiterInfo(w.session_id, w.count, w.data) for w in description.waiters),
    )
