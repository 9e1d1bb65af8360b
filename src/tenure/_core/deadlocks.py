"""Deadlock detection: would a request that must wait close a cycle of tasks, each
waiting for the next, that none of them could ever leave?

Theory of operation
-------------------
**Who waits.** A session is shared by many tasks of its client (a web server's
handlers all use one), and one task of a session may hold ``a`` while another task
of the same session waits for ``b``: a session is not the unit that waits. So every
acquire carries the client's number for the task that asks (``task``; 0: not
known), and the engine keeps it on the waiter and on the hold the waiter becomes.
A task with a pending request cannot release anything (it is awaiting); a task with
none is *free*: it will release what it holds. A hold of task 0 (an old client, a
face of another protocol, a session resumed by another process) counts as held by
a free task, and so does a hold of a task with more than one pending request (a
client that does not await one request at a time): such holds never close a cycle.
A request is real whoever made it: a waiter of task 0 still waits where it is.

**The graph** of pending requests and whom each waits for is
:mod:`tenure._core.wait_graph`'s: its nodes are requests (a waiter, or an
all-or-none set's members), and the holds of a task with exactly one pending
request wait with that request. An edge is *hard* when its target alone blocks the
request for good (a request ahead in the queue; a hold too large to share the
semaphore with what is asked: every edge of a mutex).

**The search** (:class:`DeadlockSearch`) runs when a request of a known task must
wait (Acquire, AcquireAll, an upgrade; never a request that is granted or only
tries). It walks from the new request along the edges, only as far as can lead
back to it (:class:`~tenure._core.wait_graph.WaitGraph`: linear in what it
touches). Every hold, request and set member it looks at counts against the
search's limit (``EngineState.deadlock_search_limit``), and so does the look at the
asked semaphores' holders that decides whether to search at all (below): past it, no
deadlock is reported and the request waits as it would have. So one acquire's check
looks at no more than the limit, however many holds its semaphores have (a search
whose first step alone would pass it, one request's holders, is not begun); the
things looked at, and the checks that refused or stopped at the limit, are counted
per quota owner of the asking session (``EngineState.deadlock_counts``, /metrics).

**The answer.** No path back to the new request: no deadlock (the common case,
after a look at the holders of the semaphores asked for). A cycle of hard edges
through it: a deadlock (each waits for the next, which cannot release). Otherwise a
cycle is necessary but, with counting semaphores, not sufficient (a holder of one
of three tokens may release while another is stuck), so the search confirms by
*graph reduction* (Holt's, with FIFO): free tasks release everything; a request
that heads each of its queues among the unreduced ones and fits in the tokens left
after the reduced requests' tasks released is reduced (it will be granted, then its
task is free); a lock-delay counts as over; repeat. A request left unreduced can
never be granted, whatever order the others release in. The new request is refused
iff it is unreduced and closes a cycle through unreduced requests only: then the
message names that cycle (the shortest), and nothing changed (engine rule 1; the
caller records the broken deadlock). The message names the cycle's first
:data:`~tenure._core.limits.MAX_DEADLOCK_LINKS` waits, each semaphore's name cut to
:data:`~tenure._core.limits.MAX_DEADLOCK_NAME_BYTES`, and how many more there are: at
most about 1.5 KB, however long the cycle and its names (:func:`cycle_text`). A
request stuck only behind a deadlock it did not close waits (such a deadlock can
only be one nobody could detect: past the limit, or through holds of unknown tasks).

Timeouts do not matter (a wait with a timeout is waited for as long as it lasts, as
PostgreSQL's detector also decides regardless of ``lock_timeout``).
"""

from __future__ import annotations

from collections import deque
from typing import Final

from tenure._core.limits import DEADLOCK_SEARCH_LIMIT, MAX_DEADLOCK_LINKS, MAX_DEADLOCK_NAME_BYTES
from tenure._core.node import Node
from tenure._core.semaphore import Semaphore
from tenure._core.state import EngineState
from tenure._core.wait_graph import ASKING, Asked, Edge, OverLimitError, PendingRequest, WaitGraph
from tenure.errors import DeadlockError

__all__ = [
    "CUT",
    "DEADLOCK_SEARCH_LIMIT",
    "LOOKED",
    "REFUSED",
    "Asked",
    "DeadlockSearch",
    "cut_name",
    "cycle_text",
    "refuse_deadlock",
]

#: Past every arrival number: where the request being asked would queue.
_LAST: Final = 1 << 70

#: What ``EngineState.deadlock_counts`` counts per quota owner (:func:`_tally`): the
#: holds, requests and set members checks looked at; the acquires refused for a
#: deadlock; the checks that stopped at the limit (the acquire then waits unchecked).
LOOKED: Final = "looked"
REFUSED: Final = "refused"
CUT: Final = "cut"


def refuse_deadlock(
    state: EngineState,
    node: Node,
    session_id: int,
    task: int,
    asked: list[Asked],
    replaced: tuple[str, int] | None,
    now: float,
) -> None:
    """Raise DeadlockError if the request that must wait would close a deadlock
    (:meth:`DeadlockSearch.check`), and note it with ``node``; nothing else changes.

    A request of task 0 (not known) is not checked, nor any while the state's
    ``deadlock_search_limit`` is 0 (a journal's replay: a logged request was let wait).
    The look at the holders before the search and the search share that limit; what
    they look at, and whether they refused or stopped at the limit, is counted for
    the asking session's quota owner (:func:`_tally`).
    """
    limit = state.deadlock_search_limit
    if not task or limit <= 0:
        return
    # The walk's first step looks at every holder of every semaphore asked (and at the
    # request): a search that could not get past it is not begun (a big semaphore's
    # holders would be looked at twice, for nothing; an O(1) count per semaphore).
    if sum(len(sem.owners) for sem, _, _ in asked) >= limit:
        _tally(state, session_id, 0, CUT)
        return
    leads_back, looked = _holders_looked_at(state, node, session_id, task, asked)
    if not leads_back:
        _tally(state, session_id, looked, None)
        return
    search = DeadlockSearch(state, node, limit - looked)
    cycle = search.check(session_id, task, asked, replaced)
    outcome = CUT if search.cut else None if cycle is None else REFUSED
    _tally(state, session_id, looked + search.spent, outcome)
    if cycle is not None:
        state.note_deadlock(node, session_id, task, cycle, now)
        raise DeadlockError(f"refused: waiting would deadlock: {cycle}")


def _tally(state: EngineState, session_id: int, looked: int, outcome: str | None) -> None:
    """Count one check of an acquire of ``session_id``'s quota owner in
    ``state.deadlock_counts``: the things it ``looked`` at, and its ``outcome`` if it
    refused the acquire (:data:`REFUSED`) or stopped at the limit (:data:`CUT`).

    A refused acquire changes nothing and costs its sender no quota, and the sender
    may ask it again at once, as often as its ``requests_per_second`` lets it: each
    time up to a whole search's worth of work for the server. These counts say whose
    acquires made the server do that work (``/metrics``), as PostgreSQL counts
    deadlocks per database and InnoDB its deadlocks and searches cut short."""
    usage = state.sessions[session_id].usage
    owner = "" if usage is None else usage.owner
    counts = state.deadlock_counts
    if looked:
        key = (LOOKED, owner)
        counts[key] = counts.get(key, 0) + looked
    if outcome is not None:
        key = (outcome, owner)
        counts[key] = counts.get(key, 0) + 1


def _holders_looked_at(
    state: EngineState, node: Node, session_id: int, task: int, asked: list[Asked]
) -> tuple[bool, int]:
    """Whether the request would wait for a request: a holder whose task waits (the
    asking task's own holds wait with it), a set ahead, or (an upgrade) anyone ahead;
    and how many holders were looked at to know. If not, nothing leads back to it: no
    search (the usual case, a holder that waits for nothing, costs a look at the
    holders only)."""
    if node.sets:
        return True, 1  # (the look at the node's sets)
    sessions = state.sessions
    looked = 0
    for sem, key, _ in asked:
        for owner in sem.each_owner():
            looked += 1
            if owner.key == key:
                if sem.queue_length():
                    return True, looked
            elif owner.task and (
                (owner.task == task and owner.session_id == session_id)
                or sessions[owner.session_id].task_waits(owner.task)
            ):
                return True, looked
    return False, looked


class DeadlockSearch:
    """One check of one request that must wait (module docstring). Reads, never writes."""

    def __init__(self, state: EngineState, node: Node, limit: int) -> None:
        self._graph = WaitGraph(state, node, limit)
        #: Whether :meth:`check` stopped at the limit (then it answered None).
        self.cut = False

    @property
    def spent(self) -> int:
        """How many holds, requests and set members it has looked at (at most its limit)."""
        return self._graph.spent

    def check(
        self, session_id: int, task: int, asked: list[Asked], replaced: tuple[str, int] | None
    ) -> str | None:
        """The cycle the request would close, as DeadlockError names it; None if none.

        ``asked``: each existing semaphore the request would wait on (a semaphore it
        makes is empty: nothing to wait for there); ``replaced``: the (name, hold) of
        the session's queued request it supersedes, if any.
        """
        graph = self._graph
        asking = graph.ask(session_id, task, asked, replaced)
        if asking is None:
            return None  # the task waits for something else already: not one request
        try:
            if not graph.walk(asking):
                return None
            path = self._cycle(asking, None)
            if path is None:
                stuck = self._unreduced(asking)
                if asking.order not in stuck:
                    return None
                path = self._cycle(asking, stuck)
        except OverLimitError:
            self.cut = True
            return None
        return None if path is None else cycle_text(asking.label, path)

    # -- the answer --------------------------------------------------------------------

    def _cycle(self, asking: PendingRequest, stuck: set[int] | None) -> list[Edge] | None:
        """The shortest cycle from ``asking`` back to it: along hard edges (``stuck``
        None), or through the requests ``stuck`` (by arrival number) only."""
        parents: dict[int, tuple[PendingRequest, Edge]] = {}
        frontier = deque([asking])
        seen = {asking.order}
        while frontier:
            request = frontier.popleft()
            for edge in self._graph.edges.get(request.order, ()):
                target = edge.target
                allowed = edge.hard if stuck is None else target.order in stuck
                if not allowed:
                    continue
                if target is asking:
                    path = [edge]
                    while request is not asking:
                        request, step = parents[request.order]
                        path.append(step)
                    path.reverse()
                    return path
                if target.order not in seen:
                    seen.add(target.order)
                    parents[target.order] = (request, edge)
                    frontier.append(target)
        return None

    def _unreduced(self, asking: PendingRequest) -> set[int]:
        """Holt's reduction with FIFO (module docstring) over the queues the walk
        reached, each as far as its furthest request the walk expanded: the arrival
        numbers of the requests that can never be granted."""
        reach: dict[str, tuple[Semaphore, int]] = {}
        for order in self._graph.edges:
            bound = order if order != ASKING else _LAST
            for sem, _, _ in self._graph.requests[order].members:
                known = reach.get(sem.name)
                if known is None or known[1] < bound:
                    reach[sem.name] = (sem, bound)
        queues: dict[str, list[tuple[PendingRequest, int, int]]] = {}
        for name, (sem, bound) in reach.items():
            queue: list[tuple[PendingRequest, int, int]] = []
            for waiter in sem.waiters.values():
                if waiter.order > bound:
                    break
                self._graph.spend()
                request = self._graph.of_waiter(sem, waiter)
                if request is not None:
                    queue.append((request, waiter.key, waiter.count))
            queue += [(asking, key, n) for member, key, n in asking.members if member is sem]
            queues[name] = queue
        units = {entry[0].order for queue in queues.values() for entry in queue}
        held: dict[str, int] = {}
        counted: dict[str, dict[int, int]] = {}
        holds_of: dict[int, list[tuple[str, int]]] = {}
        for name, (sem, _) in reach.items():
            total, keyed = 0, {}
            for owner in sem.each_owner():
                self._graph.spend()
                holder = self._graph.of_task(owner.session_id, owner.task)
                # A free task's hold is released; so is one of a request the walk did
                # not reach (a lease handed to another task: not known to be stuck).
                if holder is not None and holder.order in units:
                    total += owner.count
                    keyed[owner.key] = owner.count
                    holds_of.setdefault(holder.order, []).append((name, owner.key))
            held[name], counted[name] = total, keyed
        reduced: set[int] = set()
        position = dict.fromkeys(queues, 0)

        def head(name: str) -> tuple[PendingRequest, int, int] | None:
            queue, at = queues[name], position[name]
            while at < len(queue) and queue[at][0].order in reduced:
                at += 1
            position[name] = at
            return queue[at] if at < len(queue) else None

        def ready(request: PendingRequest) -> bool:
            for sem, key, count in request.members:
                first = head(sem.name) if sem.name in queues else None
                if first is None or first[0] is not request:
                    return False
                # Lock-delay is over by then; its own hold is replaced by the grant.
                if held[sem.name] - counted[sem.name].get(key, 0) + count > sem.limit:
                    return False
            return True

        work = deque(queues)
        while work:
            first = head(work.popleft())
            if first is None or not ready(first[0]):
                continue
            request = first[0]
            reduced.add(request.order)
            work.extend(sem.name for sem, _, _ in request.members)
            for name, key in holds_of.get(request.order, ()):
                held[name] -= counted[name].pop(key)
                work.append(name)
        return units - reduced


def cycle_text(asking: str, path: list[Edge]) -> str:
    """``session 5 (task 3) waits for 'b' held by session 7 (task 1), which waits for ...``:
    the cycle ``path`` from the request ``asking`` (its label) back to it, bounded.

    It names the first :data:`MAX_DEADLOCK_LINKS` waits, each name cut
    (:func:`cut_name`); a longer cycle's text ends ``, and K more waits back to
    <asking>: a cycle of N`` (a hostile cycle of a thousand waits on names of a KiB
    would otherwise make a megabyte of text, kept by the node and sent to every
    client that describes it).
    """
    shown = path[:MAX_DEADLOCK_LINKS]
    steps = [f"waits for {cut_name(edge.name)} {edge.verb} {edge.target.label}" for edge in shown]
    text = f"{asking} " + ", which ".join(steps)
    more = len(path) - len(shown)
    if more:
        text += f", and {more} more waits back to {asking}: a cycle of {len(path)}"
    return text


def cut_name(name: str) -> str:
    """``name`` quoted (its ``repr``), cut to its first :data:`MAX_DEADLOCK_NAME_BYTES`
    UTF-8 bytes (at a character's boundary) and followed by ``...`` if longer."""
    raw = name.encode()
    if len(raw) <= MAX_DEADLOCK_NAME_BYTES:
        return repr(name)
    return repr(raw[:MAX_DEADLOCK_NAME_BYTES].decode(errors="ignore")) + "..."
