"""How a kind (:mod:`tenure._core.kinds`) is shown: a JSON object, or one line for people.

:func:`kind_json` is what ``tenure describe --json`` and the dashboard's board read
(the board leaves a claim's id and data out); :func:`kind_text` is the line
``tenure describe``, ``ls`` and ``watch`` print under a semaphore; :func:`shown_hold`
is what a hold of it shows as its data (a group's member: its own data and its
record's id, state and weight, as the dashboard's board shows it). What depends on
time (a rate limiter's level, a claim's time left) takes ``now``, UNIX seconds of
the store's clock; the dashboard's script (``static/dashboard.js``) restates the
text of a claim and a group for its live view.

Pure: no I/O, and no clock.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

from tenure._core.kinds import (
    BarrierKind,
    ClaimKind,
    GroupKind,
    Kind,
    LimiterKind,
    PlainKind,
    RWLockKind,
)
from tenure._core.members import MemberRecord, parse_record

__all__ = ["TEXT_IDS", "kind_json", "kind_text", "member_json", "shown_hold"]

#: Member ids :func:`kind_text` names before it says how many more there are.
TEXT_IDS: Final = 10


def kind_json(kind: Kind, now: float | None = None) -> dict[str, object]:
    """``kind`` as a JSON object: ``kind`` and the facts. A rate limiter's level at
    ``now`` (``available``, ``backlog``, ``full_in``) is included only if ``now`` is
    given: without it, the object depends on nothing but the state."""
    if isinstance(kind, PlainKind):
        return {"kind": kind.kind}
    if isinstance(kind, RWLockKind):
        return {
            "kind": kind.kind,
            "readers": kind.readers,
            "writer": kind.writer,
            "readers_waiting": kind.readers_waiting,
            "writers_waiting": kind.writers_waiting,
        }
    if isinstance(kind, LimiterKind):
        doc: dict[str, object] = {
            "kind": kind.kind,
            "rate": kind.rate,
            "burst": kind.burst,
            "tat": kind.tat,
        }
        if now is not None:
            level = kind.level(now)
            doc.update(available=level.available, backlog=level.backlog, full_in=level.full_in)
        return doc
    if isinstance(kind, BarrierKind):
        return {
            "kind": kind.kind,
            "rounds": kind.rounds,
            "last": kind.last,
            "arrived": kind.arrived,
            "parties": kind.parties,
        }
    if isinstance(kind, GroupKind):
        return {
            "kind": kind.kind,
            "members": len(kind.members),
            "ids": list(kind.members),
            "joining": kind.joining,
            "max_members": kind.max_members,
            "partition_members": kind.partition_members,
        }
    if isinstance(kind, ClaimKind):
        record = kind.record
        doc = {
            "kind": kind.kind,
            "id": record.id,
            "token": record.token,
            "granted_at": record.granted_at,
            "at_least": record.at_least,
            "at_most": record.at_most,
            "released_at": record.released_at,
            "session_id": record.session_id,
            "data": record.data.decode("utf-8", "replace"),
            "ends_at": record.ends_at(),
        }
        if now is not None:
            doc["left"] = kind.left(now)
        return doc
    return {"kind": kind.kind, "value": kind.value}


def shown_hold(kind: Kind, data: bytes) -> tuple[bytes, MemberRecord | None]:
    """What a hold (or a waiter) of a semaphore of ``kind`` shows as its data, and its
    member record if it is a group's member.

    A group's holders are its members, their owner data a member record (``member
    joined 8:worker-1 - DATA``: :mod:`tenure._core.members`): a member shows its own
    ``DATA``, and its id, state and weight beside it, never the record they are kept
    in. Any other hold, or a hold of a group whose data is no record, shows its data
    as it is.
    """
    record = parse_record(data) if isinstance(kind, GroupKind) else None
    return (data, None) if record is None else (record.data, record)


def member_json(record: MemberRecord) -> dict[str, object]:
    """A member record's id, state and weight (None: a plain member) as JSON."""
    return {"id": record.id, "state": record.state, "weight": record.weight}


def kind_text(kind: Kind, now: float) -> str:
    """``kind`` in one line for people (``now``: UNIX seconds of the store's clock), e.g.
    ``rwlock: 3 readers, 1 writer waiting``; empty for a plain semaphore or mutex."""
    if isinstance(kind, PlainKind):
        return ""
    if isinstance(kind, RWLockKind):
        holding = [_many(kind.readers, "reader")] if kind.readers else []
        if kind.writer:
            holding.append("a writer")
        text = "rwlock: " + (" and ".join(holding) + " holding" if holding else "nobody holding")
        waiting = [_many(kind.writers_waiting, "writer")] if kind.writers_waiting else []
        if kind.readers_waiting:
            waiting.append(_many(kind.readers_waiting, "reader"))
        return text + (", " + " and ".join(waiting) + " waiting" if waiting else "")
    if isinstance(kind, LimiterKind):
        level = kind.level(now)
        text = f"rate limiter: {_number(kind.rate)}/s, burst {_number(kind.burst)}, "
        if level.backlog > 0:
            return text + f"backlog {level.backlog:.1f} s (none available)"
        return text + f"{_number(level.available)} available now"
    if isinstance(kind, BarrierKind):
        parties = "?" if kind.parties is None else str(kind.parties)
        return f"barrier: {kind.arrived}/{parties} arrived, {_many(kind.rounds, 'round')} passed"
    if isinstance(kind, GroupKind):
        return _group_text(
            len(kind.members),
            kind.members[:TEXT_IDS],
            kind.max_members,
            kind.joining,
            kind.partition_members,
        )
    if isinstance(kind, ClaimKind):
        return _claim_text(kind, now)
    return f"counter or latch: {kind.value}"


def _group_text(
    members: int, ids: Sequence[str], max_members: int, joining: int, partition_members: int
) -> str:
    """A group in one line: ``group: 3 of at most 1000 members (a, b, c)``, then the
    joins under way and the partition's members if any; the first ``ids`` named."""
    text = f"group: {members} of at most {max_members} members"
    if ids:
        more = f", {members - len(ids)} more" if members > len(ids) else ""
        text += f" ({', '.join(ids)}{more})"
    if partition_members:
        text += f", {partition_members} in its partition"
    return text + (f", {joining} joining" if joining else "")


def _claim_text(kind: ClaimKind, now: float) -> str:
    record, left = kind.record, kind.left(now)
    text = f"claim: token {record.token}, "
    if record.released_at is not None:
        text += "released, "
    if left <= 0:
        return text + "ended"
    text += f"{_seconds(left)} left"
    if record.released_at is None:
        least = record.granted_at + record.at_least - now
        if least > 0:
            text += f" (at least {_seconds(least)})"
    return text


def _seconds(value: float) -> str:
    """A duration for people: ``42.5 s``, ``9 min 5 s``, ``3 h 2 min``."""
    if value < 60:
        return f"{value:.1f} s"
    minutes, secs = divmod(int(value), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if hours < 48 else f"{hours // 24} d {hours % 24} h"


def _many(count: int, what: str) -> str:
    return f"{count} {what}" + ("" if count == 1 else "s")


def _number(value: float) -> str:
    """A rate or a number of units: at most two decimals, no trailing zeros."""
    rounded = round(value, 2)
    if math.isfinite(rounded) and rounded == int(rounded) and abs(rounded) < 1e15:
        return str(int(rounded))
    return f"{rounded:g}"
