"""Session commands: create, attach, detach, close, describe; and how a session ends.

Rule 4 of the engine is kept here: an attached session never expires; a detached
one expires ``timeout`` seconds after its client was last heard from, unless it is
re-attached first, and its end releases all it holds and cancels all it waits for.

A session keeps its protection key's digest, never the key
(:func:`~tenure._core.session.digest_key`): AttachSession and ResumeSession compare it
with the digest of the key they present.
"""

from __future__ import annotations

import hmac

from tenure._core import commands as c
from tenure._core.deadlines import SessionDeadline
from tenure._core.effects import AcquireFailed, SessionEnded
from tenure._core.quotas import Q_DATA_BYTES, Q_SESSIONS, text_bytes
from tenure._core.semaphore import holder_key
from tenure._core.session import KEY_DIGEST_BYTES, digest_key
from tenure._core.shared_steps import settle, start_lock_delay
from tenure._core.state import EngineState, Session
from tenure._core.values import (
    MAX_RECOVERY_WINDOW,
    check_description,
    check_duration,
    check_identity,
)
from tenure._core.watches import NOTHING, OWNERS, WAITERS, Change
from tenure.errors import (
    ErrorCode,
    InvalidArgumentError,
    LimitExceededError,
    NotFoundError,
    PermissionDeniedError,
    PreconditionFailedError,
    SessionExpiredError,
)

#: Longest protection key a session may use, in bytes.
MAX_PROTECTION_KEY_BYTES = 256


def create_session(state: EngineState, cmd: c.CreateSession, now: float) -> c.SessionInfo:
    """Open an attached session on a node, with the next session id."""
    node = state.lookup_node(cmd.node)
    timeout = node.config.recovery_window
    if cmd.timeout is not None:
        timeout = check_duration("recovery_window", cmd.timeout, maximum=MAX_RECOVERY_WINDOW)
    check_description(cmd.description)
    identity = check_identity(cmd.identity)
    key = cmd.protection_key
    if state.keys_digested:  # (a replay of a record that logged the key's digest)
        if not isinstance(key, bytes) or len(key) != KEY_DIGEST_BYTES:
            raise InvalidArgumentError(f"a logged key's digest must be {KEY_DIGEST_BYTES} bytes")
    elif not isinstance(key, bytes) or not 0 < len(key) <= MAX_PROTECTION_KEY_BYTES:
        raise InvalidArgumentError(f"protection_key must be 1 to {MAX_PROTECTION_KEY_BYTES} bytes")
    if len(node.sessions) >= node.config.max_sessions:
        raise LimitExceededError(
            f"max_sessions ({node.config.max_sessions}) reached on node {node.name!r}"
        )
    # Its owner is who sends the command (the host says: tenure._core.quotas).
    ledger = state.ledger
    usage = ledger.of(state.actor)
    ledger.check_window(state.actor, timeout)
    session = Session(
        state.last_session_id + 1,
        node.name,
        timeout,
        cmd.description,
        key if state.keys_digested else digest_key(key),  # (the key itself is not kept)
        1,
        identity=identity,
        created_at=now,
        usage=usage,
    )
    # (With what its client chose the size of: description, identity, key.)
    ledger.check_made(usage, Q_SESSIONS, 1, session.counted_bytes())
    state.last_session_id = session.session_id
    state.add_session(session, node)
    return c.SessionInfo(session.session_id, timeout, session.seq_no)


def attach_session(state: EngineState, cmd: c.AttachSession, now: float) -> c.SessionInfo:
    """Re-attach a session (right key, newer ``seq_no``): it no longer expires."""
    session = state.lookup_session(cmd.session_id)
    if not hmac.compare_digest(session.key_digest, presented_digest(state, cmd.protection_key)):
        raise PermissionDeniedError(f"wrong protection key for session {cmd.session_id}")
    if type(cmd.seq_no) is not int or cmd.seq_no <= session.seq_no:
        raise PreconditionFailedError(
            f"stale attach of session {cmd.session_id}: seq_no {cmd.seq_no!r} is not "
            f"greater than {session.seq_no}"
        )
    timeout = session.timeout
    if cmd.timeout is not None:
        timeout = check_duration("recovery_window", cmd.timeout, maximum=MAX_RECOVERY_WINDOW)
        state.ledger.check_window(state.actor, timeout)
    grown = 0
    if cmd.description is not None:
        check_description(cmd.description)
        grown = text_bytes(cmd.description) - text_bytes(session.description)
        state.check_quota(session.usage, Q_DATA_BYTES, grown)
    # Validated: from here on the command succeeds (rule 1).
    session.seq_no = cmd.seq_no
    session.timeout = timeout
    if cmd.description is not None:
        session.description = cmd.description
        if session.usage is not None and session.usage.live:
            session.usage.add(Q_DATA_BYTES, grown)
    session.expires_at = None  # its deadline, if any, is now dead (see expiry.is_live)
    return c.SessionInfo(session.session_id, session.timeout, session.seq_no)


def resume_session(state: EngineState, cmd: c.ResumeSession, now: float) -> c.SessionInfo:
    """Take the session back for a new owner (see :class:`~tenure._core.commands.ResumeSession`).

    Its holds stay; its waits are withdrawn (the waiters behind move up), its
    watches disarmed, its missed endings forgotten (the new owner reads its holds
    afresh). The previous owner hears SessionEnded; the session itself goes on,
    attached, with the next ``seq_no``.
    """
    session = state.sessions.get(cmd.session_id)
    presented = presented_digest(state, cmd.protection_key)
    if (
        session is None
        or session.node != cmd.node
        or not hmac.compare_digest(session.key_digest, presented)
    ):
        # A wrong key or node tells nothing about the sessions of others.
        raise SessionExpiredError(
            f"session {cmd.session_id} of node {cmd.node!r} cannot be resumed: no such live "
            "session with that key (expired, closed, or a ticket of another session)"
        )
    node = state.nodes[session.node]
    sid = session.session_id
    message = f"session {sid} was resumed by another client (with its ticket)"
    for name in sorted(session.waits):
        sem = node.semaphores[name]
        for hold in list(session.waits_on(name)):
            waiter = sem.remove_waiter(holder_key(sid, hold))
            assert waiter is not None, "a session's wait is its semaphore's waiter"
            if node.sets:  # (every member is the session's: each leaves here)
                node.sets.pop(waiter.order, None)
            session.discard_wait(name, hold, waiter.task)
            state.wait_ended(node, name, waiter, ErrorCode.SESSION_EXPIRED, now)
            state.effects.append(
                AcquireFailed(
                    sid, waiter.request_id, name, ErrorCode.SESSION_EXPIRED, message, hold
                )
            )
        settle(state, node, sem, now, WAITERS)
    # The holds stay, but the tasks that asked for them were the previous owner's: no
    # task of the new owner holds them (0: not known; no deadlock is found through them).
    for name in session.held:
        sem = node.semaphores[name]
        for hold in session.holds_on(name):
            held = sem.owner(holder_key(sid, hold))
            assert held is not None, "a session's hold is its semaphore's owner"
            held.task = 0
    state.disarm_watches(session)
    for key in list(session.missed):
        session.forget_missed(*key)
    state.effects.append(
        SessionEnded(sid, ErrorCode.SESSION_EXPIRED, f"{message}: this client is fenced off")
    )
    session.seq_no += 1
    session.expires_at = None  # attached to its new owner: its deadline, if any, is dead
    return c.SessionInfo(sid, session.timeout, session.seq_no)


def presented_digest(state: EngineState, key: object) -> bytes:
    """The digest of the protection key a command presents, to compare with the one its
    session keeps (a journal's replay presents the digest itself: ``keys_digested``).

    Raises:
        InvalidArgumentError: ``key`` is not bytes.
    """
    if not isinstance(key, bytes):
        raise InvalidArgumentError("protection_key must be bytes")
    return key if state.keys_digested else digest_key(key)


def detach_session(state: EngineState, cmd: c.DetachSession, now: float) -> None:
    """Start (or shorten) the session's recovery window, less its ``silent_for``."""
    session = state.lookup_session(cmd.session_id)
    silent_for = check_duration("silent_for", cmd.silent_for, allow_zero=True)
    expires_at = now + (session.timeout - min(silent_for, session.timeout))
    if session.expires_at is not None and session.expires_at <= expires_at:
        return  # detached already, and due no later: a detach never extends a window
    if expires_at <= now:  # silent for its whole window already
        expire_session(state, session, now)
        return
    session.expires_at = expires_at
    state.deadlines.schedule(expires_at, SessionDeadline(session.session_id))


def close_session(state: EngineState, cmd: c.CloseSession, now: float) -> None:
    """End the session at its client's request (no lock-delay: nothing was lost)."""
    end_session(state, state.lookup_session(cmd.session_id), now, ErrorCode.SESSION_CLOSED)


def kill_session(state: EngineState, cmd: c.KillSession, now: float) -> None:
    """End a live session of the node as an expiry would, telling its client who did it."""
    node = state.lookup_node(cmd.node)
    sid = cmd.session_id
    if type(sid) is not int or sid not in node.sessions:
        raise NotFoundError(f"node {node.name!r} has no live session {sid!r}")
    session = state.sessions[sid]
    # As an expiry: the client may still believe it holds its locks (lock-delay).
    end_session(state, session, now, ErrorCode.SESSION_EXPIRED)
    message = f"session {sid} was ended by an operator (kill_session)"
    state.effects.append(SessionEnded(sid, ErrorCode.SESSION_EXPIRED, message))


def describe_session(state: EngineState, cmd: c.DescribeSession, now: float) -> c.SessionState:
    """One page of what the session holds, waits for and missed, by semaphore name."""
    session, node = state.lookup_session_node(cmd.session_id)
    after, limit = cmd.after, cmd.limit
    if not isinstance(after, str):
        raise InvalidArgumentError("after must be a semaphore name or an empty string")
    if type(limit) is not int or not 1 <= limit <= c.MAX_DESCRIBE_SESSION_LIMIT:
        raise InvalidArgumentError(
            f"limit must be an integer from 1 to {c.MAX_DESCRIBE_SESSION_LIMIT}"
        )
    missed = session.missed
    names = sorted(
        name for name in {*session.held, *session.waits, *(n for n, _ in missed)} if name > after
    )
    page = names[:limit]
    sid = session.session_id
    holds, waits, ended = [], [], []
    for name in page:
        sem = node.semaphores.get(name)
        for hold in session.holds_on(name):
            owner = None if sem is None else sem.owner(holder_key(sid, hold))
            assert owner is not None, "a session's hold is its semaphore's owner"
            holds.append(c.HeldGrant(name, owner.token, owner.count, owner.lease_ttl, hold))
        for hold in session.waits_on(name):
            waiter = None if sem is None else sem.waiter(holder_key(sid, hold))
            assert waiter is not None, "a session's wait is its semaphore's waiter"
            waits.append(c.QueuedAcquire(name, waiter.request_id, waiter.count, hold))
    if missed:
        shown = set(page)
        ended = [effect for (name, _), effect in sorted(missed.items()) if name in shown]
    return c.SessionState(
        sid,
        tuple(holds),
        tuple(waits),
        tuple(ended),
        page[-1] if len(names) > limit else None,
    )


def expire_session(state: EngineState, session: Session, now: float) -> None:
    """The recovery window passed: end the session and tell it so."""
    end_session(state, session, now, ErrorCode.SESSION_EXPIRED)
    message = f"session {session.session_id} was not re-attached within {session.timeout}s"
    state.effects.append(SessionEnded(session.session_id, ErrorCode.SESSION_EXPIRED, message))


def end_session(state: EngineState, session: Session, now: float, code: ErrorCode) -> None:
    """Release everything, cancel every wait, disarm every watch, forget the session.

    An expiry (``code`` SESSION_EXPIRED) starts lock-delay on what it held: its
    client may still believe it holds it. A close does not: the client let go.
    """
    node = state.nodes[session.node]
    failed = code == ErrorCode.SESSION_EXPIRED
    sid = session.session_id
    state.forget_session(session, node)  # (its watches disarmed with it)
    touched: dict[str, Change] = {}
    message = "session expired" if failed else "session closed"
    for name in sorted(session.waits):
        for hold in session.waits_on(name):
            waiter = node.semaphores[name].remove_waiter(holder_key(sid, hold))
            assert waiter is not None
            if node.sets:  # (every member is the session's: each leaves here)
                node.sets.pop(waiter.order, None)
            state.wait_ended(node, name, waiter, code, now)
            state.effects.append(AcquireFailed(sid, waiter.request_id, name, code, message, hold))
        touched[name] = WAITERS
    for name in sorted(session.held):
        sem = node.semaphores[name]
        for hold in session.holds_on(name):
            owner = sem.remove_owner(holder_key(sid, hold))
            assert owner is not None, "a session's hold is its semaphore's owner"
            state.hold_ended(node, name, owner, failed, now)
        if failed:
            start_lock_delay(state, node, sem, now)
        touched[name] = OWNERS | touched.get(name, NOTHING)
    for name, change in touched.items():
        settle(state, node, node.semaphores[name], now, change)
