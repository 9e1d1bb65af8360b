"""Semaphore commands: create, acquire, release, renew, update, delete, describe, watch."""

from __future__ import annotations

from tenure._core import commands as c
from tenure._core.deadlines import Kind
from tenure._core.effects import AcquireFailed, LeaseLost
from tenure._core.semaphore import Owner, Semaphore, Waiter
from tenure._core.state import EngineState
from tenure._core.values import (
    MAX_COUNT,
    SemaphoreDescription,
    check_count,
    check_data,
    check_duration,
    check_name,
    check_timeout,
)
from tenure._core.watches import DATA, EXISTENCE, NOTHING, OWNERS, WAITERS, Watch
from tenure.errors import (
    AlreadyExistsError,
    ErrorCode,
    LimitExceededError,
    NotFoundError,
    PreconditionFailedError,
)


class SemaphoreCommands(EngineState):
    """Handlers of the commands that act on one semaphore."""

    def _create_semaphore(self, cmd: c.CreateSemaphore, now: float) -> None:
        _, node = self._session_node(cmd.session_id)
        name = check_name("semaphore", cmd.name)
        limit = check_count(cmd.limit, what="limit")
        data = check_data("semaphore data", cmd.data, node.config.max_data_size)
        if name in node.semaphores:
            raise AlreadyExistsError(f"semaphore {name!r} already exists")
        self._check_room(node)
        sem = node.semaphores[name] = Semaphore(name, limit, data, ephemeral=False)
        self._fire(node, sem.name, EXISTENCE)

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
            and sem.waiter(session.session_id) is None
            and not sem.can_grant_now(session.session_id, count, now)
            and sem.queue_length() >= node.config.max_waiters
        ):
            raise LimitExceededError(
                f"max_waiters ({node.config.max_waiters}) reached on semaphore {name!r}"
            )
        # Validated: from here on the command succeeds (rule 1).
        session.forget_missed(name)  # asking again: the client settled the last one
        change = NOTHING
        if sem is None:
            sem = node.semaphores[name] = Semaphore(name, MAX_COUNT, b"", ephemeral=True)
            change = EXISTENCE
        sid = session.session_id
        superseded = sem.remove_waiter(sid)
        if superseded is not None:
            session.discard_wait(name)
            self._effects.append(
                AcquireFailed(
                    sid,
                    superseded.request_id,
                    name,
                    ErrorCode.CANCELLED,
                    "superseded by a newer acquire",
                )
            )
            change |= WAITERS
        owner = sem.owner(sid)
        if sem.can_grant_now(sid, count, now):
            if owner is not None and count <= owner.count:
                # Shrink or restate a hold in place: same grant, same token.
                updated = Owner(
                    sid, count, data, owner.token, owner.lease_ttl, owner.lease_deadline
                )
                sem.set_owner(updated)
                result = c.AcquireResult(
                    c.AcquireStatus.GRANTED, owner.token, count, owner.lease_ttl
                )
                moved = (owner.count, owner.data) != (count, data)
            else:
                granted = self._grant(node, sem, sid, count, data, cmd.lease_ttl, now)
                result = c.AcquireResult(
                    c.AcquireStatus.GRANTED, granted.token, count, granted.lease_ttl
                )
                moved = True
            if moved:
                change |= OWNERS
        elif timeout == 0:
            result = c.AcquireResult(c.AcquireStatus.BUSY)
        else:
            deadline = None if timeout is None else now + timeout
            sem.enqueue(Waiter(sid, cmd.request_id, count, data, deadline, cmd.lease_ttl))
            session.add_wait(name)
            if deadline is not None:
                self._deadlines.schedule(
                    deadline, Kind.WAITER, (node.name, name, sid, cmd.request_id)
                )
            result = c.AcquireResult(c.AcquireStatus.QUEUED)
            change |= WAITERS
        self._settle(node, sem, now, change)
        return result

    def _release(self, cmd: c.Release, now: float) -> bool:
        session, node = self._session_node(cmd.session_id)
        name = check_name("semaphore", cmd.name)
        session.forget_missed(name)  # its client is done with it, however it ended
        sem = node.semaphores.get(name)
        if sem is None:
            return False
        sid = session.session_id
        waiter = sem.remove_waiter(sid)
        if waiter is not None:
            session.discard_wait(sem.name)
            self._effects.append(
                AcquireFailed(
                    sid, waiter.request_id, sem.name, ErrorCode.CANCELLED, "released while waiting"
                )
            )
        owner = sem.remove_owner(sid)
        if owner is not None:
            session.discard_hold(sem.name)
        change = (NOTHING if owner is None else OWNERS) | (NOTHING if waiter is None else WAITERS)
        self._settle(node, sem, now, change)
        return owner is not None or waiter is not None

    def _cancel_acquire(self, cmd: c.CancelAcquire, now: float) -> bool:
        session, node = self._session_node(cmd.session_id)
        sem = node.semaphores.get(check_name("semaphore", cmd.name))
        waiter = None if sem is None else sem.waiter(session.session_id)
        if sem is None or waiter is None or waiter.request_id != cmd.request_id:
            return False
        sem.remove_waiter(session.session_id)
        session.discard_wait(sem.name)
        self._effects.append(
            AcquireFailed(
                session.session_id,
                cmd.request_id,
                sem.name,
                ErrorCode.CANCELLED,
                "acquire cancelled",
            )
        )
        self._settle(node, sem, now, WAITERS)
        return True

    def _renew(self, cmd: c.Renew, now: float) -> float:
        session, node = self._session_node(cmd.session_id)
        sem = node.semaphores.get(check_name("semaphore", cmd.name))
        owner = None if sem is None else sem.owner(session.session_id)
        if owner is None:
            raise NotFoundError(f"session {session.session_id} holds no tokens of {cmd.name!r}")
        if owner.lease_ttl is None:
            # A grant without a TTL lasts as long as its session; renewing must not
            # silently turn it into a timed one.
            raise PreconditionFailedError(f"the grant of {cmd.name!r} has no lease TTL to renew")
        ttl = owner.lease_ttl
        if cmd.lease_ttl is not None:
            ttl = check_duration("lease_ttl", cmd.lease_ttl)
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
            self._fire(node, sem.name, DATA)

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
            self.sessions[waiter.session_id].discard_wait(sem.name)
            self._tell(
                AcquireFailed(
                    waiter.session_id, waiter.request_id, sem.name, ErrorCode.NOT_FOUND, message
                )
            )
        for owner in list(sem.owners.values()):
            self.sessions[owner.session_id].discard_hold(sem.name)
            self._tell(
                LeaseLost(owner.session_id, sem.name, owner.token, ErrorCode.LEASE_LOST, message)
            )
        del node.semaphores[sem.name]
        self._fire(node, sem.name, EXISTENCE)

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
            with_owners=cmd.owners,
            with_waiters=cmd.waiters,
            repeat=cmd.watch_repeat,
        )
        self._watches.arm(watch)
        session.add_watch(watch.watch_id)
        return c.DescribeResult(description, watch.watch_id)

    def _cancel_watch(self, cmd: c.CancelWatch, now: float) -> bool:
        session = self._session(cmd.session_id)
        if cmd.watch_id not in session.watches:
            return False
        session.discard_watch(cmd.watch_id)
        self._watches.disarm(cmd.watch_id)
        return True
