"""Model-based test: random command sequences against a small reference model.

The reference model below is written from the rules in the engine's docstrings,
in the plainest form: per semaphore a dict of owners and a FIFO list of waiters;
a flat list of timed things; watches decided by comparing before/after views of
each semaphore. The state machine applies every command to both, and checks after
each step that:

* replies, errors and effects (as multisets) agree; a failed command changes nothing;
* owners (with data and fencing token), in grant order, and the waiter queue, in
  FIFO order, agree;
* no semaphore is over its limit (checked by the engine's own invariants too);
* queued grants come out in queue order, and every new token is greater than all
  earlier ones;
* an expired or closed session is gone from every semaphore;
* every watch fires exactly when its aspect (or the semaphore's existence) changed,
  and at most once; ``next_deadline()`` is the model's earliest timed thing.

Time moves the way a host moves it: before every command, and on ``tick`` rules,
the engine is ticked at each deadline in turn (the model predicts them). Some
``tick`` rules instead tick once, coarsely, past several deadlines: the engine
must then reach the same state and emit the same effects. Deadlines due at the
same instant are taken in the order they were scheduled (the contract of
``tenure._core.deadlines``), so the model numbers each timed thing when it sets it.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from tenure._core import (
    MAX_COUNT,
    Acquire,
    AcquireFailed,
    AcquireStatus,
    AttachSession,
    CancelAcquire,
    CancelWatch,
    CloseSession,
    Command,
    CreateNode,
    CreateSemaphore,
    CreateSession,
    DeleteSemaphore,
    DescribeNode,
    DescribeSemaphore,
    DetachSession,
    Effect,
    Engine,
    GetNodeAnnex,
    Granted,
    LeaseLost,
    NodeConfig,
    Release,
    Renew,
    SessionEnded,
    SetNodeAnnex,
    UpdateSemaphore,
    WatchFired,
)
from tenure._core.invariants import check_invariants
from tenure._core.values import MAX_ANNEX_BYTES
from tenure.errors import (
    AlreadyExistsError,
    ErrorCode,
    LimitExceededError,
    NotFoundError,
    PermissionDeniedError,
    PreconditionFailedError,
    SessionExpiredError,
)

NODES: dict[str, NodeConfig] = {
    # Small limits, so that every LimitExceededError path is reachable.
    "a": NodeConfig(
        recovery_window=3.0,
        max_sessions=4,  # the observer and three more
        max_semaphores=2,
        max_waiters=1,
        max_data_size=4,
        max_watches_per_session=2,
    ),
    # Lock-delay, and leases on every grant unless renewed.
    "b": NodeConfig(recovery_window=2.0, lock_delay=0.75, default_lease=2.5),
}
NAMES = ("x", "y")
X_LIMITS = {"a": 2, "b": 3}  # "x" exists on both nodes from the start
KEY = b"right-key"
EPS = 0.0537  # every step moves time a little, so steps never share a "now"

# -- the reference model ----------------------------------------------------------


@dataclass
class MOwner:
    sid: int
    count: int
    data: bytes
    serial: int  # identifies one grant inside the model
    ttl: float | None
    deadline: float | None
    seq: int
    token: int = 0  # learnt from the engine's reply or Granted effect


@dataclass
class MWaiter:
    sid: int
    rid: int
    count: int
    data: bytes
    deadline: float | None
    ttl: float | None
    seq: int


@dataclass
class MSem:
    name: str
    limit: int
    data: bytes
    ephemeral: bool
    owners: dict[int, MOwner] = field(default_factory=dict)
    queue: list[MWaiter] = field(default_factory=list)
    blocked_until: float = 0.0
    delay_seq: int | None = None  # set while a lock-delay end is pending

    def used(self) -> int:
        return sum(o.count for o in self.owners.values())

    def waiter(self, sid: int) -> MWaiter | None:
        return next((w for w in self.queue if w.sid == sid), None)

    def fits(self, sid: int, count: int, now: float) -> bool:
        if now < self.blocked_until:
            return False
        held = self.owners[sid].count if sid in self.owners else 0
        return self.used() - held + count <= self.limit

    def can_grant_now(self, sid: int, count: int, now: float) -> bool:
        own = self.owners.get(sid)
        if own is not None and count <= own.count:
            return True
        return not self.queue and self.fits(sid, count, now)


@dataclass
class MSession:
    sid: int
    node: str
    timeout: float
    seq_no: int = 1
    expires_at: float | None = None
    expiry_seq: int = 0
    alive: bool = True


@dataclass(frozen=True)
class MWatch:
    wid: int
    sid: int
    node: str
    name: str
    data: bool
    owners: bool
    waiters: bool


View = tuple[bytes, frozenset[tuple[int, int, bytes, int]], tuple[tuple[int, int, int, bytes], ...]]


class Model:
    """The engine's rules, plainly."""

    def __init__(self) -> None:
        self.sems: dict[str, dict[str, MSem]] = {node: {} for node in NODES}
        #: Each node's annex: opaque bytes under a key, which no other rule touches.
        self.annex: dict[str, dict[str, bytes]] = {node: {} for node in NODES}
        self.sessions: dict[int, MSession] = {}
        self.watches: dict[int, MWatch] = {}
        self._seq = itertools.count(1)
        self._serial = itertools.count(1)
        self.expected: list[tuple[Any, ...]] = []
        self.new_grants: list[tuple[tuple[int, int, str] | None, MOwner]] = []

    def next_seq(self) -> int:
        return next(self._seq)

    # -- views and watches ----------------------------------------------------------

    def view(self, node: str, name: str) -> View | None:
        sem = self.sems[node].get(name)
        if sem is None:
            return None
        return (
            sem.data,
            frozenset((o.sid, o.count, o.data, o.serial) for o in sem.owners.values()),
            tuple((w.sid, w.rid, w.count, w.data) for w in sem.queue),
        )

    def event(self, node: str, change: Callable[[], None], ending: int | None = None) -> None:
        """Apply one atomic change and fire the watches whose aspects it changed."""
        before = {name: self.view(node, name) for name in NAMES}
        if ending is not None:  # an ending session's watches are disarmed first
            for wid in [w.wid for w in self.watches.values() if w.sid == ending]:
                del self.watches[wid]
        change()
        for wid in sorted(self.watches):
            watch = self.watches[wid]
            if watch.node != node:
                continue
            old, new = before[watch.name], self.view(node, watch.name)
            if old == new:
                continue
            hit = (
                old is None
                or new is None
                or (watch.data and old[0] != new[0])
                or (watch.owners and old[1] != new[1])
                or (watch.waiters and old[2] != new[2])
            )
            if hit:
                del self.watches[wid]
                self.expected.append(("fired", watch.sid, wid, watch.name))

    # -- shared steps ---------------------------------------------------------------

    def grant(
        self,
        node: str,
        sem: MSem,
        sid: int,
        count: int,
        data: bytes,
        ttl: float | None,
        now: float,
        request: tuple[int, int, str] | None,
    ) -> MOwner:
        ttl = NODES[node].default_lease if ttl is None else ttl
        deadline = None if ttl is None else now + ttl
        seq = self.next_seq() if deadline is not None else 0
        owner = MOwner(sid, count, data, next(self._serial), ttl, deadline, seq)
        sem.owners.pop(sid, None)  # an upgrade is a new grant: to the back of grant order
        sem.owners[sid] = owner
        self.new_grants.append((request, owner))
        return owner

    def settle(self, node: str, sem: MSem, now: float) -> None:
        while sem.queue and sem.fits(sem.queue[0].sid, sem.queue[0].count, now):
            head = sem.queue.pop(0)
            self.grant(
                node, sem, head.sid, head.count, head.data, head.ttl, now,
                (head.sid, head.rid, sem.name),
            )  # fmt: skip
            ttl = sem.owners[head.sid].ttl
            self.expected.append(("granted", head.sid, head.rid, sem.name, head.count, ttl))
        if sem.ephemeral and not sem.owners and not sem.queue and now >= sem.blocked_until:
            del self.sems[node][sem.name]

    def start_lock_delay(self, node: str, sem: MSem, now: float) -> None:
        delay = NODES[node].lock_delay
        if delay > 0 and now + delay > sem.blocked_until:
            sem.blocked_until = now + delay
            sem.delay_seq = self.next_seq()

    def end_session(self, session: MSession, now: float, *, expired: bool) -> None:
        node, sid = session.node, session.sid
        code = ErrorCode.SESSION_EXPIRED if expired else ErrorCode.SESSION_CLOSED
        sems = self.sems[node]

        def change() -> None:
            session.alive = False
            waits = sorted(n for n, s in sems.items() if s.waiter(sid) is not None)
            holds = sorted(n for n, s in sems.items() if sid in s.owners)
            for name in waits:
                waiter = sems[name].waiter(sid)
                assert waiter is not None
                sems[name].queue.remove(waiter)
                self.expected.append(("failed", sid, waiter.rid, name, code))
            for name in holds:
                del sems[name].owners[sid]
                if expired:
                    self.start_lock_delay(node, sems[name], now)
            for name in waits + [h for h in holds if h not in waits]:
                self.settle(node, sems[name], now)

        self.event(node, change, ending=sid)
        if expired:
            self.expected.append(("ended", sid, ErrorCode.SESSION_EXPIRED))

    # -- time -----------------------------------------------------------------------

    def timed(self) -> list[tuple[float, int, str, tuple[Any, ...]]]:
        items: list[tuple[float, int, str, tuple[Any, ...]]] = []
        for s in self.sessions.values():
            if s.alive and s.expires_at is not None:
                items.append((s.expires_at, s.expiry_seq, "session", (s.sid,)))
        for node, sems in self.sems.items():
            for name, sem in sems.items():
                if sem.delay_seq is not None:
                    items.append((sem.blocked_until, sem.delay_seq, "delay", (node, name)))
                for w in sem.queue:
                    if w.deadline is not None:
                        items.append((w.deadline, w.seq, "waiter", (node, name, w.sid)))
                for o in sem.owners.values():
                    if o.deadline is not None:
                        items.append((o.deadline, o.seq, "lease", (node, name, o.sid)))
        return items

    def next_deadline(self) -> float | None:
        return min((item[0] for item in self.timed()), default=None)

    def run_due(self, now: float) -> None:
        """Everything due at ``now`` or earlier, in (time, scheduling) order."""
        while True:
            due = [item for item in self.timed() if item[0] <= now]
            if not due:
                return
            _, _, kind, key = min(due, key=lambda item: (item[0], item[1]))
            self.run_one(kind, key, now)

    def run_one(self, kind: str, key: tuple[Any, ...], now: float) -> None:
        if kind == "session":
            self.end_session(self.sessions[key[0]], now, expired=True)
            return
        node, name = key[0], key[1]
        sem = self.sems[node][name]
        if kind == "delay":

            def delay_ends() -> None:
                sem.delay_seq = None
                self.settle(node, sem, now)

            self.event(node, delay_ends)
        elif kind == "waiter":
            waiter = sem.waiter(key[2])
            assert waiter is not None

            def timeout() -> None:
                sem.queue.remove(waiter)
                code = ErrorCode.TIMEOUT
                self.expected.append(("failed", waiter.sid, waiter.rid, sem.name, code))
                self.settle(node, sem, now)

            self.event(node, timeout)
        else:
            owner = sem.owners[key[2]]

            def expire() -> None:
                del sem.owners[owner.sid]
                code = ErrorCode.LEASE_LOST
                self.expected.append(("lost", owner.sid, sem.name, owner, code))
                self.start_lock_delay(node, sem, now)
                self.settle(node, sem, now)

            self.event(node, expire)


# -- the state machine ------------------------------------------------------------


def effect_key(effect: Effect) -> tuple[Any, ...]:
    if isinstance(effect, Granted):
        return (
            "granted",
            effect.session_id,
            effect.request_id,
            effect.name,
            effect.count,
            effect.lease_ttl,
        )
    if isinstance(effect, AcquireFailed):
        return ("failed", effect.session_id, effect.request_id, effect.name, effect.code)
    if isinstance(effect, LeaseLost):
        return ("lost", effect.session_id, effect.name, effect.token, effect.code)
    if isinstance(effect, WatchFired):
        return ("fired", effect.session_id, effect.watch_id, effect.name)
    assert isinstance(effect, SessionEnded)
    return ("ended", effect.session_id, effect.code)


indexes = st.integers(min_value=0, max_value=1000)
names = st.sampled_from(["x", "x", "y"])
ANNEX_KEYS = ["ydb", "other"]


class EngineMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.engine = Engine()
        self.model = Model()
        self.now = 0.0
        self.max_token = 0
        self.rids = itertools.count(1)
        self.sids: list[int] = []  # sessions the rules act on, dead ones included
        self.observers: dict[str, int] = {}
        self.watch_ids: list[int] = []

    @initialize()
    def create_nodes(self) -> None:
        for node, config in NODES.items():
            self.engine.apply(CreateNode(node, config), self.now)
            sid = self.engine.apply(CreateSession(node, b"observer"), self.now).session_id
            self.observers[node] = sid
            self.model.sessions[sid] = MSession(sid, node, config.recovery_window)
        for node in ("a", "a", "b", "b", "b"):
            self.create_session(node, None)
        # A persistent semaphore to contend for from the first step.
        for node, observer in self.observers.items():
            limit = X_LIMITS[node]
            self.engine.apply(CreateSemaphore(observer, "x", limit), self.now)
            self.model.sems[node]["x"] = MSem("x", limit, b"", ephemeral=False)

    # -- plumbing -------------------------------------------------------------------

    def has_alive(self) -> bool:
        return any(self.model.sessions[sid].alive for sid in self.sids)

    def session(self, index: int) -> MSession:
        """Mostly a live session; now and then a dead one (if any)."""
        alive = [sid for sid in self.sids if self.model.sessions[sid].alive]
        dead = [sid for sid in self.sids if not self.model.sessions[sid].alive]
        # (Time passing at the start of a rule may have just ended the last live one.)
        pool = dead if dead and (index % 11 == 7 or not alive) else alive
        return self.model.sessions[pool[index % len(pool)]]

    def advance(self, delta: float, *, coarse: bool = False) -> None:
        """Move time forward by ``delta``, ticking the engine at every deadline
        (or, if ``coarse``, once at the end: the same state must result)."""
        target = self.now + delta
        if coarse:
            self.engine.tick(target)
            while (due := self.model.next_deadline()) is not None and due <= target:
                self.model.run_due(due)
            self.now = target
            self.check_effects()
            return
        while True:
            due = self.model.next_deadline()
            assert self.engine.next_deadline() == due
            if due is None or due > target:
                break
            self.now = due
            self.engine.tick(due)
            self.model.run_due(due)
            self.check_effects()
            self.compare_state()
        self.now = target

    def check_effects(self, reply_token: int | None = None) -> None:
        """Compare the effects of the last engine call with the model's expectation,
        and learn the tokens of the grants it made."""
        effects = self.engine.take_effects()
        expected, self.model.expected = self.model.expected, []
        grants, self.model.new_grants = self.model.new_grants, []
        # Every new grant's token is greater than every earlier token.
        tokens: dict[tuple[int, int, str], int] = {}
        if reply_token is not None:
            assert reply_token > self.max_token
            self.max_token = reply_token
        for e in effects:
            if isinstance(e, Granted):
                assert e.token > self.max_token
                self.max_token = e.token
                tokens[(e.session_id, e.request_id, e.name)] = e.token
        for request, owner in grants:
            if request is None:
                assert reply_token is not None
                owner.token = reply_token
            else:
                owner.token = tokens.get(request, 0)  # 0: missing, caught just below
        # A LeaseLost names the token of the grant that ended, which may have been
        # made within the same engine call (a coarse tick): resolve it only now.
        wanted = [
            tuple(part.token if isinstance(part, MOwner) else part for part in item)
            for item in expected
        ]
        assert Counter(effect_key(e) for e in effects) == Counter(wanted)
        # Queued grants are served in FIFO order, per semaphore.
        node_of = {sid: s.node for sid, s in self.model.sessions.items()}
        got = [(node_of[e.session_id], e.name, e.session_id, e.request_id) for e in effects
               if isinstance(e, Granted)]  # fmt: skip
        want = [(node_of[k[0]], k[2], k[0], k[1]) for k, _ in grants if k is not None]
        for sem_key in {(n, name) for n, name, _, _ in want}:
            assert [g for g in got if g[:2] == sem_key] == [w for w in want if w[:2] == sem_key]

    def expect_error(self, error: type[BaseException], command: Command[Any]) -> None:
        with pytest.raises(error):
            self.engine.apply(command, self.now)
        assert self.engine.take_effects() == []
        assert self.model.expected == []
        assert self.model.new_grants == []

    def compare_state(self) -> None:
        check_invariants(self.engine)
        for node, observer in self.observers.items():
            sems = self.model.sems[node]
            desc = self.engine.apply(DescribeNode(node), self.now)
            alive = [s for s in self.model.sessions.values() if s.alive and s.node == node]
            assert (desc.sessions, desc.semaphores) == (len(alive), len(sems))
            for name in NAMES:
                sem = sems.get(name)
                command = DescribeSemaphore(observer, name, owners=True, waiters=True)
                if sem is None:
                    with pytest.raises(NotFoundError):
                        self.engine.apply(command, self.now)
                    continue
                got = self.engine.apply(command, self.now).description
                assert (got.limit, got.count, got.data, got.ephemeral) == (
                    sem.limit,
                    sem.used(),
                    sem.data,
                    sem.ephemeral,
                )
                assert got.count <= got.limit
                # Owners in grant order (which is token order), waiters in FIFO order.
                assert [(o.session_id, o.count, o.data, o.token) for o in got.owners] == [
                    (o.sid, o.count, o.data, o.token) for o in sem.owners.values()
                ]
                assert [o.token for o in got.owners] == sorted(o.token for o in got.owners)
                assert [(w.session_id, w.count, w.data) for w in got.waiters] == [
                    (w.sid, w.count, w.data) for w in sem.queue
                ]
                for o in sem.owners.values():
                    assert self.model.sessions[o.sid].alive
                for w in sem.queue:
                    assert self.model.sessions[w.sid].alive
        for node, annex in self.model.annex.items():
            for key in ANNEX_KEYS:
                assert self.engine.apply(GetNodeAnnex(node, key), self.now) == annex.get(key, b"")
        assert self.engine.next_deadline() == self.model.next_deadline()

    @invariant()
    def engine_matches_model(self) -> None:
        self.compare_state()

    # -- sessions -------------------------------------------------------------------

    @precondition(lambda self: sum(self.model.sessions[sid].alive for sid in self.sids) < 6)
    @rule(node=st.sampled_from(sorted(NODES)), timeout=st.sampled_from([None, 1.5]))
    def create_session(self, node: str, timeout: float | None) -> None:
        self.advance(EPS)
        config = NODES[node]
        command = CreateSession(node, KEY, timeout=timeout)
        alive = [s for s in self.model.sessions.values() if s.alive and s.node == node]
        if len(alive) >= config.max_sessions:
            self.expect_error(LimitExceededError, command)
            return
        info = self.engine.apply(command, self.now)
        expected_timeout = config.recovery_window if timeout is None else timeout
        assert (info.timeout, info.seq_no) == (expected_timeout, 1)
        assert info.session_id not in self.model.sessions
        self.model.sessions[info.session_id] = MSession(info.session_id, node, expected_timeout)
        self.sids.append(info.session_id)
        self.check_effects()

    @precondition(lambda self: self.has_alive())
    @rule(index=indexes, silence=st.sampled_from([0.0, 0.0, 0.0, 0.5, 1.0, 3.0]))
    def detach(self, index: int, silence: float) -> None:
        self.advance(EPS)
        session = self.session(index)
        silent_for = silence * session.timeout  # of its window, last heard that long ago
        command = DetachSession(session.sid, silent_for)
        if not session.alive:
            self.expect_error(SessionExpiredError, command)
            return
        assert self.engine.apply(command, self.now) is None
        expires_at = self.now + (session.timeout - min(silent_for, session.timeout))
        if session.expires_at is None or expires_at < session.expires_at:
            if expires_at <= self.now:
                self.model.end_session(session, self.now, expired=True)
            else:
                session.expires_at = expires_at
                session.expiry_seq = self.model.next_seq()
        self.check_effects()

    @precondition(lambda self: self.has_alive())
    @rule(
        index=indexes,
        right_key=st.sampled_from([True, True, False]),
        step=st.sampled_from([-1, 0, 1, 3]),
    )
    def attach(self, index: int, right_key: bool, step: int) -> None:
        self.advance(EPS)
        session = self.session(index)
        command = AttachSession(session.sid, KEY if right_key else b"wrong", session.seq_no + step)
        if not session.alive:
            self.expect_error(SessionExpiredError, command)
        elif not right_key:
            self.expect_error(PermissionDeniedError, command)
        elif step <= 0:
            self.expect_error(PreconditionFailedError, command)
        else:
            info = self.engine.apply(command, self.now)
            session.seq_no += step
            session.expires_at = None
            assert (info.session_id, info.seq_no) == (session.sid, session.seq_no)
            self.check_effects()

    @precondition(lambda self: self.has_alive())
    @rule(index=indexes)
    def close(self, index: int) -> None:
        self.advance(EPS)
        session = self.session(index)
        command = CloseSession(session.sid)
        if not session.alive:
            self.expect_error(SessionExpiredError, command)
            return
        assert self.engine.apply(command, self.now) is None
        self.model.end_session(session, self.now, expired=False)
        self.check_effects()

    # -- semaphores -----------------------------------------------------------------

    @precondition(lambda self: self.has_alive())
    @rule(
        index=indexes,
        name=names,
        limit=st.integers(min_value=1, max_value=3),
        data=st.sampled_from([b"", b"v1", b"12345"]),
    )
    def create_semaphore(self, index: int, name: str, limit: int, data: bytes) -> None:
        self.advance(EPS)
        session = self.session(index)
        command = CreateSemaphore(session.sid, name, limit, data)
        node = session.node
        sems = self.model.sems[node]
        if not session.alive:
            self.expect_error(SessionExpiredError, command)
        elif len(data) > NODES[node].max_data_size:
            self.expect_error(LimitExceededError, command)
        elif name in sems:
            self.expect_error(AlreadyExistsError, command)
        elif len(sems) >= NODES[node].max_semaphores:
            self.expect_error(LimitExceededError, command)
        else:
            assert self.engine.apply(command, self.now) is None

            def create() -> None:
                sems[name] = MSem(name, limit, data, ephemeral=False)

            self.model.event(node, create)
            self.check_effects()

    @precondition(lambda self: self.has_alive())
    @rule(
        index=indexes,
        name=names,
        count=st.sampled_from([1, 1, 2, 3, MAX_COUNT]),
        timeout=st.sampled_from([0, None, 0.5, 2.0]),
        ephemeral=st.booleans(),
        lease_ttl=st.sampled_from([None, None, 1.25]),
        data=st.sampled_from([b"", b"o", b"12345"]),
    )
    def acquire(
        self,
        index: int,
        name: str,
        count: int,
        timeout: float | None,
        ephemeral: bool,
        lease_ttl: float | None,
        data: bytes,
    ) -> None:
        self.do_acquire(index, name, count, timeout, ephemeral, lease_ttl, data)

    @precondition(lambda self: self.has_alive())
    @rule(
        index=indexes,
        name=names,
        count=st.sampled_from([1, 2, MAX_COUNT]),
        timeout=st.sampled_from([None, 2.0]),
        data=st.sampled_from([b"", b"o"]),
    )
    def acquire_and_wait(
        self, index: int, name: str, count: int, timeout: float | None, data: bytes
    ) -> None:
        """Like acquire, but ready to wait, on an ephemeral semaphore if missing."""
        self.do_acquire(index, name, count, timeout, True, None, data)

    def not_waiting_for_x(self, node: str | None = None) -> list[int]:
        """Live sessions (of ``node``) that are not queued for "x" in their node."""
        found = []
        for sid in self.sids:
            session = self.model.sessions[sid]
            x = self.model.sems[session.node].get("x")
            mine = node is None or session.node == node
            if mine and session.alive and x is not None and x.waiter(sid) is None:
                found.append(sid)
        return found

    @precondition(lambda self: self.has_alive())
    @rule(
        index=indexes,
        count=st.sampled_from([1, 2, 3]),
        timeout=st.sampled_from([0, None, 2.0, 0.5]),
        lease_ttl=st.sampled_from([None, 1.25]),
    )
    def acquire_x(
        self, index: int, count: int, timeout: float | None, lease_ttl: float | None
    ) -> None:
        """Contend for the persistent semaphore every node starts with (sessions that
        wait for it already are left alone, so queues grow instead of churning)."""
        free = self.not_waiting_for_x()
        if not free:
            self.tick_by(EPS)
            return
        sid = free[index % len(free)]
        self.do_acquire(index, "x", count, timeout, False, lease_ttl, b"", sid=sid)

    @precondition(lambda self: self.has_alive())
    @rule(
        node=st.sampled_from(sorted(NODES)),
        counts=st.lists(st.sampled_from([1, 2, 3]), min_size=2, max_size=4),
        timeout=st.sampled_from([None, 0, 2.0]),
    )
    def contend(self, node: str, counts: list[int], timeout: float | None) -> None:
        """Several sessions of one node ask for "x" one after the other: the shape
        where barging, or serving anyone but the head, would show."""
        for count in counts:
            free = self.not_waiting_for_x(node)
            if not free:
                break
            self.do_acquire(0, "x", count, timeout, False, None, b"", sid=free[0])

    @precondition(lambda self: self.has_alive())
    @rule(index=indexes, count=st.sampled_from([1, 2]), timeout=st.sampled_from([None, 2.0]))
    def acquire_x_and_wait(self, index: int, count: int, timeout: float | None) -> None:
        self.acquire_x(index, count, timeout, None)

    def do_acquire(
        self,
        index: int,
        name: str,
        count: int,
        timeout: float | None,
        ephemeral: bool,
        lease_ttl: float | None,
        data: bytes,
        sid: int | None = None,
    ) -> None:
        self.advance(EPS)
        session = self.session(index) if sid is None else self.model.sessions[sid]
        sid, node, now = session.sid, session.node, self.now
        rid = next(self.rids)
        command = Acquire(sid, name, count, rid, data, timeout, ephemeral, lease_ttl)
        config = NODES[node]
        sems = self.model.sems[node]
        sem = sems.get(name)
        if not session.alive:
            self.expect_error(SessionExpiredError, command)
            return
        if len(data) > config.max_data_size:
            self.expect_error(LimitExceededError, command)
            return
        if sem is None and not ephemeral:
            self.expect_error(NotFoundError, command)
            return
        if sem is None and len(sems) >= config.max_semaphores:
            self.expect_error(LimitExceededError, command)
            return
        if sem is not None and count > sem.limit:
            self.expect_error(LimitExceededError, command)
            return
        if (
            sem is not None
            and timeout != 0
            and sem.waiter(sid) is None
            and not sem.can_grant_now(sid, count, now)
            and len(sem.queue) >= config.max_waiters
        ):
            self.expect_error(LimitExceededError, command)
            return

        outcome: dict[str, Any] = {}

        def change() -> None:
            target = sems.get(name)
            if target is None:
                target = sems[name] = MSem(name, MAX_COUNT, b"", ephemeral=True)
            old = target.waiter(sid)
            if old is not None:
                target.queue.remove(old)
                code = ErrorCode.CANCELLED
                self.model.expected.append(("failed", sid, old.rid, name, code))
            own = target.owners.get(sid)
            if target.can_grant_now(sid, count, now):
                if own is not None and count <= own.count:
                    own.count, own.data = count, data
                    outcome.update(status=AcquireStatus.GRANTED, owner=own, in_place=True)
                else:
                    new = self.model.grant(node, target, sid, count, data, lease_ttl, now, None)
                    outcome.update(status=AcquireStatus.GRANTED, owner=new, in_place=False)
            elif timeout == 0:
                outcome.update(status=AcquireStatus.BUSY)
            else:
                deadline = None if timeout is None else now + timeout
                seq = self.model.next_seq() if deadline is not None else 0
                target.queue.append(MWaiter(sid, rid, count, data, deadline, lease_ttl, seq))
                outcome.update(status=AcquireStatus.QUEUED)
            self.model.settle(node, target, now)

        self.model.event(node, change)
        result = self.engine.apply(command, now)
        assert result.status is outcome["status"]
        if result.status is AcquireStatus.GRANTED:
            owner: MOwner = outcome["owner"]
            assert (result.count, result.lease_ttl) == (count, owner.ttl)
            if outcome["in_place"]:
                assert result.token == owner.token
                self.check_effects()
            else:
                assert result.token is not None
                self.check_effects(reply_token=result.token)
        else:
            assert (result.token, result.count, result.lease_ttl) == (None, 0, None)
            self.check_effects()

    @precondition(lambda self: self.has_alive())
    @rule(index=indexes, name=names)
    def release(self, index: int, name: str, sid: int | None = None) -> None:
        self.advance(EPS)
        session = self.session(index) if sid is None else self.model.sessions[sid]
        sid, node, now = session.sid, session.node, self.now
        command = Release(sid, name)
        if not session.alive:
            self.expect_error(SessionExpiredError, command)
            return
        sem = self.model.sems[node].get(name)
        expected = sem is not None and (sid in sem.owners or sem.waiter(sid) is not None)
        if sem is not None:

            def change(sem: MSem = sem) -> None:
                waiter = sem.waiter(sid)
                if waiter is not None:
                    sem.queue.remove(waiter)
                    code = ErrorCode.CANCELLED
                    self.model.expected.append(("failed", sid, waiter.rid, name, code))
                sem.owners.pop(sid, None)
                self.model.settle(node, sem, now)

            self.model.event(node, change)
        assert self.engine.apply(command, now) is expected
        self.check_effects()

    def involved(self) -> list[tuple[int, str]]:
        """(session, semaphore) pairs where the session holds or waits."""
        return sorted(
            (sid, name)
            for sems in self.model.sems.values()
            for name, sem in sems.items()
            for sid in [*sem.owners, *(w.sid for w in sem.queue)]
        )

    @precondition(lambda self: self.involved())
    @rule(which=indexes)
    def release_involved(self, which: int) -> None:
        """Release where there is something to release (the other rule mostly misses)."""
        pairs = self.involved()
        sid, name = pairs[which % len(pairs)]
        self.release(self.sids.index(sid) if sid in self.sids else 0, name, sid=sid)

    @precondition(lambda self: self.has_alive())
    @rule(index=indexes, name=names, exact=st.booleans())
    def cancel_acquire(self, index: int, name: str, exact: bool) -> None:
        self.advance(EPS)
        session = self.session(index)
        sid, node, now = session.sid, session.node, self.now
        sem = self.model.sems[node].get(name)
        waiter = None if sem is None else sem.waiter(sid)
        rid = waiter.rid if waiter is not None and exact else 10**9
        command = CancelAcquire(sid, name, rid)
        if not session.alive:
            self.expect_error(SessionExpiredError, command)
            return
        hit = sem is not None and waiter is not None and exact
        if sem is not None and waiter is not None and exact:

            def change(sem: MSem = sem, waiter: MWaiter = waiter) -> None:
                sem.queue.remove(waiter)
                code = ErrorCode.CANCELLED
                self.model.expected.append(("failed", sid, waiter.rid, name, code))
                self.model.settle(node, sem, now)

            self.model.event(node, change)
        assert self.engine.apply(command, now) is hit
        self.check_effects()

    @precondition(lambda self: self.has_alive())
    @rule(index=indexes, name=names, ttl=st.sampled_from([None, 1.25]))
    def renew(self, index: int, name: str, ttl: float | None) -> None:
        self.advance(EPS)
        session = self.session(index)
        command = Renew(session.sid, name, ttl)
        sem = self.model.sems[session.node].get(name)
        owner = None if sem is None else sem.owners.get(session.sid)
        if not session.alive:
            self.expect_error(SessionExpiredError, command)
        elif owner is None:
            self.expect_error(NotFoundError, command)
        elif owner.ttl is None:  # with or without a new TTL: nothing to renew
            self.expect_error(PreconditionFailedError, command)
        else:
            new_ttl = owner.ttl if ttl is None else ttl
            assert self.engine.apply(command, self.now) == new_ttl
            owner.ttl, owner.deadline = new_ttl, self.now + new_ttl
            owner.seq = self.model.next_seq()
            self.check_effects()

    @precondition(lambda self: self.has_alive())
    @rule(index=indexes, name=names, data=st.sampled_from([b"", b"v1", b"v2", b"12345"]))
    def update(self, index: int, name: str, data: bytes) -> None:
        self.advance(EPS)
        session = self.session(index)
        node = session.node
        command = UpdateSemaphore(session.sid, name, data)
        sem = self.model.sems[node].get(name)
        if not session.alive:
            self.expect_error(SessionExpiredError, command)
        elif sem is None:
            self.expect_error(NotFoundError, command)
        elif len(data) > NODES[node].max_data_size:
            self.expect_error(LimitExceededError, command)
        else:

            def change(sem: MSem = sem) -> None:
                sem.data = data

            self.model.event(node, change)
            assert self.engine.apply(command, self.now) is None
            self.check_effects()

    @precondition(lambda self: self.has_alive())
    @rule(index=indexes, name=names, force=st.booleans())
    def delete(self, index: int, name: str, force: bool) -> None:
        self.advance(EPS)
        session = self.session(index)
        node = session.node
        command = DeleteSemaphore(session.sid, name, force)
        sems = self.model.sems[node]
        sem = sems.get(name)
        if not session.alive:
            self.expect_error(SessionExpiredError, command)
        elif sem is None:
            self.expect_error(NotFoundError, command)
        elif (sem.owners or sem.queue) and not force:
            self.expect_error(PreconditionFailedError, command)
        else:

            def change(sem: MSem = sem) -> None:
                for w in sem.queue:
                    self.model.expected.append(("failed", w.sid, w.rid, name, ErrorCode.NOT_FOUND))
                for o in sem.owners.values():
                    code = ErrorCode.LEASE_LOST
                    self.model.expected.append(("lost", o.sid, name, o.token, code))
                del sems[name]

            self.model.event(node, change)
            assert self.engine.apply(command, self.now) is None
            self.check_effects()

    # -- watches --------------------------------------------------------------------

    @precondition(lambda self: self.has_alive())
    @rule(
        index=indexes,
        name=names,
        data=st.booleans(),
        owners=st.booleans(),
        waiters=st.booleans(),
    )
    def describe(self, index: int, name: str, data: bool, owners: bool, waiters: bool) -> None:
        self.advance(EPS)
        session = self.session(index)
        node, sid = session.node, session.sid
        command = DescribeSemaphore(
            sid, name, owners=True, waiters=True,
            watch_data=data, watch_owners=owners, watch_waiters=waiters,
        )  # fmt: skip
        watching = data or owners or waiters
        sem = self.model.sems[node].get(name)
        armed = [w for w in self.model.watches.values() if w.sid == sid]
        if not session.alive:
            self.expect_error(SessionExpiredError, command)
            return
        if sem is None and not watching:
            self.expect_error(NotFoundError, command)
            return
        if watching and len(armed) >= NODES[node].max_watches_per_session:
            self.expect_error(LimitExceededError, command)
            return
        result = self.engine.apply(command, self.now)
        desc = result.description
        if sem is None:
            assert (desc.exists, desc.limit, desc.count, desc.owners) == (False, 0, 0, ())
        else:
            assert desc.exists
            assert [(w.session_id, w.count) for w in desc.waiters] == [
                (w.sid, w.count) for w in sem.queue
            ]
        if watching:
            assert result.watch_id is not None
            assert result.watch_id not in self.watch_ids
            self.watch_ids.append(result.watch_id)
            self.model.watches[result.watch_id] = MWatch(
                result.watch_id, sid, node, name, data, owners, waiters
            )
        else:
            assert result.watch_id is None
        self.check_effects()

    @precondition(lambda self: self.model.watches)
    @rule(which=indexes)
    def cancel_armed_watch(self, which: int) -> None:
        """The owner of an armed watch cancels it."""
        self.advance(EPS)
        armed = sorted(self.model.watches)
        if armed:
            wid = armed[which % len(armed)]
            self.cancel_watch_as(self.model.sessions[self.model.watches[wid].sid], wid)

    @precondition(lambda self: self.has_alive() and self.watch_ids)
    @rule(index=indexes, which=indexes)
    def cancel_watch(self, index: int, which: int) -> None:
        """Any session cancels any watch id (mostly: not armed, or not its own)."""
        self.advance(EPS)
        self.cancel_watch_as(self.session(index), self.watch_ids[which % len(self.watch_ids)])

    def cancel_watch_as(self, session: MSession, wid: int) -> None:
        command = CancelWatch(session.sid, wid)
        if not session.alive:
            self.expect_error(SessionExpiredError, command)
            return
        watch = self.model.watches.get(wid)
        armed = watch is not None and watch.sid == session.sid
        assert self.engine.apply(command, self.now) is armed
        if armed:
            del self.model.watches[wid]
        self.check_effects()

    # -- the node annex -------------------------------------------------------------

    @rule(
        node=st.sampled_from(sorted(NODES)),
        key=st.sampled_from(ANNEX_KEYS),
        value=st.sampled_from([b"", b"s", b"\x00" * MAX_ANNEX_BYTES, b"x" * (MAX_ANNEX_BYTES + 1)]),
    )
    def set_annex(self, node: str, key: str, value: bytes) -> None:
        self.advance(EPS)
        command = SetNodeAnnex(node, key, value)
        if len(value) > MAX_ANNEX_BYTES:
            self.expect_error(LimitExceededError, command)
            return
        assert self.engine.apply(command, self.now) is None
        assert self.engine.take_effects() == []  # the annex is nobody else's business
        if value:
            self.model.annex[node][key] = value
        else:
            self.model.annex[node].pop(key, None)

    # -- time -----------------------------------------------------------------------

    @rule(delta=st.sampled_from([0.3, 1.0, 2.2, 4.5]), coarse=st.booleans())
    def tick(self, delta: float, coarse: bool) -> None:
        self.tick_by(delta, coarse=coarse)

    @rule(delta=st.sampled_from([0.4, 0.9]))
    def tick_a_little(self, delta: float) -> None:
        self.tick_by(delta)

    def tick_by(self, delta: float, *, coarse: bool = False) -> None:
        self.advance(delta, coarse=coarse)
        self.engine.tick(self.now)  # nothing is due: a no-op
        assert self.engine.take_effects() == []


EngineMachine.TestCase.settings = settings(
    max_examples=200,
    stateful_step_count=40,
    deadline=None,
    derandomize=True,
    database=None,
)
TestEngineModel = EngineMachine.TestCase
