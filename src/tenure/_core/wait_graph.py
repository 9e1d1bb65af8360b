"""The graph a deadlock check walks: who waits for whom, read from one node's state.

Its nodes are pending requests (:class:`PendingRequest`: a waiter, or an all-or-none set's
members, which share one arrival number); the holds of a task with exactly one
pending request wait with that request. A request on semaphore S waits for every
holder of S (but its own hold, which an upgrade replaces) and for every request
ahead of it in S's queue (FIFO: nobody barges). An :class:`Edge` is *hard* when its
target alone blocks the request for good: a request ahead in the queue, or a hold of
``c`` tokens where ``c`` plus the tokens asked exceed S's limit (every edge of a
mutex).

:class:`WaitGraph` builds as much of it as a check needs, from the request being
asked (:meth:`WaitGraph.ask`) along the edges (:meth:`WaitGraph.walk`): a plain
request ahead in a queue waits for a subset of what the new one waits for there
(the same holders, fewer requests ahead), so it is not expanded, and the walk stays
linear in what it touches; all-or-none sets ahead are (they wait elsewhere too),
and so are the requests ahead of an upgrade (they may wait for the upgrader's own
hold). Every
hold, request and set member it looks at is spent from its budget
(:meth:`WaitGraph.spend`); past it, :class:`OverLimitError`. What the graph means,
and what a check answers, is :mod:`tenure._core.deadlocks`'s.
"""

from __future__ import annotations

from typing import Final

from tenure._core.node import Node
from tenure._core.semaphore import Semaphore, Waiter, holder_key
from tenure._core.state import EngineState

__all__ = ["ASKING", "Asked", "Edge", "OverLimitError", "PendingRequest", "WaitGraph", "label"]

#: The arrival number the request being asked goes by (it has none yet).
ASKING: Final = -1

#: One semaphore a request waits on: the semaphore, the holder key, the tokens asked.
Asked = tuple[Semaphore, int, int]


class PendingRequest:
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


class Edge:
    """A request waits for ``target`` on semaphore ``name`` (held by it, or behind it)."""

    __slots__ = ("hard", "name", "target", "verb")

    def __init__(self, target: PendingRequest, name: str, verb: str, hard: bool) -> None:
        self.target = target
        self.name = name
        self.verb = verb
        self.hard = hard


class OverLimitError(Exception):
    """The check looked at more than its limit allows (never leaves the engine's
    deadlock modules: the request then waits, no deadlock reported)."""


class WaitGraph:
    """The part of one node's wait-for graph a check reaches (module docstring).
    Reads the state, never writes it."""

    def __init__(self, state: EngineState, node: Node, limit: int) -> None:
        self._sessions = state.sessions
        self._node = node
        self._limit = limit
        self._budget = limit
        #: Requests met, by arrival number.
        self.requests: dict[int, PendingRequest] = {}
        #: What each expanded request waits for, by its arrival number.
        self.edges: dict[int, list[Edge]] = {}
        #: Known tasks met: (session, task) -> their one request, or None (free).
        self._tasks: dict[tuple[int, int], PendingRequest | None] = {}
        #: Each semaphore's set members, (arrival, holder key), made on first use.
        self._sets: dict[str, list[tuple[int, int]]] | None = None
        #: The arrival number of the request the asked one supersedes (gone if it queues).
        self._gone = 0

    def ask(
        self, session_id: int, task: int, asked: list[Asked], replaced: tuple[str, int] | None
    ) -> PendingRequest | None:
        """The request being asked, as the graph's node :data:`ASKING`; None if its
        task waits for something else already (it is not one request, whose holds
        would wait with it).

        ``asked``: each existing semaphore the request would wait on; ``replaced``: the
        (name, hold) of the session's queued request it supersedes, if any.
        """
        for name, hold in self._sessions[session_id].task_waits(task):
            if (name, hold) != replaced:
                return None
            waiter = self._node.semaphores[name].waiter(holder_key(session_id, hold))
            assert waiter is not None, "a task's wait is its semaphore's waiter"
            self._gone = waiter.order
        asking = PendingRequest(ASKING, asked, label(session_id, task))
        asking.task = (session_id, task)
        self.requests[ASKING] = asking
        self._tasks[asking.task] = asking
        return asking

    def spend(self, amount: int = 1) -> None:
        """Count ``amount`` more things looked at; OverLimitError past the limit (the
        things that would pass it are not counted: they are not looked at)."""
        if amount > self._budget:
            raise OverLimitError
        self._budget -= amount

    @property
    def spent(self) -> int:
        """How many things it has looked at (:meth:`spend`): at most its limit."""
        return self._limit - self._budget

    def walk(self, asking: PendingRequest) -> bool:
        """Expand every request reachable from ``asking``; whether one waits for it."""
        todo = [asking]
        back = False
        while todo:
            request = todo.pop()
            if request.order in self.edges:
                continue
            self.spend()
            edges = self.edges[request.order] = []
            for sem, key, count in request.members:
                for edge in self._out_of(request, sem, key, count):
                    edges.append(edge)
                    back = back or edge.target is asking
                    if edge.target.order not in self.edges:
                        todo.append(edge.target)
        return back

    def _out_of(self, request: PendingRequest, sem: Semaphore, key: int, count: int) -> list[Edge]:
        """What ``request`` waits for on ``sem``: its holders, the sets ahead of it, and,
        for an upgrade, every request ahead of it (module docstring)."""
        edges: list[Edge] = []
        upgrading = False
        for owner in sem.each_owner():
            self.spend()
            if owner.key == key:
                upgrading = True  # its own hold: the grant replaces it
                continue
            target = self.of_task(owner.session_id, owner.task)
            if target is not None:
                hard = owner.count + count > sem.limit
                edges.append(Edge(target, sem.name, "held by", hard))
        asking = request.order == ASKING
        if upgrading:
            # Those ahead may wait for this very hold: each is a request of its own.
            for waiter in sem.waiters.values():
                if not asking and waiter.order >= request.order:
                    break
                self.spend()
                ahead = self.of_waiter(sem, waiter)
                if ahead is not None and ahead is not request:
                    edges.append(Edge(ahead, sem.name, "queued behind", True))
        elif self._node.sets:
            for order, member_key in self._sets_on(sem.name):
                if asking or order < request.order:
                    self.spend()
                    member = sem.waiter(member_key)
                    ahead = None if member is None else self.of_waiter(sem, member)
                    if ahead is not None and ahead is not request:
                        edges.append(Edge(ahead, sem.name, "queued behind", True))
        return edges

    def _sets_on(self, name: str) -> list[tuple[int, int]]:
        """The set members queued on semaphore ``name``: (arrival, holder key)."""
        if self._sets is None:
            self._sets = {}
            for order, members in self._node.sets.items():
                self.spend(len(members))
                for member_name, key in members:
                    self._sets.setdefault(member_name, []).append((order, key))
        return self._sets.get(name, [])

    def of_task(self, session_id: int, task: int) -> PendingRequest | None:
        """The one request the known task ``(session_id, task)`` waits with; None if it
        has none (free), or several (its holds count as free), or is not known (0)."""
        if not task:
            return None
        tid = (session_id, task)
        if tid in self._tasks:
            return self._tasks[tid]
        self._tasks[tid] = None  # (while it is looked up: of_waiter asks again)
        first: tuple[Semaphore, Waiter] | None = None
        for name, hold in self._sessions[session_id].task_waits(task):
            self.spend()
            sem = self._node.semaphores[name]
            found_waiter = sem.waiter(holder_key(session_id, hold))
            assert found_waiter is not None, "a task's wait is its semaphore's waiter"
            if first is None:
                first = (sem, found_waiter)
            elif found_waiter.order != first[1].order:
                return None  # two requests at once: not one task awaiting one
        found = None if first is None else self.of_waiter(*first)
        if found is not None:
            found.task = tid
        self._tasks[tid] = found
        return found

    def of_waiter(self, sem: Semaphore, waiter: Waiter) -> PendingRequest | None:
        """The request ``waiter`` (of ``sem``) belongs to; None if the asked one supersedes it."""
        order = waiter.order
        if order == self._gone:
            return None
        request = self.requests.get(order)
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
        request = self.requests[order] = PendingRequest(
            order, members, label(waiter.session_id, waiter.task)
        )
        if waiter.task:
            self.of_task(waiter.session_id, waiter.task)  # (sets request.task if its own)
        return request


def label(session_id: int, task: int) -> str:
    """How a cycle's text names a request's task: ``session 5 (task 3)``."""
    return f"session {session_id} (task {task})" if task else f"session {session_id}"
