"""What the dashboard shows: a bounded view of the engine, as JSON-ready data.

:func:`board` reads the engine the server runs, on its event loop between two steps
(as ``/metrics`` does), never through a client connection. Every part is bounded by
a :class:`BoardLimits` (the ``--dashboard-max-*`` settings): the first nodes by name,
the first semaphores of each by name, the first sessions by id, the first owners and
waiters of each semaphore in grant and queue order, and the deadlocks broken on each
lately (a handful: the engine keeps no more); each list comes with its total,
so the page says "20 of 3000". Only the nodes ``may_see`` allows are shown (a token
limited to some nodes does not learn the others' names, as with ListNodes).

Mutexes and elections are told apart from counting semaphores as the client's recipes
make them (``tenure.client``, docs/concepts.md): a mutex takes every token of an
ephemeral semaphore of limit ``MAX_COUNT``, and an election *is* such a mutex, whose
holder is the leader and whose owner data is the leader's data (its address, say);
the store keeps nothing else that could tell them apart. So a semaphore's ``kind``
is ``mutex`` (shown "mutex / election"), ``ephemeral`` or ``semaphore``, and its
``limit``, ``count`` and holders' counts are what they mean: a mutex has limit 1, a
count of 1 while held, holders of count 1; an ephemeral semaphore of no limit has
``limit`` null. Each semaphore's ``recipe`` says which recipe made it and its facts
(:func:`tenure._core.kinds.classify`: a readers-writer lock's readers and writers, a
rate limiter's rate, burst and TAT, a barrier's arrivals and rounds, a counter's or
latch's value, a group's members, a claim's token and times), read from the first
:data:`KIND_SCAN` owners and waiters, and numbers only (no data: a claim's id and
owner data are left out, as anyone who reads an id may release the claim) but a
group's member ids: the first ``max_holders``, shown as data is. Owner and waiter data leave
as text (:func:`shown_data`): invisible and control characters escaped, cut to
``max_data_chars`` characters.

Times leave as UNIX seconds (the engine keeps them on the monotonic clock:
:mod:`tenure._core.stamps`), as instants rather than ages, so that a view of an
unchanged state is the same bytes: the server pushes a view only when it changed,
and the page works out "held for" and "expires in" from its own clock.

:class:`RateMeter` turns the server's own counters (grants made, sessions ended by
expiry) into rates per second over the last :data:`RATE_WINDOW` seconds.
"""

from __future__ import annotations

import heapq
import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Final, TypeVar

from prometheus_client.metrics_core import Metric

from tenure._core import Engine
from tenure._core.kind_render import kind_json
from tenure._core.kinds import GroupKind, Kind, classify
from tenure._core.semaphore import Owner, Semaphore, Waiter
from tenure._core.session import Session
from tenure._core.values import MAX_COUNT, ClientIdentity
from tenure.server._config.serve_config import ServeConfig

#: What :func:`kind_json` gives that the board leaves out (a claim's id and data).
_NOT_SHOWN: Final = frozenset({"id", "data"})

__all__ = [
    "KIND_SCAN",
    "RATE_SAMPLE_INTERVAL",
    "RATE_WINDOW",
    "RAW_KEYS",
    "BoardLimits",
    "RateMeter",
    "board",
    "counters",
    "kind_of",
    "shown_data",
    "shown_text",
    "shown_view",
]

#: The rates shown are averages over this many seconds.
RATE_WINDOW: Final = 10.0
#: How often the counters are sampled for the rates, in seconds.
RATE_SAMPLE_INTERVAL: Final = 1.0
#: Samples a :class:`RateMeter` keeps at most (old ones drop out before: a window's worth).
MAX_RATE_SAMPLES: Final = 1024

T = TypeVar("T")

#: JSON-ready data: what :func:`board` returns.
Json = dict[str, object]

#: Owners, and waiters, of one semaphore read to tell its recipe: a view does not walk
#: a queue of 10,000 (``max_waiters``) for each semaphore it shows. Past this, a
#: readers-writer lock's counts are of the first ones, and ``counted_all`` says so.
KIND_SCAN: Final = 1000

#: Characters of owner data a view shows by default (see :attr:`BoardLimits.max_data_chars`).
DEFAULT_MAX_DATA_CHARS: Final = 200
#: Characters that would not show as themselves in data: C0 and C1 controls, and the
#: invisible ones that reorder or hide text (bidi controls, zero-width characters,
#: line and paragraph separators, the byte-order mark, the soft hyphen).
_UNSEEN: Final = re.compile(
    "[\x00-\x1f\x7f-\x9f\u00ad\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff]"
)


@dataclass(frozen=True, slots=True)
class BoardLimits:
    """How much of the engine one view shows (the ``--dashboard-max-*`` settings)."""

    max_nodes: int = 50
    max_semaphores: int = 100
    max_sessions: int = 100
    max_holders: int = 20
    #: Characters of each owner's and waiter's data shown (before escaping); the
    #: rest is cut, and ``data_truncated`` says so.
    max_data_chars: int = DEFAULT_MAX_DATA_CHARS

    @classmethod
    def of(cls, config: ServeConfig) -> BoardLimits:
        """The limits ``config`` sets."""
        return cls(
            max_nodes=config.dashboard_max_nodes,
            max_semaphores=config.dashboard_max_semaphores,
            max_sessions=config.dashboard_max_sessions,
            max_holders=config.dashboard_max_holders,
        )


def board(
    engine: Engine,
    *,
    now: float,
    shift: float,
    limits: BoardLimits,
    may_see: Callable[[str], bool],
    may_kill: Callable[[str], bool],
    prefixes: Iterable[str] | None = ("",),
) -> Json:
    """The view of ``engine`` (module docstring).

    ``now`` is the engine's clock now, ``shift`` what makes an engine time UNIX
    seconds (:meth:`tenure._runtime.host.Host.wall_shift`); ``may_kill(node)``
    says whether the viewer may end the node's sessions (the page offers it then).
    ``prefixes``: what every node ``may_see`` lets through starts with (a token's
    :attr:`~tenure.server._net.auth.Token.prefixes`), the only ranges of the sorted
    node names read; None: the viewer sees every node, and the first are read alone.
    """
    index = engine.node_index
    if prefixes is None:  # (issue 37: the view of 100,000 nodes read them all)
        total = len(engine.nodes)
        shown = index.page("", limits.max_nodes)
    elif "" in prefixes:  # every node is in range: the dict is the quicker walk
        visible = [name for name in engine.nodes if may_see(name)]
        total = len(visible)
        shown = heapq.nsmallest(limits.max_nodes, visible)
    else:
        visible = index.matching(prefixes, "", len(engine.nodes) + 1, may_see)
        total = len(visible)
        shown = visible[: limits.max_nodes]
    nodes = []
    for name in shown:
        node = engine.nodes[name]
        semaphores = node.semaphores
        # (The first of the node's sorted indexes: a node's size does not slow the view.)
        sem_names = node.semaphore_index.page("", limits.max_semaphores)
        session_ids = node.session_index.page(0, limits.max_sessions)
        nodes.append(
            {
                "name": name,
                "node": name,  # as requests name it (RAW_KEYS: never shown)
                "can_kill": may_kill(name),
                "semaphores_total": len(semaphores),
                "semaphores": [_semaphore(semaphores[s], engine, shift, limits) for s in sem_names],
                "sessions_total": len(node.sessions),
                "sessions": [_session(engine.sessions[i], now, shift) for i in session_ids],
                "deadlocks": _deadlocks(engine, name, shift),
            }
        )
    return {"nodes_total": total, "nodes": nodes}


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


def shown_data(data: bytes, max_chars: int) -> tuple[str, bool]:
    """``data`` as text to show, and whether it was cut: UTF-8 (undecodable bytes as
    ``\\xNN``), cut to ``max_chars`` characters, then every character that would not
    show as itself (:data:`_UNSEEN`) escaped as Python writes it (``\\n``, ``\\x1b``,
    ``\\u202e``): a leader's data cannot add a line or turn text around on the page."""
    # At most 4 bytes a character: no more than this is decoded, however big the data.
    text = data[: 4 * max_chars + 4].decode("utf-8", "backslashreplace")
    cut = len(text) > max_chars or len(data) > 4 * max_chars + 4
    text = text[:max_chars]
    return _UNSEEN.sub(lambda found: found.group().encode("unicode_escape").decode(), text), cut


def shown_text(text: str) -> str:
    """``text`` with every character that would not show as itself escaped, as
    :func:`shown_data` does and as the CLI does (``tenure.cli._render.safe``: control
    characters, bidi marks and overrides, line separators; here zero-width ones too)."""
    if text.isascii() and text.isprintable():
        return text  # the common case, checked in C
    return _UNSEEN.sub(lambda found: found.group().encode("unicode_escape").decode(), text)


#: The keys of a view whose strings are sent back as they are, never shown: a node's
#: name as the page's requests name it (``node``; its ``name`` is the one shown).
RAW_KEYS: Final = frozenset({"node"})


def shown_view(value: object) -> object:
    """``value`` (a view: dicts, lists, scalars) with every string, keys included,
    through :func:`shown_text`, but for the values of :data:`RAW_KEYS`."""
    if isinstance(value, str):
        return shown_text(value)
    if isinstance(value, dict):
        return {
            shown_text(key): item if key in RAW_KEYS else shown_view(item)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [shown_view(item) for item in value]
    return value


def _semaphore(sem: Semaphore, engine: Engine, shift: float, limits: BoardLimits) -> Json:
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
    each = (kind, engine, shift, limits.max_data_chars)
    recipe = classify(
        sem.name,
        limit=sem.limit,
        ephemeral=sem.ephemeral,
        data=sem.data,
        owners=_first(owners.values(), KIND_SCAN),
        waiters=_first(waiters.values(), KIND_SCAN),
    )
    return {
        "name": sem.name,
        "kind": kind,
        "limit": limit,
        "count": count,
        "held": held,
        "ephemeral": sem.ephemeral,
        "owners_total": len(owners),
        "owners": [
            _holder(o, *each, token=o.token) for o in _first(owners.values(), limits.max_holders)
        ],
        "waiters_total": len(waiters),
        "waiters": [_holder(w, *each) for w in _first(waiters.values(), limits.max_holders)],
        # No clock read here: a limiter's TAT is an instant (UNIX seconds, the server's
        # wall clock), and the page works out its level from its own clock.
        "recipe": {
            **_recipe_json(recipe, limits),
            "counted_all": len(owners) <= KIND_SCAN and len(waiters) <= KIND_SCAN,
        },
    }


def _recipe_json(recipe: Kind, limits: BoardLimits) -> Json:
    """:func:`kind_json`, but a group's member ids (which its clients chose) are the
    first ``max_holders`` only, each shown as data is (:func:`shown_data`), and a
    claim's id and owner data are left out (its id is what releases it)."""
    found = {k: v for k, v in kind_json(recipe).items() if k not in _NOT_SHOWN}
    if isinstance(recipe, GroupKind):
        found["ids"] = [
            shown_data(member_id.encode(), limits.max_data_chars)[0]
            for member_id in recipe.members[: limits.max_holders]
        ]
    return found


def _holder(
    held: Owner | Waiter,
    kind: str,
    engine: Engine,
    shift: float,
    max_data_chars: int,
    token: int | None = None,
) -> Json:
    session = engine.sessions.get(held.session_id)
    data, cut = shown_data(held.data, max_data_chars)
    info: Json = {
        "session_id": held.session_id,
        # A mutex's holder holds it (1); a hold of every token elsewhere is None.
        "count": 1 if kind == "mutex" else None if held.count == MAX_COUNT else held.count,
        "description": session.description if session is not None else "",
        "identity": _identity(session.identity if session is not None else None),
        "since": held.since + shift,
        "data": data,
        "data_bytes": len(held.data),
        "data_truncated": cut,
    }
    if token is not None:
        info["token"] = token
    return info


def _session(session: Session, now: float, shift: float) -> Json:
    expires_at = session.expires_at
    return {
        "session_id": session.session_id,
        "description": session.description,
        "identity": _identity(session.identity),
        "timeout": session.timeout,
        "created_at": session.created_at + shift,
        # None while a connection keeps it; else when the server will end it (UNIX s).
        "expires_at": None if expires_at is None else max(expires_at, now) + shift,
        "holds": sum(1 for name in session.held for _ in session.holds_on(name)),
        "waits": sum(1 for name in session.waits for _ in session.waits_on(name)),
    }


def _deadlocks(engine: Engine, node: str, shift: float) -> list[Json]:
    """The deadlocks the server broke on ``node`` lately (the engine keeps the latest
    MAX_DEADLOCKS_SHOWN), newest first: when (UNIX seconds), who asked, the cycle."""
    return [
        {
            "at": broken.at + shift if broken.at is not None else None,
            "session_id": broken.session_id,
            "task": broken.task,
            "cycle": broken.cycle,
        }
        for broken in reversed(engine.broken_deadlocks.get(node, ()))
    ]


def _identity(identity: ClientIdentity | None) -> Json:
    if identity is None:
        return {"host": "", "pid": 0, "name": ""}
    return {"host": identity.host, "pid": identity.pid, "name": identity.name}


def _first(items: Iterable[T], count: int) -> Iterator[T]:
    for index, item in enumerate(items):
        if index >= count:
            return
        yield item


def counters(families: Iterable[Metric]) -> tuple[float, float]:
    """(grants made, sessions ended by expiry) so far, from the server's own metrics
    (:meth:`tenure.server._http.metrics.ServerMetrics.collect`)."""
    grants = expired = 0.0
    for family in families:
        for sample in family.samples:
            if sample.name == "tenure_grant_wait_seconds_count":
                grants = sample.value
            elif (
                sample.name == "tenure_sessions_ended_total"
                and sample.labels.get("reason") == "session_expired"
            ):
                expired = sample.value
    return grants, expired


class RateMeter:
    """Rates per second of counters sampled every :data:`RATE_SAMPLE_INTERVAL` (by the
    dashboard's sampler, from the server's start), averaged over :data:`RATE_WINDOW`."""

    def __init__(self, window: float = RATE_WINDOW) -> None:
        self.window = window
        self._samples: deque[tuple[float, float, float]] = deque(maxlen=MAX_RATE_SAMPLES)

    def sample(self, at: float, grants: float, expired: float) -> None:
        """Record the counters at monotonic time ``at`` (forgetting samples that no
        longer count: one at or before the window's start is kept, so that the
        rates span the whole window once they can)."""
        samples = self._samples
        samples.append((at, grants, expired))
        while len(samples) > 1 and samples[1][0] <= at - self.window:
            samples.popleft()

    def rates(self) -> tuple[float, float]:
        """(grants, expiries) per second from the oldest sample kept to the newest
        (0 before there are two)."""
        if len(self._samples) < 2:
            return 0.0, 0.0
        first_at, first_grants, first_expired = self._samples[0]
        at, grants, expired = self._samples[-1]
        span = at - first_at
        if span <= 0:
            return 0.0, 0.0
        return (grants - first_grants) / span, (expired - first_expired) / span
