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

**The graph.** Its nodes are pending requests (a waiter, or an all-or-none set's
members, which share one arrival number); the holds of a task with exactly one
pending request wait with that request. A request on semaphore S waits for every
holder of S (but its own hold, which an upgrade replaces) and for every request
ahead of it in S's queue (FIFO: nobody barges). An edge is *hard* when its target
alone blocks the request for good: a request ahead in the queue, or a hold of
``c`` tokens where ``c`` plus the tokens asked exceed S's limit (every edge of a
mutex).

**The search** (:class:`DeadlockSearch`) runs when a request of a known task must
wait (Acquire, AcquireAll, an upgrade; never a request that is granted or only
tries). It walks from the new request along the edges, and needs only part of
them: a plain request ahead in a queue waits for a subset of what the new one waits
for there (the same holders, fewer requests ahead), so it is not expanded, and the
search stays linear in what it touches; the exceptions are all-or-none sets ahead
(they wait elsewhere too) and the requests ahead of an *upgrade* (they may wait for
the upgrader's own hold). Every hold, request and set member it looks at counts
against the search's limit (``EngineState.deadlock_search_limit``); past it, no
deadlock is reported and the request waits as it would have.

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
caller records the broken deadlock). A request stuck only behind a deadlock it did
not close waits (such a deadlock can only be one nobody could detect: past the
limit, or through holds of unknown tasks).

Timeouts do not matter (a wait with a timeout is waited for as long as it lasts, as
PostgreSQL's detector also decides regardless of ``lock_timeout``).
"""

from __future__ import annotations

from collections import deque
from typing import Final

from tenure._core.semaphore import Semaphore, Waiter, holder_key
from tenure._core.state import EngineState, Node
from tenure._core.values import DEADLOCK_SEARCH_LIMIT
from tenure.errors import DeadlockError

__all__ = ["DEADLOCK_SEARCH_LIMIT", "Asked", "DeadlockSearch", "refuse_deadlock"]

#: The arrival number the request being asked goes by (it has none yet).
_ASKING: Final = -1
#: Past every arrival number: where the request being asked would queue.
_LAST: Final = 1 << 70

#: One semaphore a request waits on: the semaphore, the holder key, the tokens asked.
Asked = tuple[Semaphore, int, int]


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
    """
    limit = state.deadlock_search_limit
    if not task or limit <= 0 or not _waits_for_anyone(state, node, session_id, task, asked):
        return
    cycle = DeadlockSearch(state, node, limit).check(session_id, task, asked, replaced)
    if cycle is not None:
        state.note_deadlock(node, session_id, task, cycle, now)
        raise DeadlockError(f"refused: waiting would deadlock: {cycle}")


def _waits_for_anyone(
    state: EngineState, node: Node, session_id: int, task: int, asked: list[Asked]
) -> bool:
    """Whether the request would wait for a request: a holder whose task waits (the
    asking task's own holds wait with it), a set ahead, or (an upgrade) anyone ahead.
    Else nothing leads back to it: no search (the usual case, a holder that waits for
    nothing, costs a look at the holders only)."""
    if node.sets:
        return True
    sessions = state.sessions
    for sem, key, _ in asked:
        for owner in sem.each_owner():
            if owner.key == key:
                if sem.queue_length():
                    return True
            elif owner.task and (
                (owner.task == task and owner.session_id == session_id)
                or sessions[owner.session_id].task_waits(owner.task)
            ):
                return True
    return False


class _Request:
    """A pending request: one waiter, or the members of one all-or-none set.

    ``task`` is whose holds wait with it: the (session, task) of a known task with
    this one request pending, else None (its task's holds count as free).
    """

    __slots__ = ("label", "members", "order", "task")

    def __init__(self, order: int, members: list[Asked], label: str) -> None:
        self.order = order
        self.members = members
        self.label = label
        self.task: tuple[int, int] | None = None


class _Edge:
    """A request waits for ``target`` on semaphore ``name`` (held by it, or behind it)."""

    __slots__ = ("hard", "name", "target", "verb")

    def __init__(self, target: _Request, name: str, verb: str, hard: bool) -> None:
        self.target = target
        self.name = name
        self.verb = verb
        self.hard = hard


class _OverLimitError(Exception):
    """The search looked at more than its limit allows (never leaves this module)."""


class DeadlockSearch:
    """One check of one request that must wait (module docstring). Reads, never writes."""

    def __init__(self, state: EngineState, node: Node, limit: int) -> None:
        self._sessions = state.sessions
        self._node = node
        self._budget = limit
        #: Requests met, by arrival number.
        self._requests: dict[int, _Request] = {}
        #: What each expanded request waits for, by its arrival number.
        self._edges: dict[int, list[_Edge]] = {}
        #: Known tasks met: (session, task) -> their one request, or None (free).
        self._tasks: dict[tuple[int, int], _Request | None] = {}
        #: Each semaphore's set members, (arrival, holder key), made on first use.
        self._sets: dict[str, list[tuple[int, int]]] | None = None
        #: The arrival number of the request the asked one supersedes (gone if it queues).
        self._gone = 0

    # -- the check ---------------------------------------------------------------------

    def check(
        self, session_id: int, task: int, asked: list[Asked], replaced: tuple[str, int] | None
    ) -> str | None:
        """The cycle the request would close, as DeadlockError names it; None if none.

        ``asked``: each existing semaphore the request would wait on (a semaphore it
        makes is empty: nothing to wait for there); ``replaced``: the (name, hold) of
        the session's queued request it supersedes, if any.
        """
        for name, hold in self._sessions[session_id].task_waits(task):
            if (name, hold) != replaced:
                return None  # the task waits for something else already: not one request
            waiter = self._node.semaphores[name].waiter(holder_key(session_id, hold))
            assert waiter is not None, "a task's wait is its semaphore's waiter"
            self._gone = waiter.order
        asking = _Request(_ASKING, asked, _label(session_id, task))
        asking.task = (session_id, task)
        self._requests[_ASKING] = asking
        self._tasks[asking.task] = asking
        try:
            if not self._walk(asking):
                return None
            path = self._cycle(asking, None)
            if path is None:
                stuck = self._unreduced(asking)
                if asking.order not in stuck:
                    return None
                path = self._cycle(asking, stuck)
        except _OverLimitError:
            return None
        return None if path is None else _text(asking, path)

    def _spend(self, amount: int = 1) -> None:
        self._budget -= amount
        if self._budget < 0:
            raise _OverLimitError

    # -- the walk ----------------------------------------------------------------------

    def _walk(self, asking: _Request) -> bool:
        """Expand every request reachable from ``asking``; whether one waits for it."""
        todo = [asking]
        back = False
        while todo:
            request = todo.pop()
            if request.order in self._edges:
                continue
            self._spend()
            edges = self._edges[request.order] = []
            for sem, key, count in request.members:
                for edge in self._out_of(request, sem, key, count):
                    edges.append(edge)
                    back = back or edge.target is asking
                    if edge.target.order not in self._edges:
                        todo.append(edge.target)
        return back

    def _out_of(self, request: _Request, sem: Semaphore, key: int, count: int) -> list[_Edge]:
        """What ``request`` waits for on ``sem``: its holders, the sets ahead of it, and,
        for an upgrade, every request ahead of it (module docstring)."""
        edges: list[_Edge] = []
        upgrading = False
        for owner in sem.each_owner():
            self._spend()
            if owner.key == key:
                upgrading = True  # its own hold: the grant replaces it
                continue
            target = self._of_task(owner.session_id, owner.task)
            if target is not None:
                hard = owner.count + count > sem.limit
                edges.append(_Edge(target, sem.name, "held by", hard))
        asking = request.order == _ASKING
        if upgrading:
            # Those ahead may wait for this very hold: each is a request of its own.
            for waiter in sem.waiters.values():
                if not asking and waiter.order >= request.order:
                    break
                self._spend()
                ahead = self._of_waiter(sem, waiter)
                if ahead is not None and ahead is not request:
                    edges.append(_Edge(ahead, sem.name, "queued behind", True))
        elif self._node.sets:
            for order, member_key in self._sets_on(sem.name):
                if asking or order < request.order:
                    self._spend()
                    member = sem.waiter(member_key)
                    ahead = None if member is None else self._of_waiter(sem, member)
                    if ahead is not None and ahead is not request:
                        edges.append(_Edge(ahead, sem.name, "queued behind", True))
        return edges

    def _sets_on(self, name: str) -> list[tuple[int, int]]:
        """The set members queued on semaphore ``name``: (arrival, holder key)."""
        if self._sets is None:
            self._sets = {}
            for order, members in self._node.sets.items():
                self._spend(len(members))
                for member_name, key in members:
                    self._sets.setdefault(member_name, []).append((order, key))
        return self._sets.get(name, [])

    def _of_task(self, session_id: int, task: int) -> _Request | None:
        """The one request the known task ``(session_id, task)`` waits with; None if it
        has none (free), or several (its holds count as free), or is not known (0)."""
        if not task:
            return None
        tid = (session_id, task)
        if tid in self._tasks:
            return self._tasks[tid]
        self._tasks[tid] = None  # (while it is looked up: _of_waiter asks again)
        first: tuple[Semaphore, Waiter] | None = None
        for name, hold in self._sessions[session_id].task_waits(task):
            self._spend()
            sem = self._node.semaphores[name]
            found_waiter = sem.waiter(holder_key(session_id, hold))
            assert found_waiter is not None, "a task's wait is its semaphore's waiter"
            if first is None:
                first = (sem, found_waiter)
            elif found_waiter.order != first[1].order:
                return None  # two requests at once: not one task awaiting one
        found = None if first is None else self._of_waiter(*first)
        if found is not None:
            found.task = tid
        self._tasks[tid] = found
        return found

    def _of_waiter(self, sem: Semaphore, waiter: Waiter) -> _Request | None:
        """The request ``waiter`` (of ``sem``) belongs to; None if the asked one supersedes it."""
        order = waiter.order
        if order == self._gone:
            return None
        request = self._requests.get(order)
        if request is not None:
            return request
        node = self._node
        members: list[Asked]
        if node.sets and order in node.sets:
            members = []
            for name, key in node.sets[order]:
                member_sem = node.semaphores[name]
                member = member_sem.waiter(key)
                assert member is not None, "a set's member waits in its queue"
                members.append((member_sem, key, member.count))
        else:
            members = [(sem, waiter.key, waiter.count)]
        request = self._requests[order] = _Request(
            order, members, _label(waiter.session_id, waiter.task)
        )
        if waiter.task:
            self._of_task(waiter.session_id, waiter.task)  # (sets request.task if its own)
        return request

    # -- the answer --------------------------------------------------------------------

    def _cycle(self, asking: _Request, stuck: set[int] | None) -> list[_Edge] | None:
        """The shortest cycle from ``asking`` back to it: along hard edges (``stuck``
        None), or through the requests ``stuck`` (by arrival number) only."""
        parents: dict[int, tuple[_Request, _Edge]] = {}
        frontier = deque([asking])
        seen = {asking.order}
        while frontier:
            request = frontier.popleft()
            for edge in self._edges.get(request.order, ()):
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

    def _unreduced(self, asking: _Request) -> set[int]:
        """Holt's reduction with FIFO (module docstring) over the queues the walk
        reached, each as far as its furthest request the walk expanded: the arrival
        numbers of the requests that can never be granted."""
        reach: dict[str, tuple[Semaphore, int]] = {}
        for order in self._edges:
            bound = order if order != _ASKING else _LAST
            for sem, _, _ in self._requests[order].members:
                known = reach.get(sem.name)
                if known is None or known[1] < bound:
                    reach[sem.name] = (sem, bound)
        queues: dict[str, list[tuple[_Request, int, int]]] = {}
        for name, (sem, bound) in reach.items():
            queue: list[tuple[_Request, int, int]] = []
            for waiter in sem.waiters.values():
                if waiter.order > bound:
                    break
                self._spend()
                request = self._of_waiter(sem, waiter)
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
                self._spend()
                holder = self._of_task(owner.session_id, owner.task)
                # A free task's hold is released; so is one of a request the walk did
                # not reach (a lease handed to another task: not known to be stuck).
                if holder is not None and holder.order in units:
                    total += owner.count
                    keyed[owner.key] = owner.count
                    holds_of.setdefault(holder.order, []).append((name, owner.key))
            held[name], counted[name] = total, keyed
        reduced: set[int] = set()
        position = dict.fromkeys(queues, 0)

        def head(name: str) -> tuple[_Request, int, int] | None:
            queue, at = queues[name], position[name]
            while at < len(queue) and queue[at][0].order in reduced:
                at += 1
            position[name] = at
            return queue[at] if at < len(queue) else None

        def ready(request: _Request) -> bool:
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


def _label(session_id: int, task: int) -> str:
    return f"session {session_id} (task {task})" if task else f"session {session_id}"


def _text(asking: _Request, path: list[_Edge]) -> str:
    """``session 5 (task 3) waits for 'b' held by session 7 (task 1), which waits for ...``."""
    steps = [f"waits for {edge.name!r} {edge.verb} {edge.target.label}" for edge in path]
    return f"{asking.label} " + ", which ".join(steps)
