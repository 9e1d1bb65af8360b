"""How the commands show what they read: JSON documents for scripts, rich tables for people.

JSON carries everything exactly: owner and semaphore data as ``data`` (UTF-8 text,
undecodable bytes as ``\\xNN``) and ``data_base64`` (the bytes themselves), times as
UNIX seconds by the store's clock. Tables are for reading: a mutex's token count
(2^64-1, see :data:`tenure.MAX_COUNT`) shows as ``-``, ages as ``1m05s``.

Text that clients choose (descriptions, owner and semaphore data, names, client
identities) goes through :func:`safe` before it is shown to people, and table
cells are never read as rich markup: whoever may open a session must not be able to
write escape sequences, forged lines or reversed text on an operator's terminal.
JSON needs none of it (it escapes control characters itself).
"""

from __future__ import annotations

import base64
import sys
import time
from collections.abc import Iterable, Sequence
from typing import Any, Final

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tenure._core.kind_render import kind_json, kind_text, member_json, shown_hold
from tenure._core.kinds import GroupKind, Kind, PlainKind, classify_description
from tenure._core.values import (
    MAX_COUNT,
    ClientIdentity,
    NodeDescription,
    OwnerInfo,
    SemaphoreDescription,
    SemaphoreSummary,
    SessionSummary,
    WaiterInfo,
)
from tenure.client import LeaderState

#: Width of tables written to a pipe or a file (a terminal's own width is used otherwise).
PIPE_WIDTH = 200


#: Characters that reorder or hide text on a terminal without being control characters:
#: the bidirectional marks, embeddings, overrides and isolates (U+202E shows what
#: follows reversed).
BIDI: Final = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
#: Unicode's own line and paragraph separators, which some terminals break lines at.
SEPARATORS: Final = frozenset("\u2028\u2029")
#: How the commonest control characters are shown.
NAMED: Final = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def safe(text: str) -> str:
    """``text`` made harmless for a terminal: each control character (C0 with ESC,
    newline, CR and tab; DEL; C1), bidirectional mark and Unicode line or paragraph
    separator shown as a backslash escape
    (``\\x1b``, ``\\n``, ``\\u202e``); everything else as it is."""
    if text.isprintable():  # the common case: nothing to do (str.isprintable is false
        return text  # for every character escaped below, and for some harmless ones)
    return "".join(_escaped(char) for char in text)


def _escaped(char: str) -> str:
    code = ord(char)
    if char in NAMED:
        return NAMED[char]
    if code < 0x20 or 0x7F <= code <= 0x9F:
        return f"\\x{code:02x}"
    if char in BIDI or char in SEPARATORS:
        return f"\\u{code:04x}"
    return char


def console() -> Console:
    """A console on stdout: the terminal's width, or PIPE_WIDTH and no colour in a pipe."""
    if sys.stdout.isatty():
        return Console()
    return Console(width=PIPE_WIDTH, no_color=True, highlight=False)


def data_json(data: bytes) -> dict[str, str]:
    """``data`` as JSON fields: readable text and the exact bytes."""
    return {
        "data": data.decode("utf-8", "backslashreplace"),
        "data_base64": base64.b64encode(data).decode("ascii"),
    }


def data_text(data: bytes, width: int = 60) -> str:
    """``data`` for a table cell: text (:func:`safe`), cut to ``width`` characters."""
    text = safe(data.decode("utf-8", "backslashreplace"))
    return text if len(text) <= width else text[: width - 3] + "..."


def identity_json(identity: ClientIdentity) -> dict[str, object]:
    """A client identity as JSON."""
    return {"host": identity.host, "pid": identity.pid, "name": identity.name}


def identity_text(identity: ClientIdentity) -> str:
    """``name@host:pid``, leaving out what is not known (:func:`safe`)."""
    name, host = safe(identity.name), safe(identity.host)
    where = host + (f":{identity.pid}" if identity.pid else "")
    if name and where:
        return f"{name}@{where}"
    return name or where or "-"


def age_text(since: float | None, now: float | None = None) -> str:
    """How long ago ``since`` (UNIX seconds) was: ``4.2s``, ``3m07s``, ``2h05m``, ``3d04h``."""
    if since is None:
        return "-"
    return duration_text(max(0.0, (time.time() if now is None else now) - since))


def duration_text(seconds: float | None) -> str:
    """A duration for people: ``4.2s``, ``3m07s``, ``2h05m``, ``3d04h`` (``-`` for None)."""
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    whole = int(seconds)
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    if whole < 86400:
        return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
    return f"{whole // 86400}d{whole % 86400 // 3600:02d}h"


def count_text(count: int) -> str:
    """A token count; a mutex's (all tokens) is ``-``."""
    return "-" if count == MAX_COUNT else str(count)


def kind_of(limit: int, ephemeral: bool, counts: Iterable[int] = ()) -> str:
    """``mutex`` (an ephemeral semaphore taken whole), ``ephemeral`` or ``semaphore``."""
    if ephemeral and limit == MAX_COUNT:
        found = list(counts)
        if found and all(count == MAX_COUNT for count in found):
            return "mutex"
        return "ephemeral"
    return "semaphore"


def limit_json(kind: str, limit: int) -> int | None:
    """A limit as JSON: 1 for a mutex, None (no limit) for another ephemeral semaphore."""
    if kind == "mutex":
        return 1
    return None if limit == MAX_COUNT else limit


# -- documents ------------------------------------------------------------------------


#: What a semaphore that is no recipe's is (its holds show their data as it is).
PLAIN: Final = PlainKind("semaphore")


def member_fields(kind: Kind, data: bytes) -> dict[str, object]:
    """A group member's ``member`` (its id, state, weight and its own data), for the
    JSON of a hold or waiter of a group; nothing for any other (``data`` stays the
    owner data exactly, the record included)."""
    shown, record = shown_hold(kind, data)
    if record is None:
        return {}
    return {"member": {**member_json(record), **data_json(shown)}}


def owner_json(owner: OwnerInfo, kind: Kind = PLAIN) -> dict[str, object]:
    """One holder as JSON (``since``: UNIX seconds, store's clock); a group's member
    with its ``member`` (:func:`member_fields`)."""
    return {
        "session_id": owner.session_id,
        "description": owner.description,
        "identity": identity_json(owner.identity),
        "token": owner.token,
        "count": None if owner.count == MAX_COUNT else owner.count,
        "since": owner.since,
        **data_json(owner.data),
        **member_fields(kind, owner.data),
    }


def waiter_json(waiter: WaiterInfo, kind: Kind = PLAIN) -> dict[str, object]:
    """One waiter as JSON (``since``: when it queued, UNIX seconds, store's clock); a
    join of a group with its ``member`` (:func:`member_fields`)."""
    return {
        "session_id": waiter.session_id,
        "description": waiter.description,
        "identity": identity_json(waiter.identity),
        "count": None if waiter.count == MAX_COUNT else waiter.count,
        "since": waiter.since,
        **data_json(waiter.data),
        **member_fields(kind, waiter.data),
    }


def semaphore_json(
    node: str, found: SemaphoreDescription, now: float | None = None
) -> dict[str, Any]:
    """A described semaphore (or mutex) with its holders and waiters, as JSON.

    A name nothing holds, waits for or created is a free mutex (``exists`` false), as
    ``session.mutex(name).describe()`` says: a mutex exists only while held or awaited.
    ``recipe`` is the recipe it is and its facts (:mod:`tenure._core.kinds`), a rate
    limiter's level at ``now`` (UNIX seconds; this machine's clock if None).
    """
    counts = [owner.count for owner in found.owners] + [w.count for w in found.waiters]
    kind = kind_of(found.limit, found.ephemeral, counts) if found.exists else "mutex"
    recipe = classify_description(found)
    return {
        "node": node,
        "name": found.name,
        "exists": found.exists,
        "kind": kind,
        "limit": limit_json(kind, found.limit),
        "count": None if found.count == MAX_COUNT or not found.exists else found.count,
        "held": found.count > 0,
        "ephemeral": found.ephemeral,
        **data_json(found.data),
        "owners": [owner_json(owner, recipe) for owner in found.owners],
        "waiters": [waiter_json(waiter, recipe) for waiter in found.waiters],
        "recipe": kind_json(recipe, time.time() if now is None else now),
    }


def summary_json(summary: SemaphoreSummary) -> dict[str, object]:
    """One line of ``tenure ls NODE`` as JSON."""
    kind = kind_of(summary.limit, summary.ephemeral, [summary.count] if summary.count else [])
    return {
        "name": summary.name,
        "kind": kind,
        "limit": limit_json(kind, summary.limit),
        "count": None if summary.count == MAX_COUNT else summary.count,
        "owners": summary.owners,
        "waiters": summary.waiters,
        "ephemeral": summary.ephemeral,
    }


def session_json(session: SessionSummary) -> dict[str, object]:
    """One live session as JSON."""
    return {
        "session_id": session.session_id,
        "description": session.description,
        "identity": identity_json(session.identity),
        "recovery_window": session.timeout,
        "created_at": session.created_at,
        "expires_in": session.expires_in,
        "holds": session.holds,
        "waits": session.waits,
    }


def node_json(found: NodeDescription) -> dict[str, object]:
    """A node's settings and counts as JSON, and the deadlocks broken on it lately."""
    from dataclasses import asdict

    return {
        "name": found.name,
        "sessions": found.sessions,
        "semaphores": found.semaphores,
        "config": asdict(found.config),
        "deadlocks": [
            {"at": d.at, "session_id": d.session_id, "task": d.task, "cycle": d.cycle}
            for d in found.deadlocks
        ],
    }


def leader_json(node: str, name: str, state: LeaderState | None) -> dict[str, object]:
    """An election's leader as JSON (``leader`` false and nulls when nobody leads)."""
    if state is None or not state.has_leader:
        return {
            "node": node,
            "election": name,
            "leader": False,
            "session_id": None,
            "token": None,
            "data": "",
            "data_base64": "",
        }
    return {
        "node": node,
        "election": name,
        "leader": True,
        "session_id": state.session_id,
        "token": state.token,
        **data_json(state.data),
    }


# -- tables ---------------------------------------------------------------------------


def table(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[str]]) -> Table:
    """A plain table of text cells (never read as rich markup: ``[red]`` shows as typed;
    control characters escaped by :func:`safe`, which leaves escaped text as it is)."""
    drawn = Table(
        title=None if title is None else Text(safe(title)),
        title_justify="left",
        show_edge=False,
        pad_edge=False,
    )
    for column in columns:
        drawn.add_column(column, overflow="fold")
    for row in rows:
        drawn.add_row(*(Text(safe(cell)) for cell in row))
    return drawn


def semaphore_tables(node: str, found: SemaphoreDescription) -> list[Table | Text]:
    """What ``tenure describe`` prints: a heading line, the holders, the waiters in order."""
    if not found.exists:
        return [
            Text(
                f"mutex {found.name!r} in node {node!r}: free (nobody holds or waits for it; "
                "no semaphore of that name exists)"
            )
        ]
    doc = semaphore_json(node, found)
    limit = "none" if doc["limit"] is None else str(doc["limit"])
    held = count_text(found.count) if doc["kind"] != "mutex" else ("yes" if doc["held"] else "no")
    heading = (
        f"{doc['kind']} {found.name!r} in node {node!r}: limit {limit}, "
        f"{'held' if doc['kind'] == 'mutex' else 'tokens held'} {held}, "
        f"{len(found.owners)} holder(s), {len(found.waiters)} waiter(s)"
    )
    if found.data:
        heading += f"; data '{data_text(found.data)}'"
    now = time.time()
    kind = classify_description(found)
    recipe = kind_text(kind, now)
    # A group's holds are its members: each shows its id, state and weight, and its
    # own data, not the member record they are kept in (as the dashboard shows them).
    group = isinstance(kind, GroupKind)
    members = ["member", "state", "weight"] if group else []
    holders = table(
        "members" if group else "holders",
        ["session", "description", "client", "token", "count", *members, "held for", "data"],
        (
            [
                str(owner.session_id),
                safe(owner.description) or "-",
                identity_text(owner.identity),
                str(owner.token),
                count_text(owner.count),
                *_member_cells(kind, owner.data, group),
                age_text(owner.since, now),
                data_text(shown_hold(kind, owner.data)[0]),
            ]
            for owner in found.owners
        ),
    )
    waiters = table(
        "waiters (in the order they will be served)",
        ["#", "session", "description", "client", "count", *members, "waiting for", "data"],
        (
            [
                str(position),
                str(waiter.session_id),
                safe(waiter.description) or "-",
                identity_text(waiter.identity),
                count_text(waiter.count),
                *_member_cells(kind, waiter.data, group),
                age_text(waiter.since, now),
                data_text(shown_hold(kind, waiter.data)[0]),
            ]
            for position, waiter in enumerate(found.waiters, 1)
        ),
    )
    return [Text(heading), *([Text(safe(recipe))] if recipe else []), holders, waiters]


def _member_cells(kind: Kind, data: bytes, group: bool) -> list[str]:
    """A group member's id, state and weight cells (``-`` for a hold that is no
    member record); none for a semaphore that is no group."""
    if not group:
        return []
    record = shown_hold(kind, data)[1]
    if record is None:
        return ["-", "-", "-"]
    weight = "-" if record.weight is None else f"{record.weight:g}"
    return [safe(record.id), record.state, weight]


def summaries_table(node: str, summaries: Sequence[SemaphoreSummary]) -> Table:
    """``tenure ls NODE``: one semaphore a line."""
    rows = []
    for summary in summaries:
        doc = summary_json(summary)
        rows.append(
            [
                safe(summary.name),
                str(doc["kind"]),
                "none" if doc["limit"] is None else str(doc["limit"]),
                ("yes" if summary.count else "no")
                if doc["kind"] == "mutex"
                else count_text(summary.count),
                str(summary.owners),
                str(summary.waiters),
            ]
        )
    return table(
        f"semaphores of node {node!r}", ["name", "kind", "limit", "held", "owners", "waiters"], rows
    )


def sessions_table(node: str, sessions: Sequence[SessionSummary]) -> Table:
    """``tenure sessions NODE``: one live session a line."""
    now = time.time()
    return table(
        f"sessions of node {node!r}",
        ["id", "description", "client", "window", "age", "expires in", "holds", "waits"],
        (
            [
                str(session.session_id),
                safe(session.description) or "-",
                identity_text(session.identity),
                duration_text(session.timeout),
                age_text(session.created_at, now),
                "attached" if session.expires_in is None else duration_text(session.expires_in),
                str(session.holds),
                str(session.waits),
            ]
            for session in sessions
        ),
    )


def node_table(found: NodeDescription) -> Table:
    """``tenure node describe``: each setting and the node's counts."""
    doc = node_json(found)
    config = doc["config"]
    assert isinstance(config, dict)
    rows = [["sessions", str(found.sessions)], ["semaphores", str(found.semaphores)]]
    rows += [
        [key, "none" if value is None else f"{value:g}" if isinstance(value, float) else str(value)]
        for key, value in config.items()
    ]
    return table(f"node {found.name!r}", ["setting", "value"], rows)


def node_tables(found: NodeDescription) -> list[Table | Text]:
    """``tenure node describe`` and ``tenure describe NODE``: the settings, then the
    deadlocks the store broke on the node lately (newest first), or a line saying none."""
    parts: list[Table | Text] = [node_table(found)]
    if not found.deadlocks:
        parts.append(Text("no deadlock broken lately"))
        return parts
    rows = [
        [age_text(d.at), str(d.session_id), str(d.task or "?"), safe(d.cycle)]
        for d in reversed(found.deadlocks)
    ]
    title = f"deadlocks broken lately ({len(found.deadlocks)}: an acquire refused each)"
    parts.append(table(title, ["ago", "session", "task", "cycle it would have closed"], rows))
    return parts


def leader_text(state: LeaderState | None) -> str:
    """One line saying who leads."""
    if state is None or not state.has_leader:
        return "no leader"
    return f"{data_text(state.data, 200)}\ttoken {state.token}\tsession {state.session_id}"


def state_line(found: SemaphoreDescription) -> str:
    """One line per watched state: the time, who holds (session, token), how many wait."""
    stamp = time.strftime("%H:%M:%S")
    if not found.exists:
        return f"{stamp} {found.name!r}: does not exist"
    counts = [owner.count for owner in found.owners] + [w.count for w in found.waiters]
    kind = kind_of(found.limit, found.ephemeral, counts)
    holders = ", ".join(
        f"session {owner.session_id}"
        + (f" ({safe(owner.description)})" if owner.description else "")
        + f" token {owner.token}"
        + ("" if kind == "mutex" else f" x{owner.count}")
        for owner in found.owners
    )
    limit = limit_json(kind, found.limit)
    size = "" if kind == "mutex" else f" {count_text(found.count)}/{limit or 'none'}"
    line = f"{stamp} {kind} {found.name!r}{size}: "
    line += f"held by {holders}" if holders else "free"
    line += f"; {len(found.waiters)} waiting"
    if found.data:
        line += f"; data '{data_text(found.data)}'"
    recipe = kind_text(classify_description(found), time.time())
    return line + (f"; {safe(recipe)}" if recipe else "")
