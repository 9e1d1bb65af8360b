"""One semaphore: its holders, its FIFO queue, and the rule that serves the queue.

Theory of operation
-------------------
A semaphore has ``limit`` tokens. Owners hold ``count`` tokens each; the sum of
their counts is ``self.count`` and never exceeds ``limit``. Waiters queue in arrival
order, at most one per session, and are served strictly first-in first-out: the
head is granted as soon as its count fits, and *nothing* behind the head is granted
while the head does not fit, however small (no barging). This is what makes a
large request at the head starve nobody and be starved by nobody.

A session that already owns tokens may ask again: asking for no more than it holds
updates count and data at once (same grant, same fencing token); asking for more
queues an *upgrade* that, when granted, replaces the old hold with a new token.

``blocked_until`` implements lock-delay: after a holder *failed* (its session
expired or its lease ran out), no grant happens before that time.

This module only changes state and reports what it did; the engine assigns tokens,
emits effects and fires watches.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from tenure._core.values import OwnerInfo, SemaphoreDescription, WaiterInfo


@dataclass(slots=True)
class Owner:
    """A session's hold on a semaphore."""

    session_id: int
    count: int
    data: bytes
    token: int
    lease_ttl: float | None = None
    lease_deadline: float | None = None  # set iff lease_ttl is set


@dataclass(slots=True)
class Waiter:
    """A queued acquire."""

    session_id: int
    request_id: int
    count: int
    data: bytes
    deadline: float | None  # None: waits forever
    lease_ttl: float | None


class Semaphore:
    """State of one semaphore. See the module docstring for the rules."""

    __slots__ = (
        "blocked_until",
        "count",
        "data",
        "ephemeral",
        "limit",
        "name",
        "owners",
        "waiters",
    )

    def __init__(self, name: str, limit: int, data: bytes, *, ephemeral: bool) -> None:
        self.name = name
        self.limit = limit
        self.data = data
        self.ephemeral = ephemeral
        # Insertion order is grant order; invariant: count == sum of owner counts <= limit.
        self.owners: dict[int, Owner] = {}
        self.count = 0
        # Insertion order is service order (FIFO); one entry per session.
        self.waiters: dict[int, Waiter] = {}
        # Lock-delay: no grant while now < blocked_until.
        self.blocked_until = 0.0

    # -- queries --------------------------------------------------------------------

    def is_idle(self) -> bool:
        """No owners and no waiters (an ephemeral semaphore may then vanish)."""
        return not self.owners and not self.waiters

    def fits(self, session_id: int, count: int, now: float) -> bool:
        """Could ``count`` tokens for ``session_id`` be granted now, ignoring the queue?"""
        if now < self.blocked_until:
            return False
        held = self.owners[session_id].count if session_id in self.owners else 0
        return self.count - held + count <= self.limit

    def can_grant_now(self, session_id: int, count: int, now: float) -> bool:
        """Would a new request be granted at once (it fits and nobody queues ahead)?

        A request that only shrinks or keeps an existing hold never waits: it takes
        no token from anyone.
        """
        owner = self.owners.get(session_id)
        if owner is not None and count <= owner.count:
            return True
        return not self.waiters and self.fits(session_id, count, now)

    def describe(self, *, owners: bool, waiters: bool) -> SemaphoreDescription:
        """A snapshot, with owners and waiters listed only when asked for."""
        return SemaphoreDescription(
            name=self.name,
            limit=self.limit,
            count=self.count,
            data=self.data,
            ephemeral=self.ephemeral,
            owners=tuple(
                OwnerInfo(o.session_id, o.count, o.data, o.token) for o in self.owners.values()
            )
            if owners
            else (),
            waiters=tuple(WaiterInfo(w.session_id, w.count, w.data) for w in self.waiters.values())
            if waiters
            else (),
        )

    # -- changes --------------------------------------------------------------------

    def set_owner(self, owner: Owner) -> Owner | None:
        """Install ``owner`` (replacing the session's earlier hold); returns the old hold."""
        old = self.owners.get(owner.session_id)
        if old is not None:
            self.count -= old.count
            if old.token != owner.token:
                # A new grant (an upgrade) goes to the back, keeping owners in grant
                # order; a restated grant (same token) keeps its place.
                del self.owners[owner.session_id]
        self.owners[owner.session_id] = owner
        self.count += owner.count
        assert self.count <= self.limit, "grant beyond the limit"
        return old

    def remove_owner(self, session_id: int) -> Owner | None:
        """Drop a session's hold, if any."""
        owner = self.owners.pop(session_id, None)
        if owner is not None:
            self.count -= owner.count
        return owner

    def enqueue(self, waiter: Waiter) -> Waiter | None:
        """Queue ``waiter`` at the back; returns the session's earlier waiter it replaces."""
        old = self.waiters.pop(waiter.session_id, None)
        self.waiters[waiter.session_id] = waiter
        return old

    def remove_waiter(self, session_id: int) -> Waiter | None:
        """Take a session's waiter out of the queue, if any."""
        return self.waiters.pop(session_id, None)

    def pop_grantable(self, now: float) -> Iterator[Waiter]:
        """Yield waiters from the head of the queue for as long as the head fits.

        Each yielded waiter is already out of the queue; the caller must install its
        owner before asking for the next one (the next fit depends on it).
        """
        while self.waiters:
            head = next(iter(self.waiters.values()))
            if not self.fits(head.session_id, head.count, now):
                return
            del self.waiters[head.session_id]
            yield head
