"""The entries of the dashboard's view: one semaphore, one holder, one session, a
node's deadlocks (:mod:`tenure.server._http.board` says what a view holds and how
it is bounded; this module says what each entry is).

Every string a client chose (a name, a description, an identity, data, a deadlock's
cycle, which names semaphores) is shown as text as the entry is made
(:mod:`tenure.server._http.shown`); the rest (keys, kinds) is the server's own ASCII.

Every entry's work is bounded by what it is given: a semaphore's recipe is read
from ``scan`` of its holders at most (:func:`scan_split`), its first ``max_holders``
owners and waiters are shown, and a session's holds are counted among its first
:data:`HOLDS_SCAN` semaphores.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from collections.abc import Set as AbstractSet
from typing import Final, TypeVar

from tenure._core import Engine
from tenure._core.kind_render import kind_json
from tenure._core.kinds import GroupKind, Kind, classify
from tenure._core.members import parse_record
from tenure._core.semaphore import Owner, Semaphore, Waiter
from tenure._core.session import Session
from tenure._core.values import MAX_COUNT, ClientIdentity
from tenure.server._http.shown import shown_data, shown_text

__all__ = [
    "HOLDS_SCAN",
    "Json",
    "deadlocks_entry",
    "kind_of",
    "scan_split",
    "semaphore_entry",
    "session_cost",
    "session_entry",
]

T = TypeVar("T")

#: JSON-ready data: what a view is made of.
Json = dict[str, object]

#: What :func:`kind_json` gives that the board leaves out (a claim's id and data).
_NOT_SHOWN: Final = frozenset({"id", "data"})

#: Semaphores of one session whose holds (and waits) are counted one by one: past
#: this, a session's ``holds`` is the number of semaphores it holds (each at least
#: once; a session's several holds on one semaphore, its tasks', counted once), so
#: that a session holding 100,000 mutexes costs a view no more than 100 do.
HOLDS_SCAN: Final = 100


def kind_of(sem: Semaphore) -> str:
    """``mutex`` (every token of an ephemeral semaphore of limit MAX_COUNT: a mutex's or
    an election's hold), ``ephemeral`` (another ephemeral one) or ``semaphore``; the
    rule of ``tenure ls``."""
    if not sem.ephemeral:
        return "semaphore"
    # A hold of every token leaves room for no other: the first owner and the first
    # waiter tell (bounded work, however long the queue).
    first: list[Owner | Waiter] = [*_first(sem.each_owner(), 1), *_first(sem.waiters.values(), 1)]
    if sem.limit == MAX_COUNT and first and all(held.count == MAX_COUNT for held in first):
        return "mutex"
    return "ephemeral"


def scan_split(owners: int, waiters: int, scan: int) -> tuple[int, int]:
    """(owners, waiters) read of a semaphore with ``owners`` and ``waiters`` to tell its
    recipe, ``scan`` in all at most: half for each, what one side leaves to the other
    (a readers-writer lock's first writer waiting is seen behind 10,000 readers)."""
    waiting = min(waiters, scan // 2)
    holding = min(owners, scan - waiting)
    return holding, min(waiters, scan - holding)


def semaphore_entry(
    sem: Semaphore, engine: Engine, shift: float, scan: int, max_holders: int, max_chars: int
) -> Json:
    """One semaphore: its kind and counts, its first ``max_holders`` owners and waiters,
    and its recipe read from ``scan`` of them at most (:func:`scan_split`; ``scanned``
    says how many, ``counted_all`` whether that was all of them)."""
    owners = sem.owners
    waiters = sem.waiters
    kind = kind_of(sem)
    held = bool(owners)
    if kind == "mutex":
        # A mutex admits one holder: limit 1 and count 1 or 0, not 2**64-1 tokens.
        limit: int | None = 1
        count: int | None = 1 if held else 0
    else:
        limit = None if sem.limit == MAX_COUNT else sem.limit  # None: no limit
        count = None if sem.count == MAX_COUNT else sem.count
    holding, waiting = scan_split(len(owners), len(waiters), scan)
    recipe = classify(
        sem.name,
        limit=sem.limit,
        ephemeral=sem.ephemeral,
        data=sem.data,
        owners=_first(owners.values(), holding),
        waiters=_first(waiters.values(), waiting),
    )
    # A group's holders are its members: their owner data is a member record.
    each = (kind, engine, shift, max_chars, isinstance(recipe, GroupKind))
    return {
        "name": shown_text(sem.name),
        "kind": kind,
        "limit": limit,
        "count": count,
        "held": held,
        "ephemeral": sem.ephemeral,
        "owners_total": len(owners),
        "owners": [_holder(o, *each, token=o.token) for o in _first(owners.values(), max_holders)],
        "waiters_total": len(waiters),
        "waiters": [_holder(w, *each) for w in _first(waiters.values(), max_holders)],
        # No clock read here: a limiter's TAT is an instant (UNIX seconds, the server's
        # wall clock), and the page works out its level from its own clock.
        "recipe": {
            **_recipe_json(recipe, max_holders, max_chars),
            "scanned": holding + waiting,
            "counted_all": holding == len(owners) and waiting == len(waiters),
        },
    }


def _recipe_json(recipe: Kind, max_holders: int, max_chars: int) -> Json:
    """:func:`kind_json`, but a group's member ids (which its clients chose) are the
    first ``max_holders`` only, each shown as data is (:func:`shown_data`), and a
    claim's id and owner data are left out (its id is what releases it)."""
    found = {k: v for k, v in kind_json(recipe).items() if k not in _NOT_SHOWN}
    if isinstance(recipe, GroupKind):
        found["ids"] = [
            shown_data(member_id.encode(), max_chars)[0]
            for member_id in recipe.members[:max_holders]
        ]
    return found


def _holder(
    held: Owner | Waiter,
    kind: str,
    engine: Engine,
    shift: float,
    max_chars: int,
    group: bool,
    token: int | None = None,
) -> Json:
    session = engine.sessions.get(held.session_id)
    record = parse_record(held.data) if group else None
    # A member shows its id and its own data, not the record they are kept in
    # ("member joined 8:worker-1 - ..."), as ``tenure group ls`` does.
    shown = held.data if record is None else record.data
    data, cut = shown_data(shown, max_chars)
    info: Json = {
        "session_id": held.session_id,
        # A mutex's holder holds it (1); a hold of every token elsewhere is None.
        "count": 1 if kind == "mutex" else None if held.count == MAX_COUNT else held.count,
        "description": shown_text(session.description) if session is not None else "",
        "identity": _identity(session.identity if session is not None else None),
        # None while a connection keeps its session; else its client is disconnected,
        # and this is when the server will end the session (UNIX s) unless it returns.
        "expires_at": _expires_at(session, shift),
        "since": held.since + shift,
        "data": data,
        "data_bytes": len(shown),
        "data_truncated": cut,
    }
    if record is not None:
        info["member"] = {
            "id": shown_data(record.id.encode(), max_chars)[0],
            "state": record.state,
            "weight": record.weight,
        }
    if token is not None:
        info["token"] = token
    return info


def session_cost(session: Session) -> int:
    """The work of :func:`session_entry` (what a slice counts): one, and one per
    semaphore whose holds or waits it counts."""
    return 1 + min(len(session.held), HOLDS_SCAN) + min(len(session.waits), HOLDS_SCAN)


def session_entry(session: Session, now: float, shift: float) -> Json:
    """One session: who, its window, when it expires, its holds and waits (counted
    among its first :data:`HOLDS_SCAN` semaphores: module docstring)."""
    expires_at = session.expires_at
    return {
        "session_id": session.session_id,
        "description": shown_text(session.description),
        "identity": _identity(session.identity),
        "timeout": session.timeout,
        "created_at": session.created_at + shift,
        # None while a connection keeps it; else when the server will end it (UNIX s).
        "expires_at": None if expires_at is None else max(expires_at, now) + shift,
        "holds": _count(session.held, session.holds_on),
        "waits": _count(session.waits, session.waits_on),
    }


def _count(names: AbstractSet[str], numbers: Callable[[str], Iterator[int]]) -> int:
    """Holds (or waits) on ``names``, each counted if there are :data:`HOLDS_SCAN` or
    fewer, else one per name (module docstring)."""
    if len(names) > HOLDS_SCAN:
        return len(names)
    return sum(1 for name in names for _ in numbers(name))


def deadlocks_entry(engine: Engine, node: str, shift: float) -> list[Json]:
    """The deadlocks the server broke on ``node`` lately (the engine keeps the latest
    MAX_DEADLOCKS_SHOWN), newest first: when (UNIX seconds), who asked, the cycle."""
    return [
        {
            "at": broken.at + shift if broken.at is not None else None,
            "session_id": broken.session_id,
            "task": broken.task,
            "cycle": shown_text(broken.cycle),
        }
        for broken in reversed(engine.broken_deadlocks.get(node, ()))
    ]


def _expires_at(session: Session | None, shift: float) -> float | None:
    """When the server will end ``session``, whose connection is gone (UNIX seconds);
    None while a connection keeps it."""
    if session is None or session.expires_at is None:
        return None
    return session.expires_at + shift


def _identity(identity: ClientIdentity | None) -> Json:
    if identity is None:
        return {"host": "", "pid": 0, "name": ""}
    return {
        "host": shown_text(identity.host),
        "pid": identity.pid,
        "name": shown_text(identity.name),
    }


def _first(items: Iterable[T], count: int) -> Iterator[T]:
    for index, item in enumerate(items):
        if index >= count:
            return
        yield item
