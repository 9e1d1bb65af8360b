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
   after its client was last heard from (the detach, less its ``silent_for``)
   unless it is re-attached first; expiry releases all it holds (starting
   lock-delay) and cancels all it waits for.
5. After any change to a semaphore, ``_settle`` serves its queue, removes it if it
   is ephemeral and idle, and fires the watches the change hit, in that order.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from typing import Any, TypeVar, cast

from tenure._core import commands as c
from tenure._core.deadlines import Key, Kind
from tenure._core.effects import AcquireFailed, Effect, LeaseLost, SessionEnded
from tenure._core.semaphore_commands import SemaphoreCommands
from tenure._core.state import Node, Session
from tenure._core.values import (
    MAX_SESSION_TIMEOUT,
    NodeConfig,
    NodeDescription,
    check_description,
    check_duration,
    check_name,
)
from tenure._core.watches import NOTHING, OWNERS, WAITERS, Change
from tenure.errors import (
    AlreadyExistsError,
    ErrorCode,
    InvalidArgumentError,
    LimitExceededError,
    PermissionDeniedError,
    PreconditionFailedError,
)

R = TypeVar("R")

#: Longest protection key a session may use, in bytes.
MAX_PROTECTION_KEY_BYTES = 256


class Engine(SemaphoreCommands):
    """The sans-I/O coordination engine. See the module docstring for its rules."""

    def __init__(self, *, max_nodes: int = 10_000) -> None:
        super().__init__()
        self.max_nodes = max_nodes
        self._handlers: dict[type[Any], Callable[[Any, float], Any]] = {
            c.CreateNode: self._create_node,
            c.DescribeNode: self._describe_node,
            c.AlterNode: self._alter_node,
            c.DropNode: self._drop_node,
            c.CreateSession: self._create_session,
            c.AttachSession: self._attach_session,
            c.DetachSession: self._detach_session,
            c.CloseSession: self._close_session,
            c.DescribeSession: self._describe_session,
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
        """Apply ``command`` at time ``now``; return its reply or raise its error.

        Deadlines due by ``now`` are handled first: a command never sees a session,
        lease or waiter that its time has already ended, however late the host's
        timer is.
        """
        handler = self._handlers.get(type(command))
        if handler is None:
            raise InvalidArgumentError(f"unknown command {type(command).__name__}")
        self.tick(now)
        return cast(R, handler(command, now))

    def tick(self, now: float) -> int:
        """Let time pass up to ``now``: expire sessions, waiters and leases; end lock-delays.

        Returns how many deadlines it handled (0: the state did not change), so a
        durable host knows when a tick must be logged.
        """
        self.now = max(self.now, now)
        if not self._deadlines.any_due(now):
            return 0  # the common case, on every command: O(1)
        handled = 0
        for when, kind, key in self._deadlines.pop_due(now):
            if self._is_live(when, kind, key):
                # Each deadline is handled at its own time, so one coarse tick ends in
                # the same state as ticking at every deadline on the way.
                self._on_deadline(kind, key, when)
                handled += 1
        return handled

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
        if not isinstance(cmd.config, NodeConfig):
            raise InvalidArgumentError(f"config must be a NodeConfig, got {cmd.config!r}")
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
        bad = [name for name in cmd.changes if not isinstance(name, str)]
        if bad:
            raise InvalidArgumentError(f"node setting names must be strings, got {bad!r}")
        node.config = node.config.replace(**cmd.changes)
        return self._describe_node(c.DescribeNode(cmd.name), now)

    def _drop_node(self, cmd: c.DropNode, now: float) -> None:
        node = self._node(cmd.name)
        if node.sessions and not cmd.force:
            raise PreconditionFailedError(
                f"node {node.name!r} has {len(node.sessions)} live session(s); use force=True"
            )
        message = f"node {node.name!r} was dropped"
        for sem in node.semaphores.values():
            for waiter in sem.waiters.values():
                self._effects.append(
                    AcquireFailed(
                        waiter.session_id, waiter.request_id, sem.name, ErrorCode.NOT_FOUND, message
                    )
                )
            for owner in sem.owners.values():
                self._effects.append(
                    LeaseLost(
                        owner.session_id, sem.name, owner.token, ErrorCode.LEASE_LOST, message
                    )
                )
        for session_id in sorted(node.sessions):
            session = self.sessions.pop(session_id)
            for watch_id in session.watches:
                self._watches.disarm(watch_id)
            self._effects.append(
                SessionEnded(
                    session_id, ErrorCode.SESSION_CLOSED, f"node {node.name!r} was dropped"
                )
            )
        del self.nodes[node.name]

    # -- sessions -------------------------------------------------------------------

    def _create_session(self, cmd: c.CreateSession, now: float) -> c.SessionInfo:
        node = self._node(cmd.node)
        timeout = node.config.session_timeout
        if cmd.timeout is not None:
            timeout = check_duration("recovery_window", cmd.timeout, maximum=MAX_SESSION_TIMEOUT)
        check_description(cmd.description)
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
        if not isinstance(cmd.protection_key, bytes):
            raise InvalidArgumentError("protection_key must be bytes")
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
        silent_for = check_duration("silent_for", cmd.silent_for, allow_zero=True)
        expires_at = now + (session.timeout - min(silent_for, session.timeout))
        if session.expires_at is not None and session.expires_at <= expires_at:
            return  # detached already, and due no later: a detach never extends a window
        if expires_at <= now:  # silent for its whole window already
            self._expire_session(session, now)
            return
        session.expires_at = expires_at
        self._deadlines.schedule(expires_at, Kind.SESSION, (session.session_id,))

    def _expire_session(self, session: Session, now: float) -> None:
        """The recovery window passed: end the session and tell it so."""
        self._end_session(session, now, ErrorCode.SESSION_EXPIRED)
        message = f"session {session.session_id} was not re-attached within {session.timeout}s"
        self._effects.append(SessionEnded(session.session_id, ErrorCode.SESSION_EXPIRED, message))

    def _describe_session(self, cmd: c.DescribeSession, now: float) -> c.SessionState:
        session, node = self._session_node(cmd.session_id)
        after, limit = cmd.after, cmd.limit
        if not isinstance(after, str):
            raise InvalidArgumentError("after must be a semaphore name or an empty string")
        if type(limit) is not int or not 1 <= limit <= c.MAX_DESCRIBE_SESSION_LIMIT:
            raise InvalidArgumentError(
                f"limit must be an integer from 1 to {c.MAX_DESCRIBE_SESSION_LIMIT}"
            )
        missed = session.missed
        names = sorted(name for name in {*session.held, *session.waits, *missed} if name > after)
        page = names[:limit]
        sid = session.session_id
        holds, waits = [], []
        for name in page:
            sem = node.semaphores.get(name)
            owner = None if sem is None else sem.owner(sid)
            if owner is not None:
                holds.append(c.HeldGrant(name, owner.token, owner.count, owner.lease_ttl))
            waiter = None if sem is None else sem.waiter(sid)
            if waiter is not None:
                waits.append(c.QueuedAcquire(name, waiter.request_id, waiter.count))
        return c.SessionState(
            sid,
            tuple(holds),
            tuple(waits),
            tuple(missed[name] for name in page if name in missed),
            page[-1] if len(names) > limit else None,
        )

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
            touched[name] = WAITERS
        for name in sorted(session.held):
            sem = node.semaphores[name]
            sem.remove_owner(sid)
            if failed:
                self._start_lock_delay(node, sem, now)
            touched[name] = OWNERS | touched.get(name, NOTHING)
        for name, change in touched.items():
            self._settle(node, node.semaphores[name], now, change)

    # -- semaphores -----------------------------------------------------------------

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
            waiter = sem.waiter(cast(int, key[2]))
            return waiter is not None and (waiter.request_id, waiter.deadline) == (key[3], when)
        owner = sem.owner(cast(int, key[2]))
        return owner is not None and (owner.token, owner.lease_deadline) == (key[3], when)

    def _on_deadline(self, kind: Kind, key: Key, now: float) -> None:
        if kind is Kind.SESSION:
            self._expire_session(self.sessions[cast(int, key[0])], now)
            return
        node = self.nodes[cast(str, key[0])]
        sem = node.semaphores[cast(str, key[1])]
        if kind is Kind.LOCK_DELAY:
            sem.blocked_until = 0.0
            self._settle(node, sem, now, NOTHING)
        elif kind is Kind.WAITER:
            waiter = sem.remove_waiter(cast(int, key[2]))
            assert waiter is not None
            self.sessions[waiter.session_id].discard_wait(sem.name)
            self._tell(
                AcquireFailed(
                    waiter.session_id,
                    waiter.request_id,
                    sem.name,
                    ErrorCode.TIMEOUT,
                    f"timed out waiting for {sem.name!r}",
                )
            )
            self._settle(node, sem, now, WAITERS)
        else:
            owner = sem.remove_owner(cast(int, key[2]))
            assert owner is not None
            self.sessions[owner.session_id].discard_hold(sem.name)
            self._tell(
                LeaseLost(
                    owner.session_id,
                    sem.name,
                    owner.token,
                    ErrorCode.LEASE_LOST,
                    f"lease on {sem.name!r} expired without renewal",
                )
            )
            self._start_lock_delay(node, sem, now)
            self._settle(node, sem, now, OWNERS)
