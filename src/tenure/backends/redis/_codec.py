"""How values travel between Python and the functions: counts, TTLs, descriptions, pushes.

Counts go up to 2**64-1, past a Lua number's 53 exact bits, so they travel as 16
hex digits (the functions add and compare them in 32-bit halves). TTLs come back
as numbers, -1 for none. Node settings travel as text, in :data:`CONFIG_FIELDS`
order (the functions' ``CONFIG_FIELDS``).
"""

from __future__ import annotations

from typing import Any, Final

from tenure._core import (
    AcquireFailed,
    Granted,
    LeaseLost,
    QueuedAcquire,
    SessionEnded,
    SessionState,
)
from tenure._core import HeldGrant as HeldPage
from tenure._core.values import (
    MAX_COUNT,
    BrokenDeadlock,
    ClientIdentity,
    NodeConfig,
    NodeDescription,
    OwnerInfo,
    SemaphoreDescription,
    SemaphoreSummary,
    SessionSummary,
    WaiterInfo,
)
from tenure.backends._base import Grant, HeldGrant
from tenure.errors import ErrorCode

__all__ = [
    "CONFIG_FIELDS",
    "config_args",
    "config_text",
    "decode_config",
    "decode_count",
    "decode_description",
    "decode_effect",
    "decode_holds",
    "decode_node",
    "decode_semaphore_page",
    "decode_session_page",
    "decode_session_state",
    "decode_ttl",
    "encode_count",
    "encode_timeout",
]

#: NodeConfig fields in the order the functions keep them (CONFIG_FIELDS in lua/30_nodes.lua).
#: Positional: the hash stores short keys ('st' is the recovery window, named
#: session_timeout before), so the rename changed no stored name.
CONFIG_FIELDS: Final = (
    "recovery_window",
    "lock_delay",
    "default_lease",
    "max_sessions",
    "max_semaphores",
    "max_waiters",
    "max_data_size",
    "max_watches_per_session",
    "max_missed_per_session",
    "max_claims",  # (a node made before claims has none: its default)
    "max_hold",  # (a node made before max_hold has none: None)
)


def encode_count(count: int) -> str:
    """A count as the functions take it: 16 hex digits."""
    return f"{count:016x}"


def decode_count(raw: bytes) -> int:
    """A count the functions answered (16 hex digits)."""
    value = int(raw, 16)
    return MAX_COUNT if value == MAX_COUNT else value  # the one shared int, as check_count


def decode_ttl(raw: Any) -> float | None:
    """A lease TTL the functions answered (-1: none)."""
    value = float(raw)
    return None if value < 0 else value


#: What a session's push says happened to it, as the engine's effect.
SessionEffect = Granted | AcquireFailed | LeaseLost | SessionEnded


def decode_effect(session_id: int, push: dict[str, bytes]) -> SessionEffect | None:
    """The engine's effect a push to session ``session_id`` carries (lua/00_core.lua,
    ``push``: ``G`` granted, ``F`` an acquire failed, ``L`` a grant lost, ``E`` the
    session ended); None for a push of another kind."""
    kind = push["k"]
    if kind == b"G":
        return Granted(
            session_id,
            int(push["req"]),
            "",
            int(push["tok"]),
            decode_count(push["cnt"]),
            decode_ttl(push["ttl"]),
            int(push["hold"]),
        )
    if kind == b"F":
        code, message = ErrorCode(int(push["code"])), push["msg"].decode()
        return AcquireFailed(session_id, int(push["req"]), "", code, message)
    if kind == b"L":
        name, hold, token = push["name"].decode(), int(push["hold"]), int(push["tok"])
        code, message = ErrorCode(int(push["code"])), push["msg"].decode()
        return LeaseLost(session_id, name, token, code, message, hold)
    if kind == b"E":
        code, message = ErrorCode(int(push["code"])), push["msg"].decode()
        return SessionEnded(session_id, code, message)
    return None


def decode_node(name: str, raw: list[Any]) -> NodeDescription:
    """A node's description as the functions answered it (lua/30_nodes.lua, config_reply):
    the settings and the node's name, the counts, and the deadlocks broken lately (newest
    first there; oldest first here, as the engine lists them)."""
    at = len(CONFIG_FIELDS) + 1  # (after the settings, the node's name)
    broken = list(raw[at + 2]) if len(raw) > at + 2 else []
    deadlocks = tuple(
        BrokenDeadlock(float(when), int(sid), int(task), _text(cycle))
        for when, sid, task, cycle in reversed(broken)
    )
    return NodeDescription(name, decode_config(raw), int(raw[at]), int(raw[at + 1]), deadlocks)


def config_args(config: NodeConfig) -> list[str]:
    """The settings as the functions keep them (text, CONFIG_FIELDS order)."""
    values = []
    for field in CONFIG_FIELDS:
        value = getattr(config, field)
        values.append(
            "" if value is None else repr(float(value)) if isinstance(value, float) else str(value)
        )
    return values


def decode_config(raw: list[Any]) -> NodeConfig:
    """The settings the functions answered (CONFIG_FIELDS order)."""
    text = config_text(raw)
    values: dict[str, Any] = {}
    for field, value in zip(CONFIG_FIELDS, text, strict=True):
        if field == "max_claims" and not value:
            continue  # (kept by a library before claims: the default)
        if field in ("default_lease", "max_hold"):
            values[field] = float(value) if value else None
        elif field in ("recovery_window", "lock_delay"):
            values[field] = float(value)
        else:
            values[field] = int(value)
    return NodeConfig(**values)


def config_text(raw: list[Any]) -> list[str]:
    """The settings the functions answered, as text (a setting the node's hash lacks,
    one newer than the library that made it, is ``""``)."""
    return ["" if value is None else bytes(value).decode() for value in raw[: len(CONFIG_FIELDS)]]


def _text(raw: Any) -> str:
    return bytes(raw).decode("utf-8")


def _since(raw: Any) -> float | None:
    """A time the functions answered ('' where the record is older than the field)."""
    return float(raw) if raw else None


def _who(raw: Any) -> tuple[str, ClientIdentity]:
    """A session's description and identity, as ``who`` in lua/50_semaphore_ops.lua answers."""
    description, host, pid, name = raw
    return _text(description), ClientIdentity(_text(host), int(pid or 0), _text(name))


def _owner(raw: Any) -> OwnerInfo:
    sid, count, data, token, since, who = raw
    description, identity = _who(who)
    return OwnerInfo(
        int(sid), decode_count(count), bytes(data), int(token), description, identity, _since(since)
    )


def _waiter(raw: Any) -> WaiterInfo:
    sid, count, data, since, who = raw
    description, identity = _who(who)
    return WaiterInfo(
        int(sid), decode_count(count), bytes(data), description, identity, _since(since)
    )


def decode_description(name: str, raw: Any) -> SemaphoreDescription:
    """The description a function answered (``describe`` in lua/50_semaphore_ops.lua)."""
    if raw[0] == 0:
        return SemaphoreDescription.missing(name)
    _, limit, count, data, ephemeral, owners, waiters = raw
    return SemaphoreDescription(
        name=name,
        limit=decode_count(limit),
        count=decode_count(count),
        data=bytes(data),
        ephemeral=bool(ephemeral),
        owners=tuple(_owner(owner) for owner in owners),
        waiters=tuple(_waiter(waiter) for waiter in waiters),
    )


def decode_semaphore_page(raw: Any) -> list[SemaphoreSummary]:
    """A page ``list_semaphores`` (lua/60_listing.lua) answered."""
    return [
        SemaphoreSummary(
            _text(name),
            decode_count(limit),
            decode_count(count),
            int(owners),
            int(waiters),
            bool(ephemeral),
        )
        for name, limit, count, owners, waiters, ephemeral in raw
    ]


def decode_session_page(raw: Any) -> list[SessionSummary]:
    """A page ``list_sessions`` (lua/60_listing.lua) answered."""
    return [
        SessionSummary(
            int(sid),
            _text(description),
            ClientIdentity(_text(host), int(pid or 0), _text(name)),
            float(window),
            _since(created),
            float(expires_in),
            int(holds),
            int(waits),
        )
        for sid, description, host, pid, name, window, created, expires_in, holds, waits in raw
    ]


def encode_timeout(timeout: float | None) -> str:
    """A timeout as the acquire functions take it ("": forever)."""
    return "" if timeout is None else repr(float(timeout)) if timeout else "0"


def decode_holds(raw: Any) -> list[HeldGrant]:
    """A session's holds as ``describe_session`` and ``resume_session`` answer them:
    name, hold, token, count, TTL, data each."""
    return [
        HeldGrant(n.decode(), Grant(int(t), decode_count(c), decode_ttl(ttl), int(h)), bytes(data))
        for n, h, t, c, ttl, data in raw
    ]


def decode_session_state(session_id: int, holds_raw: Any, waits_raw: Any) -> SessionState:
    """What ``describe_session`` answered, as the engine's one page of a session."""
    holds = tuple(
        HeldPage(n.decode(), int(t), decode_count(c), decode_ttl(ttl), int(h))
        for n, h, t, c, ttl, _ in holds_raw
    )
    waits = tuple(
        QueuedAcquire(n.decode(), int(r), decode_count(c), int(h)) for n, h, r, c in waits_raw
    )
    return SessionState(session_id, holds, waits)
