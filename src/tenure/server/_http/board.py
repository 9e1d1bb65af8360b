"""What the dashboard shows: a bounded view of the engine, as JSON-ready data.

:func:`board` reads the engine the server runs, on its event loop, never through a
client connection; the server builds it with :func:`board_in_slices`, a step budget
of work per turn of the loop (``--step-budget``, as a mass expiry and a ``/metrics``
scrape: issue 47, a view of 60 groups of 1,000 members was a 0.5-1.7 s step).
Every part is bounded by a :class:`BoardLimits` (the ``--dashboard-max-*``
settings): the first nodes by name, the first semaphores of each by name, the first
sessions by id, the first owners and waiters of each semaphore in grant and queue
order, and the deadlocks broken on each lately (a handful: the engine keeps no
more); each list comes with its total, so the page says "20 of 3000". Only the
nodes ``may_see`` allows are shown (a token limited to some nodes does not learn
the others' names, as with ListNodes).

What one view costs, whatever a tenant's state (:class:`BoardWork` counts it):

* recipes are read from ``max_scan`` holders in all (``--dashboard-max-scan``),
  each semaphore shown reading a fair share of what is left (what is left over the
  semaphores left), at most :data:`KIND_SCAN` and at least one; its ``recipe``
  says how many it read (``scanned``) and whether that was all (``counted_all``),
  beside the exact ``owners_total`` and ``waiters_total``;
* the view, as JSON, is at most ``max_bytes`` (``--dashboard-max-bytes``): an
  entry (a semaphore, a session, a node) that would pass it is left out, with every
  entry after it, and ``cut`` says so; the totals still say how many there are;
* with a budget, the work is done in slices, the loop serving everybody else
  between two: a slice ends between two entries once it has done ``budget`` items
  (a holder read or shown, a session's semaphore counted, a name read from an
  index, :data:`BYTES_PER_ITEM` bytes of JSON: one item each), so it does at most
  ``budget - 1`` items and one entry's own (a semaphore's: at most ``KIND_SCAN + 2 *
  max_holders + 3``, and its bytes).

Between two slices the state may change: what has gone since is skipped, and the
totals are those of the moment each node was begun (a state a few turns old, as a
scrape's counts).

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
latch's value, a group's members, a claim's token and times), numbers only (no
data: a claim's id and owner data are left out, as anyone who reads an id may
release the claim) but a group's member ids: the first ``max_holders``, shown as
data is. Owner and waiter data leave as text (:func:`shown_data`): invisible and
control characters escaped, cut to ``max_data_chars`` characters; every other
string a client chose is shown as text too (:func:`shown_text`), as each entry is
made (:mod:`tenure.server._http.board_entries`).

Times leave as UNIX seconds (the engine keeps them on the monotonic clock:
:mod:`tenure._core.stamps`), as instants rather than ages, so that a view of an
unchanged state is the same bytes: the server pushes a view only when it changed,
and the page works out "held for" and "expires in" from its own clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator, Iterable
from typing import Final

from tenure._core import Engine
from tenure.server._http.board_activity import (
    GRANTS_WINDOW,
    BusyKey,
    NodeActivity,
    activity_entry,
    busy_key,
)
from tenure.server._http.board_entries import (
    Json,
    deadlocks_entry,
    kind_of,
    scan_split,
    semaphore_entry,
    session_cost,
    session_entry,
)
from tenure.server._http.board_rates import (
    RATE_SAMPLE_INTERVAL,
    RATE_WINDOW,
    RateMeter,
    counters,
)
from tenure.server._http.board_work import (
    BYTES_PER_ITEM,
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_SCAN,
    BoardLimits,
    BoardWork,
    Slices,
)
from tenure.server._http.shown import (
    DEFAULT_MAX_DATA_CHARS,
    RAW_KEYS,
    shown_data,
    shown_text,
    shown_view,
)

__all__ = [
    "BYTES_PER_ITEM",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_DATA_CHARS",
    "DEFAULT_MAX_SCAN",
    "KIND_SCAN",
    "RATE_SAMPLE_INTERVAL",
    "RATE_WINDOW",
    "RAW_KEYS",
    "BoardLimits",
    "BoardWork",
    "RateMeter",
    "board",
    "board_in_slices",
    "counters",
    "kind_of",
    "shown_data",
    "shown_text",
    "shown_view",
]

#: What a node's counts of activity are taken to be until they are counted (the most
#: digits any may have), so that its entry's bytes are never counted short.
_MOST: Final = 999_999_999_999
#: Owners and waiters of one semaphore read at most to tell its recipe: a view does
#: not walk a queue of 10,000 (``max_waiters``) for each semaphore it shows.
KIND_SCAN: Final = 1000


def board(
    engine: Engine,
    *,
    now: float,
    shift: float,
    limits: BoardLimits,
    may_see: Callable[[str], bool],
    may_kill: Callable[[str], bool],
    prefixes: Iterable[str] | None = ("",),
    work: BoardWork | None = None,
    activity: NodeActivity | None = None,
) -> Json:
    """The view of ``engine`` (module docstring), built in one go.

    ``now`` is the engine's clock now, ``shift`` what makes an engine time UNIX
    seconds (:meth:`tenure._runtime.host.Host.wall_shift`); ``may_kill(node)``
    says whether the viewer may end the node's sessions (the page offers it then).
    ``prefixes``: what every node ``may_see`` lets through starts with (a token's
    :attr:`~tenure.server._net.auth.Token.prefixes`), the only ranges of the sorted
    node names read; None: the viewer sees every node, and the first are read alone.
    ``work``: counted there, if given. ``activity``: the dashboard's memory of its
    nodes (:class:`~tenure.server._http.board_activity.NodeActivity`: their recent
    grants, and the order the nodes are built in); without it, no node's grants are
    known.
    """
    building = _build(
        engine,
        now,
        shift,
        limits,
        (may_see, may_kill),
        prefixes,
        None,
        work or BoardWork(),
        activity,
    )
    while True:
        view = _slice(building)
        if view is not None:
            return view


async def board_in_slices(
    engine: Engine,
    *,
    now: float,
    shift: float,
    limits: BoardLimits,
    may_see: Callable[[str], bool],
    may_kill: Callable[[str], bool],
    prefixes: Iterable[str] | None = ("",),
    budget: int,
    work: BoardWork | None = None,
    activity: NodeActivity | None = None,
) -> Json:
    """:func:`board`, built ``budget`` items at a time, letting the loop serve others
    between (``asyncio.sleep(0)``: module docstring)."""
    building = _build(
        engine,
        now,
        shift,
        limits,
        (may_see, may_kill),
        prefixes,
        budget,
        work or BoardWork(),
        activity,
    )
    while True:
        view = _slice(building)
        if view is not None:
            return view
        await asyncio.sleep(0)  # everybody else's turn


def _slice(building: Generator[None, None, Json]) -> Json | None:
    """Build one slice of a view: the view once it is whole, else None."""
    try:
        next(building)
    except StopIteration as built:
        view: Json = built.value
        return view
    return None


def _build(
    engine: Engine,
    now: float,
    shift: float,
    limits: BoardLimits,
    rights: tuple[Callable[[str], bool], Callable[[str], bool]],
    prefixes: Iterable[str] | None,
    budget: int | None,
    work: BoardWork,
    activity: NodeActivity | None,
) -> Generator[None, None, Json]:
    """The view (module docstring); it yields where a slice ends, always between two
    entries: each entry looks up what it shows again, by name, when it begins.

    The nodes are built the busiest first as the latest view found them (so that
    ``max_bytes`` leaves out the idlest), and come in the order of their activity
    now (:mod:`tenure.server._http.board_activity`)."""
    may_see, may_kill = rights
    slices = Slices(budget, work, limits.max_bytes)
    total, shown = yield from _shown_nodes(engine, limits, may_see, prefixes, slices)
    if activity is not None:
        shown = activity.in_order(shown, engine, now)
    # Semaphores still to show, for each one's fair share of the scan.
    planned = {
        name: min(len(engine.nodes[name].semaphores), limits.max_semaphores) for name in shown
    }
    left = sum(planned.values())
    nodes: list[Json] = []
    keys: dict[str, BusyKey] = {}  # (each node's in the view, by its name)
    for name in shown:
        node = engine.nodes.get(name)
        if node is None:  # dropped since the view began
            left -= planned[name]
            continue
        # (The first of the node's sorted indexes: a node's size does not slow the view.)
        sem_names = node.semaphore_index.page("", limits.max_semaphores)
        session_ids = node.session_index.page(0, limits.max_sessions)
        left += len(sem_names) - planned[name]
        semaphores: list[Json] = []
        sessions: list[Json] = []
        deadlocks: list[Json] = []
        grants = None if activity is None else activity.grants(name, node, now)
        # (Counted as its semaphores and sessions are read; as long as it may be until
        # then, so that its bytes are not counted short.)
        granted_at = node.granted_at
        lately = granted_at is not None and now - granted_at <= GRANTS_WINDOW
        shown_at = None if granted_at is None else granted_at + shift
        busy = activity_entry(_MOST, _MOST, _MOST, grants, shown_at, lately)
        waiters = holds = disconnected = 0
        entry: Json = {
            "name": shown_text(name),
            "node": name,  # as requests name it (RAW_KEYS: never shown)
            "can_kill": may_kill(name),
            "activity": busy,
            "semaphores_total": len(node.semaphores),
            "semaphores": semaphores,
            "sessions_total": len(node.sessions),
            "sessions": sessions,
            "deadlocks": deadlocks,
        }
        # (Its lists are empty yet: filled as they come, each entry's bytes counted.)
        if not slices.keep(entry, 1 + len(sem_names) + len(session_ids)):
            break
        nodes.append(entry)
        for sem_name in sem_names:
            scan = min(KIND_SCAN, max(1, (limits.max_scan - work.scanned) // max(1, left)))
            left -= 1
            if slices.over():
                yield
                if engine.nodes.get(name) is not node:
                    break  # the node was dropped while others were served
            sem = node.semaphores.get(sem_name)
            if sem is None:
                continue  # gone since the node was begun
            holds += len(sem.owners)
            waiters += len(sem.waiters)
            holding, waiting = scan_split(len(sem.owners), len(sem.waiters), scan)
            work.scanned += holding + waiting
            # A holder read or shown is an item, and kind_of's first owner and waiter.
            shown_holders = min(len(sem.owners), limits.max_holders) + min(
                len(sem.waiters), limits.max_holders
            )
            entry = semaphore_entry(
                sem, engine, shift, scan, limits.max_holders, limits.max_data_chars
            )
            if not slices.keep(entry, 3 + holding + waiting + shown_holders):
                break
            semaphores.append(entry)
        for session_id in session_ids:
            if work.cut:
                break
            if slices.over():
                yield
            session = engine.sessions.get(session_id)
            if session is None:
                continue  # ended since the node was begun
            disconnected += session.expires_at is not None
            entry = session_entry(session, now, shift)
            if not slices.keep(entry, session_cost(session)):
                break
            sessions.append(entry)
        for broken in deadlocks_entry(engine, name, shift):
            if work.cut or not slices.keep(broken, 1):
                break
            deadlocks.append(broken)
        busy.update(activity_entry(waiters, disconnected, holds, grants, shown_at, lately))
        keys[name] = busy_key(name, waiters, disconnected, holds, grants, lately)
        if work.cut:
            break
        if slices.over():
            yield
    nodes.sort(key=lambda entry: keys[str(entry["node"])])
    if activity is not None:
        activity.remember(keys.values())
    return {"nodes_total": total, "nodes": nodes, "cut": work.cut}


def _shown_nodes(
    engine: Engine,
    limits: BoardLimits,
    may_see: Callable[[str], bool],
    prefixes: Iterable[str] | None,
    slices: Slices,
) -> Generator[None, None, tuple[int, list[str]]]:
    """(how many nodes the viewer may see, the first ``max_nodes`` of them by name).

    A viewer that sees every node reads the first alone. Another's are read from the
    ranges of its patterns in the sorted names, each name read an item: a pattern
    that starts with a wildcard (``*-jobs``) has the range of ``""``, every node's
    name, read a budget at a time (issue 47, round two: in one step before), the
    loop serving others between two slices; its total is then that of the names as
    each slice found them.
    """
    index = engine.node_index
    if prefixes is None:  # (issue 37: the view of 100,000 nodes read them all)
        shown = index.page("", limits.max_nodes)
        slices.spend(1 + len(shown))
        return len(engine.nodes), shown
    ranges = tuple(prefixes)
    total = 0
    shown = []
    after: str | None = ""
    slices.spend(1)
    while after is not None:
        room = len(engine.nodes) + 1 if slices.budget is None else slices.budget
        room = max(1, room - slices.in_slice)
        looked = index.looked_at
        found, after = index.matching_within(ranges, after, len(engine.nodes) + 1, may_see, room)
        slices.spend(index.looked_at - looked)
        total += len(found)
        shown += found[: limits.max_nodes - len(shown)]
        if after is not None and slices.over():
            yield  # (the names change meanwhile: the walk goes on after the last read)
    return total, shown
