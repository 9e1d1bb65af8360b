"""The coordination engine: nodes, sessions, semaphores, fencing tokens and watches.

Theory of operation
-------------------
The engine is a deterministic state machine. The host feeds it commands
(``apply(command, now)``) and the passage of time (``tick(now)``); it answers each
command with a reply or a :mod:`tenure.errors` exception, and queues *effects* for
everybody else (``take_effects()``). It never reads a clock, sleeps, or does I/O,
so the same inputs always give the same state: that is what makes it testable
without sleeping and replayable from a log.

Rules (each enforced in exactly one place below):

1. A command either fails with no change of state, or succeeds.
2. A grant never takes a semaphore beyond its limit, and waiters are served FIFO
   (see :mod:`tenure._core.semaphore`).
3. Every grant gets a fencing token greater than every earlier token of this
   engine (one counter for all nodes, so a dropped and re-created node cannot
   reuse old tokens either). The counter is state: persist it with the rest.
4. An attached session never expires. A detached one expires ``timeout`` seconds
   after it was detached unless it is re-attached first; expiry releases all it
   holds (starting lock-delay) and cancels all it waits for.
5. After any change to a semaphore, ``_settle`` serves its queue, removes it if it
   is ephemeral and idle, and fires the watches the change hit, in that order.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from tenure._core import commands as c
from tenure._core.deadlines import Deadlines, Key, Kind
from tenure._core.effects import AcquireFailed, Effect, Granted, LeaseLost, SessionEnded, WatchFired
from tenure._core.semaphore import Owner, Semaphore, Waiter
from tenure._core.values import (
    MAX_COUNT,
    MAX_DESCRIPTION_BYTES,
    MAX_SESSION_TIMEOUT,
    NodeConfig,
    NodeDescription,
    SemaphoreDescription,
    check_count,
    check_data,
    check_duration,
    check_name,
    check_timeout,
)
from tenure._core.watches import Change, Watch, Watches
from tenure.errors import (
    AlreadyExistsError,
    ErrorCode,
    InvalidArgumentError,
    LimitExceededError,
    NotFoundError,
    PermissionDeniedError,
    PreconditionFailedError,
    SessionExpiredError,
)

R = TypeVar("R")

#: Longest protection key a session may use, in bytes.
MAX_PROTECTION_KEY_BYTES = 256


@dataclass(slots=True)
class Session:
    """A session's state. ``expires_at`` is None while attached."""

    session_id: int
    node: str
    timeout: float
    description: str
    protection_key: bytes
    seq_no: int
    expires_at: float | None = None
    holds: set[str] = field(default_factory=set)  # semaphores it owns tokens of
    waits: set[str] = field(default_factory=set)  # semaphores it has a waiter in
    watches: set[int] = field(default_factory=set)  # armed watch ids


@dataclass(slots=True)
class Node:
    """A named namespace of semaphores and sessions."""

    name: str
    config: NodeConfig
    semaphores: dict[str, Semaphore] = field(default_factory=dict)
    sessions: set[int] = field(default_factory=set)


class Engine:
    """The sans-I/O coordination engine. See the module docstring for its rules."""

    def __init__(self, *, max_nodes: int = 10_000) -> None:
        self.max_nodes = max_nodes
        self.nodes: dict[str, Node] = {}
        self.sessions: dict[int, Session] = {}
        self.last_token = 0  # rule 3: the fencing counter
        self.last_session_id = 0
        self.last_watch_id = 0
        self._deadlines = Deadlines()
        self._watches = Watches()
        self._effects: list[Effect] = []
        self._handlers: dict[type[Any], Callable[[Any, float], Any]] = {
            c.CreateNode: self._create_node,
            c.DescribeNode: self._describe_node,
            c.AlterNode: self._alter_node,
            c.DropNode: self._drop_node,
            c.CreateSession: self._create_session,
            c.AttachSession: self._attach_session,
            c.DetachSession: self._detach_session,
            c.CloseSession: self._close_session,
            c.CreateSemaphore: self._create_semaphore,
            c.Acquire: self._acquire,
            c.Release: self._release,
            c.CancelAcquire: self._cancel_acquire,
            c.Renew: self._renew,
            c.UpdateSemaphore: self._update_semaphore,
            c.DeleteSemaphore: self._delete_semaphore,
            c.DescribeSemaphore: self._describe_semaphore,
            c.CancelWatch: self._cancel_watch,
        }

    # -- the three verbs ------------------------------------------------------------

    def apply(self, command: c.Command[R], now: float) -> R:
        """Apply ``command`` at time ``now``; return its reply or raise its error."""
        handler = self._handlers.get(type(command))
        if handler is None:
            raise InvalidArgumentError(f"unknown command {type(command).__name__}")
        return cast(R, handler(command, now))

    def tick(self, now: float) -> None:
        """Let time pass up to ``now``: expire sessions, waiters and leases; end lock-delays."""
        for when, kind, key in self._deadlines.pop_due(now):
            if self._is_live(when, kind, key):
                self._on_deadline(kind, key, now)

    def take_effects(self) -> list[Effect]:
        """Effects queued since the last call, in the order they happened."""
        effects, self._effects = self._effects, []
        return effects

    def next_deadline(self) -> float | None:
        """When ``tick`` next has work to do, or None if nothing is timed."""
        return self._deadlines.next_live(self._is_live)

    # -- nodes ----------------------------------------------------------------------

    def _create_node(self, cmd: c.CreateNode, now: float) -> None:
        name = check_name("node", cmd.name)
        config = cmd.config.validated()
        if name in self.nodes:
            raise AlreadyExistsError(f"node {name!r} already exists")
        if len(self.nodes) >= self.max_nodes:
            raise LimitExceededError(f"max_nodes ({self.max_nodes}) reached")
        self.nodes[name] = Node(name, config)

    def _describe_node(self, cmd: c.DescribeNode, now: float) -> NodeDescription:
        node = self._node(cmd.name)
        return NodeDescription(node.name, node.config, len(node.sessions), len(node.semaphores))

    def _alter_node(self, cmd: c.AlterNode, now: float) -> NodeDescription:
        node = self._node(cmd.name)
        node.config = node.config.replace(**cmd.changes)
        return self._describe_node(c.DescribeNode(cmd.name), now)

    def _drop_node(self, cmd: c.DropNode, now: float) -> None:
        node = self._node(cmd.name)
        if node.sessions and not cmd.force:
            raise PreconditionFailedError(
                f"node {node.name!r} has {len(node.sessions)} live session(s); use force=True"
            )
        for session_id in sorted(node.sessions):
            session = self.sessions.pop(session_id)
            for watch_id in session.watches:
                self._watches.disarm(watch_id)
            self._effects.append(
                SessionEnded(session_id, ErrorCode.SESSION_CLOSED, f"node {node.name!r} was dropped")
            )
        del self.nodes[node.name]

    # -- sessions -------------------------------------------------------------------

    def _create_session(self, cmd: c.CreateSession, now: float) -> c.SessionInfo:
        node = self._node(cmd.node)
        timeout = node.config.session_timeout
        if cmd.timeout is not None:
            timeout = check_duration("recovery_window", cmd.timeout, maximum=MAX_SESSION_TIMEOUT)
        if not isinstance(cmd.description, str):
            raise InvalidArgumentError("description must be a string")
        if len(cmd.description.encode("utf-8", "replace")) > MAX_DESCRIPTION_BYTES:
            raise InvalidArgumentError(f"description is longer than {MAX_DESCRIPTION_BYTES} bytes")
        key = cmd.protection_key
        if not isinstance(key, bytes) or not 0 < len(key) <= MAX_PROTECTION_KEY_BYTES:
            raise InvalidArgumentError(
                f"protection_key must be 1 to {MAX_PROTECTION_KEY_BYTES} bytes"
            )
        if len(node.sessions) >= node.config.max_sessions:
            raise LimitExceededError(
                f"max_sessions ({node.config.max_sessions}) reached on node {node.name!r}"
            )
        self.last_session_id += 1
        session = Session(self.last_session_id, node.name, timeout, cmd.description, key, 1)
        self.sessions[session.session_id] = session
        node.sessions.add(session.session_id)
        return c.SessionInfo(session.session_id, timeout, session.seq_no)

    def _attach_session(self, cmd: c.AttachSession, now: float) -> c.SessionInfo:
        session = self._session(cmd.session_id)
        if not hmac.compare_digest(session.protection_key, cmd.protection_key):
            raise PermissionDeniedError(f"wrong protection key for session {cmd.session_id}")
        if type(cmd.seq_no) is not int or cmd.seq_no <= session.seq_no:
            raise PreconditionFailedError(
                f"stale attach of session {cmd.session_id}: seq_no {cmd.seq_no!r} is not "
                f"greater than {session.seq_no}"
            )
        session.seq_no = cmd.seq_no
        session.expires_at = None
        return c.SessionInfo(session.session_id, session.timeout, session.seq_no)

    def _detach_session(self, cmd: c.DetachSession, now: float) -> None:
        session = self._session(cmd.session_id)
        if session.expires_at is None:
            session.expires_at = now + session.timeout
            self._deadlines.schedule(session.expires_at, Kind.SESSION, (session.session_id,))

    def _close_session(self, cmd: c.CloseSession, now: float) -> None:
        self._end_session(self._session(cmd.session_id), now, ErrorCode.SESSION_CLOSED)

    def _end_session(self, session: Session, now: float, code: ErrorCode) -> None:
        """Release everything, cancel every wait, disarm every watch, forget the session."""
        node = self.nodes[session.node]
        failed = code == ErrorCode.SESSION_EXPIRED
        sid = session.session_id
        del self.sessions[sid]
        node.sessions.discard(sid)
        for watch_id in session.watches:
            self._watches.disarm(watch_id)
        touched: dict[str, Change] = {}
        for name in sorted(session.waits):
            waiter = node.semaphores[name].remove_waiter(sid)
            assert waiter is not None
            message = "session expired" if failed else "session closed"
            self._effects.append(AcquireFailed(sid, waiter.request_id, name, code, message))
            touched[name] = Change(waiters=True)
        for name in sorted(session.holds):
            sem = node.semaphores[name]
            sem.remove_owner(sid)
            if failed:
                self._start_lock_delay(node, sem, now)
            touched[name] = Change(owners=True, waiters=name in touched)
        for name, change in touched.items():
            self._settle(node, node.semaphores[name], now, change)

    # -- semaphores -----------------------------------------------------------------

    def _create_semaphore(self, cmd: c.CreateSemaphore, now: float) -> None:
        session, node = self._session_node(cmd.session_id)
        name = check_name("semaphore", cmd.name)
        limit = check_count(cmd.limit)
        data = check_data("semaphore data", cmd.data, node.config.max_data_size)
        if name in node.semaphores:
            raise AlreadyExistsError(f"semaphore {name!r} already exists")
        self._check_room(node)
        sem = node.semaphores[name] = Semaphore(name, limit, data, ephemeral=False)
        self._fire(node, sem.name, Change(existence=True))

    def _acquire(self, cmd: c.Acquire, now: float) -> c.AcquireResult:
        session, node = self._session_node(cmd.session_id)
        name = check_name("semaphore", cmd.name)
        count = check_count(cmd.count)
        data = check_data("owner data", cmd.data, node.config.max_data_size)
        timeout = check_timeout(cmd.timeout)
        if cmd.lease_ttl is not None:
            check_duration("lease_ttl", cmd.lease_ttl)
        sem = node.semaphores.get(name)
        if sem is None and not cmd.ephemeral:
            raise NotFoundError(f"semaphore {name!r} does not exist (create it or use ephemeral)")
        if sem is None:
            self._check_room(node)
        elif count > sem.limit:
            raise LimitExceededError(f"count {count} exceeds the limit {sem.limit} of {name!r}")
        elif (
            timeout != 0
            and session.session_id not in sem.waiters
            and not sem.can_grant_now(session.session_id, count, now)
            and len(sem.waiters) >= node.config.max_waiters
        ):
            raise LimitExceededError(
                f"max_waiters ({node.config.max_waiters}) reached on semaphore {name!r}"
            )
        # Validated: from here on the command succeeds (rule 1).
        change = Change()
        if sem is None:
            sem = node.semaphores[name] = Semaphore(name, MAX_COUNT, b"", ephemeral=True)
            change = Change(existence=True)
        sid = session.session_id
        superseded = sem.remove_waiter(sid)
        if superseded is not None:
            session.waits.discard(name)
            self._effects.append(
                AcquireFailed(
                    sid, superseded.request_id, name, ErrorCode.CANCELLED, "superseded by a newer acquire"
                )
            )
            change = Change(waiters=True, existence=change.existence)
        owner = sem.owners.get(sid)
        if sem.can_grant_now(sid, count, now):
            if owner is not None and count <= owner.count:
                # Shrink or restate a hold in place: same grant, same token.
                updated = Owner(sid, count, data, owner.token, owner.lease_ttl, owner.lease_deadline)
                sem.set_owner(updated)
                result = c.AcquireResult(c.AcquireStatus.GRANTED, owner.token, count, owner.lease_ttl)
                moved = (owner.count, owner.data) != (count, data)
            else:
                granted = self._grant(node, sem, sid, count, data, cmd.lease_ttl, now)
                result = c.AcquireResult(
                    c.AcquireStatus.GRANTED, granted.token, count, granted.lease_ttl
                )
                moved = True
            change = Change(owners=moved, waiters=change.waiters, existence=change.existence)
        elif timeout == 0:
            result = c.AcquireResult(c.AcquireStatus.BUSY)
        else:
            deadline = None if timeout is None else now + timeout
            sem.enqueue(Waiter(sid, cmd.request_id, count, data, deadline, cmd.lease_ttl))
            session.waits.add(name)
            if deadline is not None:
                self._deadlines.schedule(
                    deadline, Kind.WAITER, (node.name, name, sid, cmd.request_id)
                )
            result = c.AcquireResult(c.AcquireStatus.QUEUED)
            change = Change(waiters=True, existence=change.existence)
        self._settle(node, sem, now, change)
        return result

    def _release(self, cmd: c.Release, now: float) -> bool:
        session, node = self._session_node(cmd.session_id)
        sem = node.semaphores.get(cmd.name)
        if sem is None:
            return False
        sid = session.session_id
        waiter = sem.remove_waiter(sid)
        if waiter is not None:
            session.waits.discard(sem.name)
            self._effects.append(
                AcquireFailed(
                    sid, waiter.request_id, sem.name, ErrorCode.CANCELLED, "released while waiting"
                )
            )
        owner = sem.remove_owner(sid)
        if owner is not None:
            session.holds.discard(sem.name)
        self._settle(node, sem, now, Change(owners=owner is not None, waiters=waiter is not None))
        return owner is not None or waiter is not None

    def _cancel_acquire(self, cmd: c.CancelAcquire, now: float) -> bool:
        session, node = self._session_node(cmd.session_id)
        sem = node.semaphores.get(cmd.name)
        waiter = None if sem is None else sem.waiters.get(session.session_id)
        if sem is None or waiter is None or waiter.request_id != cmd.request_id:
            return False
        sem.remove_waiter(session.session_id)
        session.waits.discard(sem.name)
        self._effects.append(
            AcquireFailed(
                session.session_id, cmd.request_id, sem.name, ErrorCode.CANCELLED, "acquire cancelled"
            )
        )
        self._settle(node, sem, now, Change(waiters=True))
        return True

    def _renew(self, cmd: c.Renew, now: float) -> float:
        session, node = self._session_node(cmd.session_id)
        sem = node.semaphores.get(cmd.name)
        owner = None if sem is None else sem.owners.get(session.session_id)
        if owner is None:
            raise NotFoundError(f"session {session.session_id} holds no tokens of {cmd.name!r}")
        ttl = owner.lease_ttl if cmd.lease_ttl is None else check_duration("lease_ttl", cmd.lease_ttl)
        if ttl is None:
            raise PreconditionFailedError(f"the grant of {cmd.name!r} has no lease TTL to renew")
        owner.lease_ttl, owner.lease_deadline = ttl, now + ttl
        key = (node.name, cmd.name, session.session_id, owner.token)
        self._deadlines.schedule(owner.lease_deadline, Kind.LEASE, key)
        return ttl

    def _update_semaphore(self, cmd: c.UpdateSemaphore, now: float) -> None:
        _, node = self._session_node(cmd.session_id)
        sem = self._semaphore(node, cmd.name)
        data = check_data("semaphore data", cmd.data, node.config.max_data_size)
        if data != sem.data:
            sem.data = data
            self._fire(node, sem.name, Change(data=True))

    def _delete_semaphore(self, cmd: c.DeleteSemaphore, now: float) -> None:
        _, node = self._session_node(cmd.session_id)
        sem = self._semaphore(node, cmd.name)
        if not sem.is_idle() and not cmd.force:
            raise PreconditionFailedError(
                f"semaphore {sem.name!r} has {len(sem.owners)} owner(s) and "
                f"{len(sem.waiters)} waiter(s); use force=True"
            )
        message = f"semaphore {sem.name!r} was deleted"
        for waiter in list(sem.waiters.values()):
            self.sessions[waiter.session_id].waits.discard(sem.name)
            self._effects.append(
                AcquireFailed(waiter.session_id, waiter.request_id, sem.name, ErrorCode.NOT_FOUND, message)
            )
        for owner in list(sem.owners.values()):
            self.sessions[owner.session_id].holds.discard(sem.name)
            self._effects.append(
                LeaseLost(owner.session_id, sem.name, owner.token, ErrorCode.LEASE_LOST, message)
            )
        del node.semaphores[sem.name]
        self._fire(node, sem.name, Change(existence=True))

    def _describe_semaphore(self, cmd: c.DescribeSemaphore, now: float) -> c.DescribeResult:
        session, node = self._session_node(cmd.session_id)
        name = check_name("semaphore", cmd.name)
        sem = node.semaphores.get(name)
        if sem is None and not cmd.watches:
            raise NotFoundError(f"semaphore {name!r} does not exist")
        limit = node.config.max_watches_per_session
        if cmd.watches and len(session.watches) >= limit:
            raise LimitExceededError(f"max_watches_per_session ({limit}) reached")
        if sem is None:
            description = SemaphoreDescription.missing(name)
        else:
            description = sem.describe(owners=cmd.owners, waiters=cmd.waiters)
        if not cmd.watches:
            return c.DescribeResult(description)
        self.last_watch_id += 1
        watch = Watch(
            self.last_watch_id,
            session.session_id,
            node.name,
            name,
            cmd.watch_data,
            cmd.watch_owners,
            cmd.watch_waiters,
        )
        self._watches.arm(watch)
        session.watches.add(watch.watch_id)
        return c.DescribeResult(description, watch.watch_id)

    def _cancel_watch(self, cmd: c.CancelWatch, now: float) -> bool:
        session = self._session(cmd.session_id)
        if cmd.watch_id not in session.watches:
            return False
        session.watches.discard(cmd.watch_id)
        self._watches.disarm(cmd.watch_id)
        return True

    # -- shared steps ---------------------------------------------------------------

    def _grant(
        self,
        node: Node,
        sem: Semaphore,
        session_id: int,
        count: int,
        data: bytes,
        lease_ttl: float | None,
        now: float,
    ) -> Owner:
        """Give tokens to a session with a fresh fencing token (rule 3)."""
        self.last_token += 1
        ttl = node.config.default_lease if lease_ttl is None else lease_ttl
        deadline = None if ttl is None else now + ttl
        owner = Owner(session_id, count, data, self.last_token, ttl, deadline)
        sem.set_owner(owner)
        self.sessions[session_id].holds.add(sem.name)
        if deadline is not None:
            key = (node.name, sem.name, session_id, owner.token)
            self._deadlines.schedule(deadline, Kind.LEASE, key)
        return owner

    def _settle(self, node: Node, sem: Semaphore, now: float, change: Change) -> None:
        """Rule 5: serve the queue, drop an idle ephemeral semaphore, fire watches."""
        for waiter in sem.pop_grantable(now):
            self.sessions[waiter.session_id].waits.discard(sem.name)
            owner = self._grant(
                node, sem, waiter.session_id, waiter.count, waiter.data, waiter.lease_ttl, now
            )
            self._effects.append(
                Granted(
                    waiter.session_id,
                    waiter.request_id,
                    sem.name,
                    owner.token,
                    owner.count,
                    owner.lease_ttl,
                )
            )
            change = Change(owners=True, waiters=True, data=change.data, existence=change.existence)
        if sem.ephemeral and sem.is_idle() and now >= sem.blocked_until:
            del node.semaphores[sem.name]
            change = Change(existence=True)
        if change != Change():
            self._fire(node, sem.name, change)

    def _fire(self, node: Node, name: str, change: Change) -> None:
        for watch in self._watches.fire(node.name, name, change):
            self.sessions[watch.session_id].watches.discard(watch.watch_id)
            self._effects.append(WatchFired(watch.session_id, watch.watch_id, name))

    def _start_lock_delay(self, node: Node, sem: Semaphore, now: float) -> None:
        delay = node.config.lock_delay
        if delay > 0 and now + delay > sem.blocked_until:
            sem.blocked_until = now + delay
            self._deadlines.schedule(sem.blocked_until, Kind.LOCK_DELAY, (node.name, sem.name))

    def _check_room(self, node: Node) -> None:
        if len(node.semaphores) >= node.config.max_semaphores:
            raise LimitExceededError(
                f"max_semaphores ({node.config.max_semaphores}) reached on node {node.name!r}"
            )

    # -- deadlines ------------------------------------------------------------------

    def _is_live(self, when: float, kind: Kind, key: Key) -> bool:
        """Does a scheduled deadline still match the state (or did plans change)?"""
        if kind is Kind.SESSION:
            session = self.sessions.get(cast(int, key[0]))
            return session is not None and session.expires_at == when
        node = self.nodes.get(cast(str, key[0]))
        sem = None if node is None else node.semaphores.get(cast(str, key[1]))
        if sem is None:
            return False
        if kind is Kind.LOCK_DELAY:
            return sem.blocked_until == when
        if kind is Kind.WAITER:
            waiter = sem.waiters.get(cast(int, key[2]))
            return waiter is not None and (waiter.request_id, waiter.deadline) == (key[3], when)
        owner = sem.owners.get(cast(int, key[2]))
        return owner is not None and (owner.token, owner.lease_deadline) == (key[3], when)

    def _on_deadline(self, kind: Kind, key: Key, now: float) -> None:
        if kind is Kind.SESSION:
            session = self.sessions[cast(int, key[0])]
            self._end_session(session, now, ErrorCode.SESSION_EXPIRED)
            message = f"session {session.session_id} was not re-attached within {session.timeout}s"
            self._effects.append(
                SessionEnded(session.session_id, ErrorCode.SESSION_EXPIRED, message)
            )
            return
        node = self.nodes[cast(str, key[0])]
        sem = node.semaphores[cast(str, key[1])]
        if kind is Kind.LOCK_DELAY:
            self._settle(node, sem, now, Change())
        elif kind is Kind.WAITER:
            waiter = sem.remove_waiter(cast(int, key[2]))
            assert waiter is not None
            self.sessions[waiter.session_id].waits.discard(sem.name)
            self._effects.append(
                AcquireFailed(
                    waiter.session_id,
                    waiter.request_id,
                    sem.name,
                    ErrorCode.TIMEOUT,
                    f"timed out waiting for {sem.name!r}",
                )
            )
            self._settle(node, sem, now, Change(waiters=True))
        else:
            owner = sem.remove_owner(cast(int, key[2]))
            assert owner is not None
            self.sessions[owner.session_id].holds.discard(sem.name)
            self._effects.append(
                LeaseLost(
                    owner.session_id,
                    sem.name,
                    owner.token,
                    ErrorCode.LEASE_LOST,
                    f"lease on {sem.name!r} expired without renewal",
                )
            )
            self._start_lock_delay(node, sem, now)
            self._settle(node, sem, now, Change(owners=True))

    # -- lookups --------------------------------------------------------------------

    def _node(self, name: object) -> Node:
        node = self.nodes.get(check_name("node", name))
        if node is None:
            raise NotFoundError(f"node {name!r} does not exist")
        return node

    def _session(self, session_id: int) -> Session:
        session = self.sessions.get(session_id)
        if session is None:
            raise SessionExpiredError(f"session {session_id} does not exist (expired or closed)")
        return session

    def _session_node(self, session_id: int) -> tuple[Session, Node]:
        session = self._session(session_id)
        return session, self.nodes[session.node]

    def _semaphore(self, node: Node, name: object) -> Semaphore:
        sem = node.semaphores.get(check_name("semaphore", name))
        if sem is None:
            raise NotFoundError(f"semaphore {name!r} does not exist")
        return sem
