"""The engine's state and the steps every command shares. [compiled]

:class:`EngineState` holds nodes, sessions, the fencing counter, deadlines,
watches and queued effects. The command handlers (:mod:`tenure._core.handlers`)
are functions of an ``EngineState``; the shared steps they call are its methods
here, and are where rules 2, 3 and 5 of the engine (see :mod:`tenure._core.engine`)
are kept.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import field
from typing import Final

from tenure._core._dataclass import dataclass
from tenure._core.claims import ClaimTimer
from tenure._core.deadlines import (
    ClaimDeadline,
    Deadlines,
    LeaseDeadline,
    LockDelayDeadline,
    SessionDeadline,
    WaiterDeadline,
)
from tenure._core.effects import AcquireFailed, Effect, Granted, WatchFired
from tenure._core.quotas import (
    Q_DATA_BYTES,
    Q_MISSED_BYTES,
    Q_NODES,
    Q_SEMAPHORES,
    Q_SESSIONS,
    Q_WAITERS,
    QuotaLedger,
    Usage,
    text_bytes,
)
from tenure._core.semaphore import Owner, Semaphore, Waiter
from tenure._core.session import Missed as Missed
from tenure._core.session import Session as Session
from tenure._core.sorted_keys import SortedKeys
from tenure._core.values import (
    DEADLOCK_SEARCH_LIMIT,
    DEFAULT_NODE_CEILINGS,
    MAX_DEADLOCKS_SHOWN,
    MAX_LISTED_PER_FIRING,
    MAX_PREFIX_WATCHES_PER_NODE,
    MAX_WATCHES_PER_SEMAPHORE,
    BrokenDeadlock,
    NodeConfig,
    SemaphoreDescription,
    check_name,
)
from tenure._core.watches import EXISTENCE, OWNERS, WAITERS, Change, Watches
from tenure.errors import ErrorCode, LimitExceededError, NotFoundError, SessionExpiredError


@dataclass(slots=True)
class Node:
    """A named namespace of semaphores and sessions.

    ``annex`` holds opaque bytes under short keys that a face keeps with the
    node (SetNodeAnnex, GetNodeAnnex): None until the first key is set, so that a
    node nobody annotates costs no dict.

    ``sets`` holds the all-or-none sets queued (AcquireAll): by their
    arrival number (the ``order`` every member waiter shares), each member's
    semaphore name and holder key. A member is granted only with all the others,
    and leaves its queue only with them (:meth:`EngineState.settle`,
    :meth:`EngineState.withdraw_set`).

    ``claims`` holds the live claims by semaphore name (their records are the
    semaphores' data; :mod:`tenure._core.claims`): when each ends, on the engine's
    clock. Empty on most nodes.

    ``semaphore_index`` and ``session_index`` keep the keys of ``semaphores`` and
    ``sessions`` sorted, for listings (:mod:`tenure._core.sorted_keys`): a
    semaphore is added and removed with :meth:`add_semaphore` and
    :meth:`drop_semaphore`, a session with :meth:`add_session` and
    :meth:`drop_session`.
    """

    name: str
    config: NodeConfig
    semaphores: dict[str, Semaphore] = field(default_factory=dict)
    sessions: set[int] = field(default_factory=set)
    annex: dict[str, bytes] | None = None
    sets: dict[int, tuple[tuple[str, int], ...]] = field(default_factory=dict)
    claims: dict[str, ClaimTimer] = field(default_factory=dict)
    semaphore_index: SortedKeys[str] = field(default_factory=SortedKeys)
    session_index: SortedKeys[int] = field(default_factory=SortedKeys)
    #: Its owner's usage (:mod:`tenure._core.quotas`; None: counted nowhere): the node
    #: counts there from :meth:`EngineState.add_node` on, with its annex's bytes.
    usage: Usage | None = None

    def add_semaphore(self, sem: Semaphore) -> Semaphore:
        """Keep ``sem`` (a new name) on the node, and its name in the index; it counts
        against its owner (its ``usage``) with its data from now on."""
        self.semaphores[sem.name] = sem
        self.semaphore_index.add(sem.name)
        _count_semaphore(sem, 1)
        return sem

    def drop_semaphore(self, name: str) -> None:
        """Forget the semaphore ``name`` (it is there), and its name in the index."""
        sem = self.semaphores.pop(name)
        self.semaphore_index.discard(name)
        if not sem.is_idle():  # (a forced delete, a dropped node)
            sem.forget_holders_data()
        _count_semaphore(sem, -1)

    def hand_over(self, sem: Semaphore, usage: Usage | None) -> None:
        """``sem`` (kept here) counts against ``usage``'s owner from now on, all that
        :func:`_count_semaphore` counts of it, and no longer against its owner until now
        (a claim takes over an ended claim's semaphore:
        :func:`tenure._core.handlers.claims.claim_name`)."""
        if sem.usage is not usage:
            _count_semaphore(sem, -1)
            sem.usage = usage
            _count_semaphore(sem, 1)

    def uncount_semaphores(self) -> None:
        """Its semaphores (and their holders' data) count against nobody any more: the
        node is dropped with them (one pass, no index kept up meanwhile)."""
        for sem in self.semaphores.values():
            if not sem.is_idle():
                sem.forget_holders_data()
            _count_semaphore(sem, -1)
            sem.usage = None

    def annex_bytes(self) -> int:
        """The bytes of its annex's keys and values (what its owner's ``data_bytes``
        counts of it: :func:`annex_entry_bytes` each)."""
        if not self.annex:
            return 0
        return sum(annex_entry_bytes(key, value) for key, value in self.annex.items())

    def counted_bytes(self) -> int:
        """What it counts in its owner's ``data_bytes``: its name and its annex's keys
        and values."""
        return text_bytes(self.name) + self.annex_bytes()

    def add_session(self, session_id: int) -> None:
        """Count the session ``session_id`` as the node's."""
        self.sessions.add(session_id)
        self.session_index.add(session_id)

    def drop_session(self, session_id: int) -> None:
        """The session ``session_id`` is no longer the node's."""
        self.sessions.discard(session_id)
        self.session_index.discard(session_id)

    def rebuild_indexes(self) -> None:
        """Sort the indexes afresh from the dicts (after a snapshot filled them)."""
        self.semaphore_index = SortedKeys(self.semaphores)
        self.session_index = SortedKeys(self.sessions)


def annex_entry_bytes(key: str, value: bytes) -> int:
    """What one key of a node's annex counts in the node's owner's ``data_bytes``: the
    key as a name is counted (:func:`text_bytes`, at most 64 bytes of UTF-8), and
    its value."""
    return text_bytes(key) + len(value)


def _count_semaphore(sem: Semaphore, sign: int) -> None:
    """Count ``sem`` with its name and data (:func:`semaphore_bytes`) once more (``sign``
    1) or once less (-1) against its owner (:mod:`tenure._core.quotas`): what a
    semaphore costs its owner, in one place."""
    usage = sem.usage
    if usage is not None:
        usage.add(Q_SEMAPHORES, sign)
        usage.add(Q_DATA_BYTES, sign * semaphore_bytes(sem))


def semaphore_bytes(sem: Semaphore) -> int:
    """What ``sem`` counts in its owner's ``data_bytes``: its name and its data."""
    return text_bytes(sem.name) + len(sem.data)


#: What one kept broken deadlock costs the server's memory besides its text's bytes:
#: the record and its numbers, a share of its node's deque (about 250 measured with
#: ``sys.getsizeof``; rounded up, as :data:`~tenure._core.quotas.OBJECT_BYTES` are).
BROKEN_DEADLOCK_BYTES: Final = 300


def kept_deadlock_bytes(broken: BrokenDeadlock) -> int:
    """What keeping ``broken`` costs in the memory budget's estimate."""
    return BROKEN_DEADLOCK_BYTES + len(broken.cycle.encode())


class EngineState:
    """The engine's state, its lookups, and the steps shared by command handlers.

    Everything here is state a snapshot keeps (nodes, sessions, the counters, the
    time), apart from what is rebuilt or belongs to the host: the deadline heap is
    rebuilt from the state (:meth:`reschedule_all`), watches belong to connections,
    ``effects`` are queued until the host takes them, and ``broken_deadlocks`` and
    ``deadlock_search_limit`` are the host's (what it shows, what it allows).
    """

    def __init__(
        self, *, max_nodes: int = 10_000, deadlock_search_limit: int = DEADLOCK_SEARCH_LIMIT
    ) -> None:
        self.max_nodes = max_nodes
        #: The most each limit of a node's NodeConfig may be (CreateNode, AlterNode):
        #: the host's, like ``max_nodes`` (a journal's replay lifts both: what was
        #: logged was let in, whatever this server's settings would decide now).
        self.node_ceilings: Mapping[str, int] = DEFAULT_NODE_CEILINGS
        #: How much one deadlock check may look at (:mod:`tenure._core.deadlocks`);
        #: 0: requests are not checked (a journal's replay sets it so: a request that
        #: was logged was let wait, whatever this engine's limit would decide).
        self.deadlock_search_limit = deadlock_search_limit
        #: How many prefix watches one node may have armed (whoever armed them): the
        #: host's, like ``max_nodes`` (watches are not logged: no replay arms one).
        self.max_prefix_watches_per_node = MAX_PREFIX_WATCHES_PER_NODE
        #: How many watches one quota owner may have armed on one semaphore name (each
        #: fires on a change of it, in the changer's step): the host's, like
        #: ``max_prefix_watches_per_node``.
        self.max_watches_per_semaphore = MAX_WATCHES_PER_SEMAPHORE
        #: The most owners and waiters a watch firing lists (a bigger listing is left
        #: to the watcher's own describe: :meth:`fire_watches`): the host's, like
        #: ``max_watches_per_semaphore``.
        self.max_listed_per_firing = MAX_LISTED_PER_FIRING
        #: The latest deadlocks refused on each node, oldest first (not state: a
        #: refused command changes none, and is not logged; shown by DescribeNode).
        #: Their bytes count in the memory budget's estimate (:meth:`note_deadlock`).
        self.broken_deadlocks: dict[str, deque[BrokenDeadlock]] = {}
        #: What deadlock checks did since this engine was made, per (what, quota owner
        #: of the asking session): "looked" (holds, requests and set members looked
        #: at: each check at most ``deadlock_search_limit``), "refused", "cut" (at the
        #: limit): :mod:`tenure._core.deadlocks`; not state (shown by /metrics).
        self.deadlock_counts: dict[tuple[str, str], int] = {}
        self.nodes: dict[str, Node] = {}
        #: The names of ``nodes``, sorted (for listings; :meth:`add_node`, :meth:`drop_node`).
        self.node_index: SortedKeys[str] = SortedKeys()
        self.sessions: dict[int, Session] = {}
        self.last_token = 0  # rule 3: the fencing counter
        self.last_session_id = 0
        self.last_watch_id = 0
        self.last_order = 0  # the arrival number of the latest queued request
        self.now = 0.0  # the latest time the engine was given
        self.deadlines = Deadlines()
        self.watches = Watches()
        #: What each owner holds, their quotas and the memory budget (tenure._core.quotas).
        self.ledger = QuotaLedger()
        #: Who sends the command being applied: its token's name, set by the host
        #: (never by a client) and logged with the commands that make what it owns
        #: (CreateSession, CreateNode); "" (nobody): no quotas apply.
        self.actor = ""
        #: Effects queued since the host last took them, in the order they happened.
        self.effects: list[Effect] = []

    def add_node(self, node: Node) -> None:
        """Keep ``node`` (a new name), and its name in the index."""
        self.nodes[node.name] = node
        self.node_index.add(node.name)
        if node.usage is not None:
            node.usage.add(Q_NODES, 1)
            node.usage.add(Q_DATA_BYTES, node.counted_bytes())

    def drop_node(self, name: str) -> None:
        """Forget the node ``name`` (it is there, with no session and no semaphore
        left), and its name in the index."""
        node = self.nodes.pop(name)
        self.node_index.discard(name)
        if node.usage is not None:
            node.usage.add(Q_NODES, -1)
            node.usage.add(Q_DATA_BYTES, -node.counted_bytes())

    def add_session(self, session: Session, node: Node) -> None:
        """Keep the new ``session`` of ``node``; it counts against its owner (its
        ``usage``) with its description's, identity's and key's bytes from now on."""
        self.sessions[session.session_id] = session
        node.add_session(session.session_id)
        usage = session.usage
        if usage is not None:
            usage.add(Q_SESSIONS, 1)
            usage.add(Q_DATA_BYTES, session.counted_bytes())

    def forget_session(self, session: Session, node: Node) -> None:
        """Forget ``session`` of ``node``, and what it counted against its owner: itself,
        its description, identity and key, its watches (disarmed here), its waits
        (taken out of their queues by the caller) and the endings it kept."""
        sid = session.session_id
        del self.sessions[sid]
        node.drop_session(sid)
        self.disarm_watches(session)
        usage = session.usage
        if usage is not None:
            usage.add(Q_SESSIONS, -1)
            usage.add(Q_DATA_BYTES, -session.counted_bytes())
            usage.add(Q_WAITERS, -session.wait_count())
            usage.add(Q_MISSED_BYTES, -session.kept_missed_bytes())

    def disarm_watches(self, session: Session) -> None:
        """Disarm every watch of ``session``: each uncounted with its name's bytes."""
        for watch_id in list(session.watches):
            watch = self.watches.disarm(watch_id)
            assert watch is not None, "a session's watch is armed"
            session.discard_watch(watch)

    def rebuild_indexes(self) -> None:
        """Sort every index afresh from the dicts (after a snapshot filled them)."""
        self.node_index = SortedKeys(self.nodes)
        for node in self.nodes.values():
            node.rebuild_indexes()

    # -- lookups: each raises the error a command reports when its target is missing --

    def lookup_node(self, name: object) -> Node:
        """The node called ``name`` (checked as a name), or NotFoundError."""
        node = self.nodes.get(check_name("node", name))
        if node is None:
            raise NotFoundError(f"node {name!r} does not exist")
        return node

    def lookup_session(self, session_id: int) -> Session:
        """The live session ``session_id``, or SessionExpiredError."""
        session = self.sessions.get(session_id)
        if session is None:
            raise SessionExpiredError(f"session {session_id} does not exist (expired or closed)")
        return session

    def lookup_session_node(self, session_id: int) -> tuple[Session, Node]:
        """The live session ``session_id`` and its node, or SessionExpiredError."""
        # (lookup_session inlined: this is on every semaphore command's path.)
        session = self.sessions.get(session_id)
        if session is None:
            raise SessionExpiredError(f"session {session_id} does not exist (expired or closed)")
        return session, self.nodes[session.node]

    def lookup_semaphore(self, node: Node, name: object) -> Semaphore:
        """The semaphore ``name`` of ``node`` (checked as a name), or NotFoundError."""
        sem = node.semaphores.get(check_name("semaphore", name))
        if sem is None:
            raise NotFoundError(f"semaphore {name!r} does not exist")
        return sem

    def check_quota(self, usage: Usage | None, index: int, amount: int = 1) -> None:
        """Raise LimitExceededError if ``usage``'s owner may not hold ``amount`` more of
        ``index`` (a :mod:`tenure._core.quotas` index), or the memory budget is used up."""
        if usage is not None:
            self.ledger.check(usage, index, amount)

    def check_made(self, usage: Usage | None, index: int, size: int, amount: int = 1) -> None:
        """:meth:`check_quota` of ``amount`` new ones of ``index`` that come with ``size``
        bytes (their names, keys, data: what ``data_bytes`` counts of them), asked of
        the memory budget together (:meth:`QuotaLedger.check_made`)."""
        if usage is not None:
            self.ledger.check_made(usage, index, amount, size)

    def check_all(self, usage: Usage | None, asks: list[tuple[int, int]]) -> None:
        """:meth:`check_quota` of everything one command makes at once, the memory
        budget asked for the sum (:meth:`QuotaLedger.check_all`)."""
        if usage is not None:
            self.ledger.check_all(usage, asks)

    def check_room(self, node: Node) -> None:
        """Raise LimitExceededError if ``node`` cannot take one more semaphore."""
        if len(node.semaphores) >= node.config.max_semaphores:
            raise LimitExceededError(
                f"max_semaphores ({node.config.max_semaphores}) reached on node {node.name!r}"
            )

    def note_deadlock(self, node: Node, session_id: int, task: int, cycle: str, now: float) -> None:
        """Keep a deadlock refused on ``node`` (the latest MAX_DEADLOCKS_SHOWN), its
        bytes counted in the memory budget's estimate (the one it pushes out uncounted);
        not kept if that would pass the budget (which is for the state: a refusal goes
        unrecorded rather than have others' commands refused)."""
        kept = self.broken_deadlocks.get(node.name)
        ledger = self.ledger
        broken = BrokenDeadlock(now, session_id, task, cycle)
        cost = kept_deadlock_bytes(broken)
        if kept is not None and len(kept) == MAX_DEADLOCKS_SHOWN:
            cost -= kept_deadlock_bytes(kept[0])  # (pushed out by this one)
        if ledger.budget and ledger.estimate() + cost > ledger.budget:
            return
        if kept is None:
            kept = self.broken_deadlocks[node.name] = deque(maxlen=MAX_DEADLOCKS_SHOWN)
        kept.append(broken)
        ledger.kept_bytes += cost

    def forget_deadlocks(self, name: str) -> None:
        """Forget the deadlocks broken on node ``name`` (dropped), uncounted."""
        kept = self.broken_deadlocks.pop(name, None)
        if kept is not None:
            self.ledger.kept_bytes -= sum(kept_deadlock_bytes(broken) for broken in kept)

    # -- the shared steps -------------------------------------------------------------

    def grant(
        self,
        node: Node,
        sem: Semaphore,
        session_id: int,
        count: int,
        data: bytes,
        lease_ttl: float | None,
        now: float,
        hold: int = 0,
        task: int = 0,
    ) -> Owner:
        """Give tokens to a session's hold (asked by its client's ``task``) with a fresh
        fencing token (rule 3)."""
        self.last_token += 1
        ttl = node.config.default_lease if lease_ttl is None else lease_ttl
        deadline = None if ttl is None else now + ttl
        # A time equal to the engine's shares its float: a burst of grants in one
        # instant (a server's clock moves in steps) then costs no float object each.
        since = self.now if now == self.now else now
        session = self.sessions[session_id]
        # The session's own id object, not the command's: a decoded request brings a
        # new int each time (above 256), which a hold would otherwise keep (32 bytes).
        sid = session.session_id
        usage = self.sessions[sid].usage  # (its data counts against its session's owner)
        owner = Owner(
            sid, count, data, self.last_token, ttl, deadline, hold, since, task, usage=usage
        )
        sem.set_owner(owner)
        session.add_hold(sem.name, hold)
        if deadline is not None:
            key = LeaseDeadline(node.name, sem.name, owner.key, owner.token)
            self.deadlines.schedule(deadline, key)
        return owner

    def settle(self, node: Node, sem: Semaphore, now: float, change: Change) -> None:
        """Rule 5: serve the queue, drop an idle ephemeral semaphore, fire watches.

        The head is granted while it fits; a head that is a member of an all-or-none
        set (AcquireAll) is granted only if every member is the head of its queue and
        fits there, and then all are at once; else it waits, and holds back its queue
        as any head does. Since a set joins every queue in one step, queues agree
        on the order of requests: the earliest request waiting anywhere is the head
        of all its queues, so it is granted once its tokens are free (no deadlock).
        """
        sets = node.sets
        others: list[Semaphore] = []
        while (head := sem.head()) is not None and sem.fits(head.key, head.count, now):
            if sets and head.order in sets:
                members = self._ready_set(node, sets[head.order], now)
                if members is None:
                    break
                del sets[head.order]
                for member_sem, member in members:
                    member_sem.remove_waiter(member.key)
                    self._grant_waiter(node, member_sem, member, now)
                    if member_sem is not sem:
                        others.append(member_sem)
            else:
                sem.remove_waiter(head.key)
                self._grant_waiter(node, sem, head, now)
            change |= OWNERS | WAITERS
        if sem.ephemeral and sem.is_idle() and now >= sem.blocked_until:
            node.drop_semaphore(sem.name)
            change = EXISTENCE
        if change:
            self.fire_watches(node, sem.name, change)
        for other in others:  # (their heads changed: serve them too)
            self.settle(node, other, now, OWNERS | WAITERS)

    def _grant_waiter(self, node: Node, sem: Semaphore, waiter: Waiter, now: float) -> None:
        """Grant ``waiter``, already out of ``sem``'s queue, and tell its session."""
        sid, hold = waiter.session_id, waiter.hold
        self.sessions[sid].discard_wait(sem.name, hold, waiter.task)
        owner = self.grant(
            node, sem, sid, waiter.count, waiter.data, waiter.lease_ttl, now, hold, waiter.task
        )
        self.effects.append(
            Granted(
                sid, waiter.request_id, sem.name, owner.token, owner.count, owner.lease_ttl, hold
            )
        )

    def _ready_set(
        self, node: Node, members: tuple[tuple[str, int], ...], now: float
    ) -> list[tuple[Semaphore, Waiter]] | None:
        """The set's members with their semaphores if each heads its queue and fits."""
        ready: list[tuple[Semaphore, Waiter]] = []
        for name, key in members:
            member_sem = node.semaphores[name]
            member = member_sem.head()
            if member is None or member.key != key or not member_sem.fits(key, member.count, now):
                return None
            ready.append((member_sem, member))
        return ready

    @staticmethod
    def _times_its_set(node: Node, sem: Semaphore, waiter: Waiter) -> bool:
        """Whether ``waiter``'s deadline is scheduled: a set's members share one,
        its first member's (one timeout, one message, the same after a restart)."""
        members = node.sets.get(waiter.order) if node.sets else None
        return members is None or members[0] == (sem.name, waiter.key)

    def withdraw_set(
        self,
        node: Node,
        waiter: Waiter,
        code: ErrorCode,
        message: str,
        now: float,
        *,
        missed: bool = False,
    ) -> None:
        """``waiter`` has left its queue: if it was a member of a set, the others leave
        theirs too, each ending with AcquireFailed(``code``, ``message``) (kept for a
        re-attach to read when ``missed``), and their queues are served."""
        members = node.sets.pop(waiter.order, None) if node.sets else None
        if members is None:
            return
        # Every member leaves before any queue is served: served one by one, a queue
        # could grant a member still waiting elsewhere (its set already forgotten).
        left: list[Semaphore] = []
        for name, key in members:
            member_sem = node.semaphores.get(name)
            member = None if member_sem is None else member_sem.waiter(key)
            if member_sem is None or member is None or member.order != waiter.order:
                continue  # (``waiter`` itself, already out of its queue)
            member_sem.remove_waiter(key)
            self.sessions[member.session_id].discard_wait(name, member.hold, member.task)
            failed = AcquireFailed(
                member.session_id, member.request_id, name, code, message, member.hold
            )
            if missed:
                self.tell_missed(failed)
            else:
                self.effects.append(failed)
            left.append(member_sem)
        for member_sem in left:
            self.settle(node, member_sem, now, WAITERS)

    def fire_watches(self, node: Node, name: str, change: Change) -> None:
        """Queue a WatchFired for every watch on ``name`` that ``change`` hits.

        A firing that would list more than ``max_listed_per_firing`` owners and
        waiters carries no description (its watcher describes the semaphore itself):
        this step is another's change, and its listing work is bounded so.
        """
        # One description per shape asked for, shared by every watch that asked for it.
        shapes: dict[tuple[bool, bool], SemaphoreDescription | None] = {}
        sem = node.semaphores.get(name)
        for watch in self.watches.fire(node.name, name, change):
            if not watch.repeat:
                self.sessions[watch.session_id].discard_watch(watch)
            shape = (watch.with_owners, watch.with_waiters)
            if shape in shapes:
                description = shapes[shape]
            else:
                description = shapes[shape] = self._fired_description(name, sem, shape)
            self.effects.append(WatchFired(watch.session_id, watch.watch_id, name, description))

    def _fired_description(
        self, name: str, sem: Semaphore | None, shape: tuple[bool, bool]
    ) -> SemaphoreDescription | None:
        """What a firing of ``shape`` (owners listed, waiters listed) carries: the state,
        or None past ``max_listed_per_firing`` (counted in O(1), before any listing)."""
        if sem is None:
            return SemaphoreDescription.missing(name)
        owners, waiters = shape
        listed = (len(sem.owners) if owners else 0) + (sem.queue_length() if waiters else 0)
        if listed > self.max_listed_per_firing:
            return None
        return sem.describe(owners=owners, waiters=waiters, sessions=self.sessions)

    def tell_missed(self, effect: Missed) -> None:
        """Queue an ending the session did not cause, and keep it for a re-attach to read."""
        self.effects.append(effect)
        session = self.sessions[effect.session_id]
        session.note_missed(effect, self.nodes[session.node].config.max_missed_per_session)

    def start_lock_delay(self, node: Node, sem: Semaphore, now: float) -> None:
        """A holder was lost (not released): nobody may take ``sem`` for the node's lock-delay."""
        delay = node.config.lock_delay
        if delay > 0 and now + delay > sem.blocked_until:
            sem.blocked_until = now + delay
            self.deadlines.schedule(sem.blocked_until, LockDelayDeadline(node.name, sem.name))

    def reschedule_all(self) -> None:
        """Rebuild the deadline heap from the state (after loading or resuming it)."""
        self.deadlines = deadlines = Deadlines()
        for session in self.sessions.values():
            if session.expires_at is not None:
                deadlines.schedule(session.expires_at, SessionDeadline(session.session_id))
        for node in self.nodes.values():
            for name, timer in node.claims.items():
                deadlines.schedule(timer.ends_at, ClaimDeadline(node.name, name, timer.token))
            for sem in node.semaphores.values():
                if not sem.timed():
                    continue
                if sem.blocked_until:
                    deadlines.schedule(sem.blocked_until, LockDelayDeadline(node.name, sem.name))
                if sem.queue_length():
                    for waiter in sem.waiters.values():
                        if waiter.deadline is not None and self._times_its_set(node, sem, waiter):
                            deadlines.schedule(
                                waiter.deadline,
                                WaiterDeadline(node.name, sem.name, waiter.key, waiter.request_id),
                            )
                for owner in sem.each_owner():
                    if owner.lease_deadline is not None:
                        deadlines.schedule(
                            owner.lease_deadline,
                            LeaseDeadline(node.name, sem.name, owner.key, owner.token),
                        )
