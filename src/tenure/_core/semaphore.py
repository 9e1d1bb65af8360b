"""One semaphore: its holders, its FIFO queue, and the rule that serves the queue.

Theory of operation
-------------------
A semaphore has ``limit`` tokens. Owners hold ``count`` tokens each; the sum of
their counts is ``self.count`` and never exceeds ``limit``. Waiters queue in arrival
order, at most one per hold of a session, and are served strictly first-in first-out: the
head is granted as soon as its count fits, and *nothing* behind the head is granted
while the head does not fit, however small (no barging). This is what makes a
large request at the head starve nobody and be starved by nobody.

Owners and waiters are *holders*: a session's numbered holds (:func:`holder_key`).
A session may have several, each an owner or waiter of its own, in the queue like
any other session's. A holder that already owns tokens may ask again: asking for no
more than it holds updates count and data at once (same grant, same fencing token);
asking for more queues an *upgrade* that, when granted, replaces the old hold with
a new token.

``blocked_until`` implements lock-delay: after a holder *failed* (its session
expired or its lease ran out), no grant happens before that time.

This module only changes state and reports what it did; the engine assigns tokens,
emits effects and fires watches.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from tenure._core.session import Session
from tenure._core.values import (
    NO_IDENTITY,
    ClientIdentity,
    OwnerInfo,
    SemaphoreDescription,
    WaiterInfo,
)


def holder_key(session_id: int, hold: int) -> int:
    """The key of a session's hold ``hold`` among a semaphore's owners and waiters.

    Hold 0, the usual (and only one YDB's protocol knows), is the session id itself:
    no new object per hold. Others sit above every session id (ids are below 2**64).
    """
    return session_id | hold << 64 if hold else session_id


#: The bits of a holder key that are its session id (see :func:`holder_key`).
_SESSION_BITS = (1 << 64) - 1


class Lease:
    """An owner's lease: its TTL and when it runs out unless renewed (engine time)."""

    __slots__ = ("deadline", "ttl")

    def __init__(self, ttl: float, deadline: float) -> None:
        self.ttl = ttl
        self.deadline = deadline


class Owner:
    """A session's hold on a semaphore (its hold number ``hold``).

    Memory: a server may keep a hundred thousand of these (held mutexes), so an
    owner stores only what cannot be derived. ``key`` (:func:`holder_key`) carries
    the session id and the hold number, which are read from it; a grant without a
    lease TTL (the usual) keeps no lease object. 80 bytes, where a dataclass of
    every field took 104.
    """

    __slots__ = ("_lease", "count", "data", "key", "since", "token")

    def __init__(
        self,
        session_id: int,
        count: int,
        data: bytes,
        token: int,
        lease_ttl: float | None = None,
        lease_deadline: float | None = None,  # set iff lease_ttl is set
        hold: int = 0,
        since: float = 0.0,  # when the grant was made (engine time); a restate keeps it
    ) -> None:
        #: Its :func:`holder_key` (kept: every lookup of a hold compares it; inlined:
        #: a restart makes a hundred thousand owners).
        self.key = session_id | hold << 64 if hold else session_id
        self.count = count
        self.data = data
        self.token = token
        self.since = since
        self._lease: Lease | None = (
            None
            if lease_ttl is None and lease_deadline is None
            else Lease(lease_ttl, lease_deadline)  # type: ignore[arg-type]
        )

    @property
    def session_id(self) -> int:
        """The session holding it."""
        key = self.key
        return key if key <= _SESSION_BITS else key & _SESSION_BITS

    @property
    def hold(self) -> int:
        """Which of the session's holds it is (0: the usual)."""
        return self.key >> 64

    @property
    def lease_ttl(self) -> float | None:
        """The lease TTL of the grant, or None: it lasts as long as its session."""
        lease = self._lease
        return None if lease is None else lease.ttl

    @lease_ttl.setter
    def lease_ttl(self, ttl: float | None) -> None:
        self._set_lease(ttl, self.lease_deadline)

    @property
    def lease_deadline(self) -> float | None:
        """When the lease runs out unless renewed (engine time); None without a lease."""
        lease = self._lease
        return None if lease is None else lease.deadline

    @lease_deadline.setter
    def lease_deadline(self, deadline: float | None) -> None:
        self._set_lease(self.lease_ttl, deadline)

    def _set_lease(self, ttl: float | None, deadline: float | None) -> None:
        lease = self._lease
        if ttl is None and deadline is None:
            self._lease = None
        elif lease is None:
            self._lease = Lease(ttl, deadline)  # type: ignore[arg-type]
        else:  # a renewal: the same lease, restarted
            lease.ttl, lease.deadline = ttl, deadline  # type: ignore[assignment]

    def _fields(self) -> tuple[object, ...]:
        lease = (self.lease_ttl, self.lease_deadline)
        return (self.key, self.count, self.data, self.token, lease, self.since)

    def __eq__(self, other: object) -> bool:
        if type(other) is not Owner:
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value

    def __repr__(self) -> str:
        return (
            f"Owner(session_id={self.session_id}, count={self.count}, data={self.data!r}, "
            f"token={self.token}, lease_ttl={self.lease_ttl}, "
            f"lease_deadline={self.lease_deadline}, hold={self.hold}, since={self.since})"
        )


@dataclass(slots=True)
class Waiter:
    """A queued acquire (for the session's hold number ``hold``)."""

    session_id: int
    request_id: int
    count: int
    data: bytes
    deadline: float | None  # None: waits forever
    lease_ttl: float | None
    hold: int = 0
    #: When the request was queued (engine time).
    since: float = 0.0
    #: Its :func:`holder_key`.
    key: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.key = holder_key(self.session_id, self.hold)


class Semaphore:
    """State of one semaphore. See the module docstring for the rules.

    Memory: a server may hold a hundred thousand of these (mostly held mutexes), so
    the common shapes cost no container of their own. ``_owners`` is None (nobody
    holds), the one Owner (the usual case: a held mutex), or a dict by session id
    (two or more, in grant order); ``_waiters`` is None while nobody waits, else a
    dict by session id in service order. Read them through :meth:`owner`,
    :meth:`waiter` and the read-only :attr:`owners` / :attr:`waiters` views.
    """

    __slots__ = (
        "_owners",
        "_waiters",
        "blocked_until",
        "count",
        "data",
        "ephemeral",
        "limit",
        "name",
    )

    def __init__(self, name: str, limit: int, data: bytes, *, ephemeral: bool) -> None:
        self.name = name
        self.limit = limit
        self.data = data
        self.ephemeral = ephemeral
        # Invariant: count == sum of owner counts <= limit.
        self._owners: Owner | dict[int, Owner] | None = None
        self.count = 0
        self._waiters: dict[int, Waiter] | None = None
        # Lock-delay: no grant while now < blocked_until.
        self.blocked_until = 0.0

    # -- queries --------------------------------------------------------------------

    def owner(self, key: int) -> Owner | None:
        """The hold of holder ``key`` (:func:`holder_key`), if it has one."""
        owners = self._owners
        if owners is None:
            return None
        if type(owners) is Owner:
            return owners if owners.key == key else None
        return owners.get(key)  # type: ignore[union-attr]

    def waiter(self, key: int) -> Waiter | None:
        """The queued request of holder ``key``, if it has one."""
        return None if self._waiters is None else self._waiters.get(key)

    @property
    def owners(self) -> Mapping[int, Owner]:
        """Holds by holder key, in grant order (a read-only view: do not keep it)."""
        owners = self._owners
        if owners is None:
            return _NOBODY
        if type(owners) is Owner:
            return {owners.key: owners}
        return owners  # type: ignore[return-value]

    def each_owner(self) -> Iterable[Owner]:
        """The holds in grant order, without making a view (for walks over every semaphore)."""
        owners = self._owners
        if owners is None:
            return ()
        if type(owners) is Owner:
            return (owners,)
        return owners.values()  # type: ignore[union-attr]

    @property
    def waiters(self) -> Mapping[int, Waiter]:
        """Queued requests by holder key, in service order (a read-only view)."""
        return _NOBODY if self._waiters is None else self._waiters

    def queue_length(self) -> int:
        """How many requests wait."""
        return 0 if self._waiters is None else len(self._waiters)

    def timed(self) -> bool:
        """Whether it has a deadline: a lock-delay, a queued request, or a leased hold.

        (Most semaphores have none: a rebuild of the deadline heap skips them at the
        cost of this one call.)
        """
        if self.blocked_until or self._waiters is not None:
            return True
        owners = self._owners
        if owners is None:
            return False
        if type(owners) is Owner:
            return owners._lease is not None
        return any(o._lease is not None for o in owners.values())  # type: ignore[union-attr]

    def is_idle(self) -> bool:
        """No owners and no waiters (an ephemeral semaphore may then vanish)."""
        return self._owners is None and self._waiters is None

    def fits(self, key: int, count: int, now: float) -> bool:
        """Could ``count`` tokens for holder ``key`` be granted now, ignoring the queue?"""
        if now < self.blocked_until:
            return False
        owner = self.owner(key)
        held = 0 if owner is None else owner.count
        return self.count - held + count <= self.limit

    def can_grant_now(self, key: int, count: int, now: float) -> bool:
        """Would a new request of holder ``key`` be granted at once (fits, nobody ahead)?

        A request that only shrinks or keeps an existing hold never waits: it takes
        no token from anyone.
        """
        owner = self.owner(key)
        if owner is not None and count <= owner.count:
            return True
        return self._waiters is None and self.fits(key, count, now)

    def describe(
        self, *, owners: bool, waiters: bool, sessions: Mapping[int, Session] | None = None
    ) -> SemaphoreDescription:
        """A snapshot, with owners and waiters listed only when asked for.

        Each owner and waiter carries its session's description and identity, looked
        up in ``sessions``, and its ``since`` in engine time (the host shows it in
        UNIX seconds: :func:`tenure._core.stamps.stamp_description`).
        """
        known = sessions or {}
        owner_infos: list[OwnerInfo] = []
        waiter_infos: list[WaiterInfo] = []
        if owners:
            for o in self.owners.values():
                session = known.get(o.session_id)
                description, identity = _who(session)
                owner_infos.append(
                    OwnerInfo(
                        o.session_id, o.count, o.data, o.token, description, identity, o.since
                    )
                )
        if waiters:
            for w in self.waiters.values():
                session = known.get(w.session_id)
                description, identity = _who(session)
                waiter_infos.append(
                    WaiterInfo(w.session_id, w.count, w.data, description, identity, w.since)
                )
        return SemaphoreDescription(
            name=self.name,
            limit=self.limit,
            count=self.count,
            data=self.data,
            ephemeral=self.ephemeral,
            owners=tuple(owner_infos),
            waiters=tuple(waiter_infos),
        )

    # -- changes --------------------------------------------------------------------

    def set_owner(self, owner: Owner) -> Owner | None:
        """Install ``owner`` (replacing its holder's earlier hold); returns the old hold."""
        sid = owner.key
        old = self.owner(sid)
        rest = self.count if old is None else self.count - old.count
        # ``rest + count`` would be a new int object per hold; mostly rest is 0.
        self.count = owner.count if rest == 0 else rest + owner.count
        owners = self._owners
        if owners is None or (old is not None and type(owners) is Owner):
            self._owners = owner
        elif type(owners) is Owner:
            self._owners = {owners.key: owners, sid: owner}
        else:
            assert isinstance(owners, dict)
            if old is not None and old.token != owner.token:
                # A new grant (an upgrade) goes to the back, keeping owners in grant
                # order; a restated grant (same token) keeps its place.
                del owners[sid]
            owners[sid] = owner
        assert self.count <= self.limit, "grant beyond the limit"
        return old

    def remove_owner(self, key: int) -> Owner | None:
        """Drop the hold of holder ``key``, if any."""
        owners = self._owners
        if owners is None:
            return None
        if type(owners) is Owner:
            if owners.key != key:
                return None
            self._owners = None
            self.count = 0
            return owners
        assert isinstance(owners, dict)
        owner = owners.pop(key, None)
        if owner is not None:
            self.count -= owner.count
            if len(owners) == 1:
                self._owners = next(iter(owners.values()))
        return owner

    def enqueue(self, waiter: Waiter) -> Waiter | None:
        """Queue ``waiter`` at the back; returns its holder's earlier waiter it replaces."""
        if self._waiters is None:
            self._waiters = {}
        key = waiter.key
        old = self._waiters.pop(key, None)
        self._waiters[key] = waiter
        return old

    def remove_waiter(self, key: int) -> Waiter | None:
        """Take the waiter of holder ``key`` out of the queue, if any."""
        waiters = self._waiters
        if waiters is None:
            return None
        waiter = waiters.pop(key, None)
        if not waiters:
            self._waiters = None
        return waiter

    def pop_grantable(self, now: float) -> Iterator[Waiter]:
        """Yield waiters from the head of the queue for as long as the head fits.

        Each yielded waiter is already out of the queue; the caller must install its
        owner before asking for the next one (the next fit depends on it).
        """
        while self._waiters:
            key, head = next(iter(self._waiters.items()))
            if not self.fits(key, head.count, now):
                return
            self.remove_waiter(key)
            yield head


#: The empty view of owners or waiters (shared, read-only).
_NOBODY: Mapping[int, Any] = MappingProxyType({})


def _who(session: Session | None) -> tuple[str, ClientIdentity]:
    """The description and identity a holder of ``session`` shows."""
    if session is None:  # (only a caller that passed no sessions)
        return "", NO_IDENTITY
    return session.description, session.identity
