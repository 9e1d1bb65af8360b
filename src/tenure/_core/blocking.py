"""Who blocks whom, for one name: its holders, its waiters, and the chain to the roots.

:func:`why` answers :class:`~tenure._core.commands.WhyName` from one node's state. A
name's **holders** are listed in grant order and its **waiters** in grant order too
(the FIFO queue: the first is served first), a page at a time. A holder **waits for**
the names its hold's task has a request queued on, each with its place in that queue
(1: next): the task's waits when the client numbers its tasks (tenure's clients do:
the deadlock detector's rule, :mod:`tenure._core.wait_graph`), else every wait of its
session (a client that does not number its tasks, YDB's or dflockd's, asks one thing
at a time per session).

**Across sessions and nodes.** A session lives in one node, but one task of a
client process may hold through its session of one node and wait through its session
of another (or of the same node): its waits are found through
``EngineState.client_sessions``, the sessions of the same client identity (host,
process id, client name; an identity without a process id is not known to be one
process, and links nothing). Only attached sessions link (a session whose client is
gone may have been resumed by another process, or its process id taken by a new one:
task numbers are per process), and only a task the client numbered (not 0). A
holder's ``waiting_for`` and a chain link's ``waits_elsewhere`` list those waits
with their nodes; the deadlock detector still looks within one node.

The **chain** follows those waits from the name, breadth first: each (node, name,
holder) met once, with the names that holder waits for; the **roots** are the holders
met that wait for nothing (a cycle has none: a deadlock of holds whose tasks are not
known, which the detector cannot see). Whoever answers hides what the asker may not
read (:func:`~tenure._core.why_report.hidden`).

The walk is bounded: the chain has at most the page's ``limit`` links (so that an
answer fits a frame), and every hold, wait and queue place it looks at is spent from
the engine's ``why_look_limit`` (:data:`~tenure._core.limits.WHY_LOOK_LIMIT` by default,
``tenure serve --why-look-limit``); past it the chain stops where it is
(``cut``), and a place in a queue not reached reads 0. So an answer costs a bounded
step of the engine's loop however many waiters are queued.
"""

from __future__ import annotations

from collections import deque
from itertools import islice

from tenure._core.checks import check_page_limit
from tenure._core.node import Node
from tenure._core.semaphore import Semaphore, holder_key
from tenure._core.session import Session
from tenure._core.state import EngineState
from tenure._core.values import NO_IDENTITY, ClientIdentity
from tenure._core.why_report import WhyHolder, WhyLink, WhyReport, WhyRoot, WhyWait, WhyWaiter
from tenure.errors import InvalidArgumentError

__all__ = ["why"]


class _Looks:
    """What a walk may still look at (the engine's ``why_look_limit``)."""

    __slots__ = ("cut", "left")

    def __init__(self, limit: int) -> None:
        self.left = limit
        self.cut = False

    def spend(self, amount: int = 1) -> bool:
        """Whether ``amount`` more looks are within the limit (spent if so)."""
        if amount > self.left:
            self.cut = True
            return False
        self.left -= amount
        return True


def why(
    state: EngineState, node_name: str, name: str, after: int, limit: int, now: float
) -> WhyReport:
    """Who blocks ``name`` of ``node_name`` at engine time ``now``: the page of
    ``limit`` holders and of ``limit`` waiters after the ``after``-th, the chain and
    the roots (module docstring). NotFoundError for a node or name that does not exist."""
    node = state.lookup_node(node_name)
    sem = state.lookup_semaphore(node, name)
    limit = check_page_limit(limit)
    if type(after) is not int or after < 0:
        raise InvalidArgumentError(f"after must be a non-negative position, got {after!r}")
    looks = _Looks(state.why_look_limit)
    sessions = state.sessions
    # The chain first: what blocks matters more than a place in a queue, which is
    # what a long queue makes costly.
    chain, roots = _chain(state, node, sem, looks, now, limit)
    holders: list[WhyHolder] = []
    for owner in sem.each_owner():
        if len(holders) == limit:
            break
        session = sessions.get(owner.session_id)
        ends = owner.ends
        holders.append(
            WhyHolder(
                owner.session_id,
                *_who(session),
                owner.count,
                owner.token,
                max(0.0, now - owner.since),
                None if ends is None else max(0.0, ends - now),
                tuple(_waits(state, session, owner.task, looks)),
            )
        )
    waiters: list[WhyWaiter] = []
    # (islice skips the first ``after`` in C: a page deep in a long queue stays cheap)
    for position, waiter in enumerate(
        islice(sem.waiters.values(), after, after + limit), after + 1
    ):
        session = sessions.get(waiter.session_id)
        waited = max(0.0, now - waiter.since)
        waiters.append(WhyWaiter(waiter.session_id, *_who(session), waiter.count, position, waited))
    return WhyReport(
        node.name,
        sem.name,
        tuple(holders),
        tuple(waiters),
        chain,
        roots,
        len(sem.owners),
        sem.queue_length(),
        looks.cut,
    )


def _who(session: Session | None) -> tuple[str, ClientIdentity, str]:
    """A session's description and identity (none: a hold outliving its session's
    record, which the engine never keeps: shown blank rather than refused), and its
    address: "" (the engine knows no connection; the server fills it in)."""
    if session is None:
        return "", NO_IDENTITY, ""
    return session.description, session.identity, ""


def _places(
    state: EngineState, session: Session, task: int, looks: _Looks
) -> list[tuple[Session, str, int]]:
    """The (session, name, hold) of each wait ``session``'s hold of task ``task`` waits
    with (module docstring): the task's, in this session and in the other attached
    sessions of its client process; or, task unknown (0), every one of the session."""
    if not task:
        return [(session, name, hold) for name in session.waits for hold in session.waits_on(name)]
    found = [(session, name, hold) for name, hold in session.task_waits(task)]
    identity = session.identity
    if not identity.pid or session.expires_at is not None:
        return found
    for sid in state.sessions_of(identity):
        if sid == session.session_id:
            continue
        if not looks.spend():
            break
        other = state.sessions[sid]
        if other.expires_at is None and other.waits:
            found += [(other, name, hold) for name, hold in other.task_waits(task)]
    return found


def _waits(state: EngineState, session: Session | None, task: int, looks: _Looks) -> list[WhyWait]:
    """What the hold of ``session``'s task ``task`` waits for, each with its place."""
    if session is None:
        return []
    found: list[WhyWait] = []
    for waiting, name, hold in _places(state, session, task, looks):
        if not looks.spend():
            break
        sem = state.nodes[waiting.node].semaphores[name]
        place = _position(sem, holder_key(waiting.session_id, hold), looks)
        found.append(WhyWait(waiting.node, name, place))
    return found


def _position(sem: Semaphore, key: int, looks: _Looks) -> int:
    """The place of holder ``key``'s request in ``sem``'s queue (1: next), or 0 when
    finding it would pass the look limit (each place before it is a look)."""
    queue = sem.waiters
    if key not in queue:
        return 0  # (never: a task's waits are its semaphores' waiters)
    ahead = list(islice(queue, min(looks.left, len(queue))))  # (in C: no loop of ours)
    try:
        position = ahead.index(key) + 1
    except ValueError:
        looks.spend(looks.left + 1)  # (past the limit: said cut)
        return 0
    looks.spend(position)
    return position


def _chain(
    state: EngineState, node: Node, sem: Semaphore, looks: _Looks, now: float, limit: int
) -> tuple[tuple[WhyLink, ...], tuple[WhyRoot, ...]]:
    """Every (node, name, holder) met from ``sem``'s holders along what they wait for,
    breadth first (``limit`` at most: more is cut), and the roots among them."""
    chain: list[WhyLink] = []
    roots: list[WhyRoot] = []
    todo = deque([(node, sem)])
    met = {(node.name, sem.name)}
    sessions = state.sessions
    while todo:
        where, here = todo.popleft()
        for owner in here.each_owner():
            if len(chain) == limit:
                looks.cut = True
            if looks.cut or not looks.spend():
                return tuple(chain), tuple(roots)
            session = sessions.get(owner.session_id)
            names: list[str] = []
            elsewhere: list[WhyWait] = []
            if session is not None:
                for waiting, name, hold in _places(state, session, owner.task, looks):
                    there = where if waiting.node == where.name else state.nodes[waiting.node]
                    if there is where:
                        if name not in names:
                            names.append(name)
                    else:  # (rare: its place is counted, as a holder's waits are)
                        key = holder_key(waiting.session_id, hold)
                        place = _position(there.semaphores[name], key, looks)
                        elsewhere.append(WhyWait(there.name, name, place))
                    if (there.name, name) not in met:
                        met.add((there.name, name))
                        todo.append((there, there.semaphores[name]))
            chain.append(
                WhyLink(where.name, here.name, owner.session_id, tuple(names), tuple(elsewhere))
            )
            if not names and not elsewhere:
                held_for = max(0.0, now - owner.since)
                roots.append(
                    WhyRoot(where.name, here.name, owner.session_id, *_who(session), held_for)
                )
    return tuple(chain), tuple(roots)
