"""The engine's state: what it keeps, its lookups and its quota checks. [compiled]

:class:`EngineState` holds nodes (:class:`~tenure._core.node.Node`), sessions, the
fencing counter, deadlines, watches and queued effects. The command handlers
(:mod:`tenure._core.handlers`) are functions of an ``EngineState``: what they read
and check of it, and what keeping a node or a session counts against its owner,
are its methods here; the steps they share (grants, queues served, watches fired)
are functions of it in :mod:`tenure._core.shared_steps`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from typing import Final

from tenure._core.deadlines import (
    ClaimDeadline,
    Deadlines,
    LeaseDeadline,
    LockDelayDeadline,
    SessionDeadline,
    WaiterDeadline,
)
from tenure._core.effects import Effect
from tenure._core.limits import WHY_LOOK_LIMIT
from tenure._core.name_stats import NameStats
from tenure._core.node import Node
from tenure._core.quotas import (
    Q_DATA_BYTES,
    Q_MISSED_BYTES,
    Q_NODES,
    Q_SESSIONS,
    Q_WAITERS,
    QuotaLedger,
    Usage,
)
from tenure._core.semaphore import Owner, Semaphore, Waiter
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
    ClientIdentity,
    check_name,
)
from tenure._core.watches import Watches
from tenure.errors import ErrorCode, LimitExceededError, NotFoundError, SessionExpiredError

#: What one kept broken deadlock costs the server's memory besides its text's bytes:
#: the record and its numbers, a share of its node's deque (about 250 measured with
#: ``sys.getsizeof``; rounded up, as :data:`~tenure._core.quotas.OBJECT_BYTES` are).
BROKEN_DEADLOCK_BYTES: Final = 300
_TIMEOUT: Final = int(ErrorCode.TIMEOUT)


def kept_deadlock_bytes(broken: BrokenDeadlock) -> int:
    """What keeping ``broken`` costs in the memory budget's estimate."""
    return BROKEN_DEADLOCK_BYTES + len(broken.cycle.encode())


class EngineState:
    """The engine's state, its lookups and quota checks, and what keeping each node,
    session and refused deadlock counts (the steps handlers share are functions of
    it: :mod:`tenure._core.shared_steps`).

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
        #: How many holds, waits and queue places one WhyName may look at (the host's:
        #: :data:`~tenure._core.limits.WHY_LOOK_LIMIT` by default).
        self.why_look_limit = WHY_LOOK_LIMIT
        #: How many prefix watches one node may have armed (whoever armed them): the
        #: host's, like ``max_nodes`` (watches are not logged: no replay arms one).
        self.max_prefix_watches_per_node = MAX_PREFIX_WATCHES_PER_NODE
        #: How many watches one quota owner may have armed on one semaphore name (each
        #: fires on a change of it, in the changer's step): the host's, like
        #: ``max_prefix_watches_per_node``.
        self.max_watches_per_semaphore = MAX_WATCHES_PER_SEMAPHORE
        #: The most owners and waiters a watch firing lists (a bigger listing is left to
        #: the watcher's own describe: :func:`~tenure._core.shared_steps.fire_watches`):
        #: the host's, like ``max_watches_per_semaphore``.
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
        #: The sessions of each client process (identities with a process id; rebuilt
        #: with the sessions, by :meth:`index_client`): the sessions through which one
        #: task of a client may hold on one node and wait on another
        #: (:mod:`tenure._core.blocking`). One session's id alone, the usual case (a
        #: table costs two hundred bytes; a fleet of processes, a session each, would be
        #: a table each), else the ids of two or more as the keys of a dict, in the
        #: order the sessions were made (ascending), so that a reader takes the first
        #: few without sorting them all: :meth:`sessions_of`.
        self.client_sessions: dict[ClientIdentity, int | dict[int, None]] = {}
        self.last_token = 0  # rule 3: the fencing counter
        self.last_session_id = 0
        self.last_watch_id = 0
        self.last_order = 0  # the arrival number of the latest queued request
        #: The nodes frozen for a move between cells (:mod:`tenure._core.node_moves`):
        #: each node's name, the other cell's, and the time it froze. A frozen node
        #: takes no command and none of its deadlines comes due (:mod:`tenure._core.moving`).
        self.moving: dict[str, tuple[str, float]] = {}
        self.now = 0.0  # the latest time the engine was given
        self.deadlines = Deadlines()
        self.watches = Watches()
        #: What each owner holds, their quotas and the memory budget (tenure._core.quotas).
        self.ledger = QuotaLedger()
        #: The statistics per name (:mod:`tenure._core.name_stats`): not state (no
        #: snapshot keeps them); its capacity and share are the host's. Its entries
        #: count in the ledger's estimate.
        self.name_stats = NameStats(self.ledger)
        #: Who sends the command being applied: its token's name, set by the host
        #: (never by a client) and logged with the commands that make what it owns
        #: (CreateSession, CreateNode); "" (nobody): no quotas apply.
        self.actor = ""
        #: Whether the session command being applied presents its protection key as
        #: its digest (:func:`~tenure._core.session.digest_key`): set only by a
        #: journal's replay, around a record that logged the digest instead of the
        #: key; a client's command always presents the key itself.
        self.keys_digested = False
        #: Effects queued since the host last took them, in the order they happened.
        self.effects: list[Effect] = []

    def add_node(self, node: Node) -> None:
        """Keep ``node`` (a new name), and its name in the index."""
        self.nodes[node.name] = node
        self.node_index.add(node.name)
        if node.usage is not None and node.usage.live:
            node.usage.add(Q_NODES, 1)
            node.usage.add(Q_DATA_BYTES, node.counted_bytes())

    def drop_node(self, name: str) -> None:
        """Forget the node ``name`` (it is there, with no session and no semaphore
        left), and its name in the index."""
        node = self.nodes.pop(name)
        self.node_index.discard(name)
        if node.usage is not None and node.usage.live:
            node.usage.add(Q_NODES, -1)
            node.usage.add(Q_DATA_BYTES, -node.counted_bytes())

    def add_session(self, session: Session, node: Node) -> None:
        """Keep the new ``session`` of ``node``; it counts against its owner (its
        ``usage``) with its description's, identity's and key's bytes from now on."""
        self.sessions[session.session_id] = session
        self.index_client(session)
        node.add_session(session.session_id)
        usage = session.usage
        if usage is not None and usage.live:
            usage.add(Q_SESSIONS, 1)
            usage.add(Q_DATA_BYTES, session.counted_bytes())

    def index_client(self, session: Session) -> None:
        """Count ``session`` among its client's (:attr:`client_sessions`), if its
        identity names a process."""
        identity = session.identity
        if identity.pid:
            sid = session.session_id
            same = self.client_sessions.get(identity)
            if same is None:
                self.client_sessions[identity] = sid
            elif isinstance(same, int):
                self.client_sessions[identity] = {same: None, sid: None}
            else:
                same[sid] = None

    def sessions_of(self, identity: ClientIdentity) -> Iterable[int]:
        """The ids of the sessions of the client ``identity`` (none for one without a
        process id), in the order they were made: read lazily (a process may have
        thousands; a reader stops at its bound), not while sessions come and go."""
        same = self.client_sessions.get(identity) if identity.pid else None
        if same is None:
            return ()
        return (same,) if isinstance(same, int) else same.keys()

    def forget_session(self, session: Session, node: Node) -> None:
        """Forget ``session`` of ``node``, and what it counted against its owner: itself,
        its description, identity and key, its watches (disarmed here), its waits
        (taken out of their queues by the caller) and the endings it kept."""
        sid = session.session_id
        del self.sessions[sid]
        identity = session.identity
        if identity.pid:
            same = self.client_sessions[identity]
            if isinstance(same, int):
                del self.client_sessions[identity]
            else:
                del same[sid]
                if len(same) == 1:
                    self.client_sessions[identity] = next(iter(same))
        node.drop_session(sid)
        self.disarm_watches(session)
        usage = session.usage
        if usage is not None and usage.live:
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

    # -- rebuilt after loading -------------------------------------------------------

    def rebuild_indexes(self) -> None:
        """Sort every index afresh from the dicts (after a snapshot filled them)."""
        self.node_index = SortedKeys(self.nodes)
        for node in self.nodes.values():
            node.rebuild_indexes()

    def wait_ended(self, node: Node, name: str, waiter: Waiter, code: int, now: float) -> None:
        """``waiter`` of ``name`` left its queue without a grant, ended with ``code``
        (an ErrorCode: TIMEOUT counts as a timeout, any other as cancelled)."""
        self.name_stats.wait_failed(
            node.name, name, max(0.0, now - waiter.since), code == _TIMEOUT, now
        )

    def hold_ended(self, node: Node, name: str, owner: Owner, lost: bool, now: float) -> None:
        """``owner``'s hold of ``name`` ended: released (or handed off), or ``lost``."""
        self.name_stats.hold_ended(node.name, name, max(0.0, now - owner.since), lost, now)

    @staticmethod
    def _times_its_set(node: Node, sem: Semaphore, waiter: Waiter) -> bool:
        """Whether ``waiter``'s deadline is scheduled: a set's members share one,
        its first member's (one timeout, one message, the same after a restart)."""
        members = node.sets.get(waiter.order) if node.sets else None
        return members is None or members[0] == (sem.name, waiter.key)

    def reschedule_all(self) -> None:
        """Rebuild the deadline heap from the state (after loading or resuming it)."""
        self.deadlines = deadlines = Deadlines()
        for session in self.sessions.values():
            if session.expires_at is not None:
                deadlines.schedule(session.expires_at, SessionDeadline(session.session_id))
        for node in self.nodes.values():
            self.schedule_node(deadlines, node)

    def schedule_node(self, deadlines: Deadlines, node: Node) -> None:
        """Put every deadline of ``node``'s claims, lock-delays, waiters and holders in
        ``deadlines`` (its sessions' are theirs: :meth:`reschedule_all`)."""
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
