"""One semaphore: its holders, its FIFO queue, and the rule that serves the queue. [compiled]

Theory of operation
-------------------
A semaphore has ``limit`` tokens. Owners hold ``count`` tokens each; the sum of
their counts is ``self.count`` and never exceeds ``limit``. Waiters queue in arrival
order, at most one per hold of a session, and are served strictly first-in first-out: the
head is granted as soon as its count fits, and *nothing* behind the head is granted
while the head does not fit, however small (no barging). This is what makes a
large request at the head starve nobody and be starved by nobody. (A head that is a
member of an all-or-none set waits, besides, until the set's other members
head their queues and fit there: :func:`tenure._core.shared_steps.settle`.)

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

from collections import OrderedDict
from collections.abc import Iterable, Mapping

from tenure._core.holders import Owner as Owner
from tenure._core.holders import Waiter as Waiter
from tenure._core.holders import (
    charge_data,
    forget_hold,
    owner_infos,
    waiter_infos,
)
from tenure._core.holders import holder_key as holder_key
from tenure._core.quotas import Q_DATA_BYTES, Q_HOLDS
from tenure._core.semaphore_fields import NO_HOLDERS, SemaphoreFields, SemaphoreRest
from tenure._core.session import Session
from tenure._core.values import MAX_COUNT, SemaphoreDescription


class Semaphore(SemaphoreFields):
    """State of one semaphore. See the module docstring for the rules, and
    :class:`~tenure._core.semaphore_fields.SemaphoreFields` for how its fields are kept
    (a held mutex in five). Read its holders through :meth:`owner`, :meth:`waiter` and
    the read-only :attr:`owners` / :attr:`waiters` views.
    """

    __slots__ = ()

    # -- queries --------------------------------------------------------------------

    def set_data(self, data: bytes) -> None:
        """Its data is now ``data`` (counted against its owner's ``data_bytes``)."""
        usage = self.usage
        if usage is not None and usage.live:
            usage.add(Q_DATA_BYTES, len(data) - len(self.data))
        self._own_rest().data = data
        self._tidy()

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
        rest = self._rest  # (read in place: no property call on the hot path)
        waiters = rest.waiters if isinstance(rest, SemaphoreRest) else None
        return None if waiters is None else waiters.get(key)

    @property
    def owners(self) -> Mapping[int, Owner]:
        """Holds by holder key, in grant order (a read-only view: do not keep it)."""
        owners = self._owners
        if owners is None:
            return NO_HOLDERS
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
        rest = self._rest
        waiters = rest.waiters if isinstance(rest, SemaphoreRest) else None
        return NO_HOLDERS if waiters is None else waiters

    def queue_length(self) -> int:
        """How many requests wait."""
        rest = self._rest
        waiters = rest.waiters if isinstance(rest, SemaphoreRest) else None
        return 0 if waiters is None else len(waiters)

    def timed(self) -> bool:
        """Whether it has a deadline: a lock-delay, a queued request, or a leased hold.

        (Most semaphores have none: a rebuild of the deadline heap skips them at the
        cost of this one call.)
        """
        rest = self._rest
        if isinstance(rest, SemaphoreRest) and (rest.blocked_until or rest.waiters is not None):
            return True
        owners = self._owners
        if owners is None:
            return False
        if type(owners) is Owner:
            return owners.leased
        return any(o.leased for o in owners.values())  # type: ignore[union-attr]

    def is_idle(self) -> bool:
        """No owners and no waiters (an ephemeral semaphore may then vanish)."""
        rest = self._rest
        return self._owners is None and (
            not isinstance(rest, SemaphoreRest) or rest.waiters is None
        )

    def vanishes(self, now: float) -> bool:
        """Whether it goes now, as an idle ephemeral semaphore does (nobody holds or
        waits, and no lock-delay runs at ``now``): one question, one call."""
        rest = self._rest
        if not isinstance(rest, SemaphoreRest):  # (an ephemeral mutex's defaults)
            return self._owners is None
        return (
            rest.ephemeral
            and self._owners is None
            and rest.waiters is None
            and now >= rest.blocked_until
        )

    def fits(self, key: int, count: int, now: float) -> bool:
        """Could ``count`` tokens for holder ``key`` be granted now, ignoring the queue?"""
        rest = self._rest
        kept = rest if isinstance(rest, SemaphoreRest) else None
        if kept is not None and now < kept.blocked_until:
            return False
        owner = self.owner(key)
        held = 0 if owner is None else owner.count
        return self.count - held + count <= (MAX_COUNT if kept is None else kept.limit)

    def can_grant_now(self, key: int, count: int, now: float) -> bool:
        """Would a new request of holder ``key`` be granted at once (fits, nobody ahead)?

        A request that only shrinks or keeps an existing hold never waits: it takes
        no token from anyone.
        """
        # (its owner and count, and fits, inline: the hot path's question, asked with
        # no further call)
        owners = self._owners
        rest = self._rest
        kept = rest if isinstance(rest, SemaphoreRest) else None
        if owners is None:
            owner, total = None, 0
        elif type(owners) is Owner:
            owner, total = (owners if owners.key == key else None), owners.count
        else:
            assert kept is not None  # (two owners or more keep their sum there)
            owner, total = owners.get(key), kept.count  # type: ignore[union-attr]
        if owner is not None and count <= owner.count:
            return True
        if kept is not None and (kept.waiters is not None or now < kept.blocked_until):
            return False
        held = 0 if owner is None else owner.count
        return total - held + count <= (MAX_COUNT if kept is None else kept.limit)

    def describe(
        self, *, owners: bool, waiters: bool, sessions: Mapping[int, Session] | None = None
    ) -> SemaphoreDescription:
        """A snapshot, with owners and waiters listed only when asked for.

        Each owner and waiter carries its session's description and identity, looked
        up in ``sessions``, and its ``since`` in engine time (the host shows it in
        UNIX seconds: :func:`tenure._core.stamps.stamp_description`).
        """
        known = sessions or {}
        return SemaphoreDescription(
            name=self.name,
            limit=self.limit,
            count=self.count,
            data=self.data,
            ephemeral=self.ephemeral,
            owners=owner_infos(self.each_owner(), known) if owners else (),
            waiters=waiter_infos(self.waiters.values(), known) if waiters else (),
        )

    # -- changes --------------------------------------------------------------------

    def set_owner(self, owner: Owner) -> Owner | None:
        """Install ``owner`` (replacing its holder's earlier hold); returns the old hold."""
        sid = owner.key
        owners = self._owners  # (its holder's hold, inline: no call on the hot path)
        if owners is None:
            old = None
        elif type(owners) is Owner:
            old = owners if owners.key == sid else None
        else:
            old = owners.get(sid)  # type: ignore[union-attr]
        if owners is None or (old is not None and type(owners) is Owner):
            self._owners = owner  # (its count is the semaphore's: no sum kept)
            total = owner.count
        elif type(owners) is Owner:
            kept = self._own_rest()  # (two owners: their sum is kept there)
            total = kept.count = owners.count + owner.count
            self._owners = {owners.key: owners, sid: owner}
        else:
            assert isinstance(owners, dict)
            kept = self._own_rest()
            if old is not None:
                kept.count -= old.count
                if old.token != owner.token:
                    # A new grant (an upgrade) goes to the back, keeping owners in grant
                    # order; a restated grant (same token) keeps its place.
                    del owners[sid]
            kept.count += owner.count
            total = kept.count
            owners[sid] = owner
        rest = self._rest
        limit = rest.limit if isinstance(rest, SemaphoreRest) else MAX_COUNT
        assert total <= limit, "grant beyond the limit"
        usage = owner.usage
        if old is None and usage is not None and usage.live:  # (a new hold, not restated)
            usage.add(Q_HOLDS, 1)
        if owner.data:  # (most holds have none: no call)
            charge_data(owner.usage, len(owner.data))
        if old is not None and old.data:  # (most holds have none: no call)
            charge_data(old.usage, -len(old.data))
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
            if owners.usage is not None and owners.usage.live:  # (else no call: counted nowhere)
                forget_hold(owners)
            return owners
        assert isinstance(owners, dict)
        owner = owners.pop(key, None)
        if owner is not None:
            kept = self._own_rest()  # (it has one: two owners or more keep their sum there)
            kept.count -= owner.count
            if owner.usage is not None and owner.usage.live:  # (else no call: counted nowhere)
                forget_hold(owner)
            if len(owners) == 1:
                self._owners = next(iter(owners.values()))
                self._tidy()
        return owner

    def enqueue(self, waiter: Waiter) -> Waiter | None:
        """Queue ``waiter`` at the back; returns its holder's earlier waiter it replaces."""
        rest = self._own_rest()
        waiters = rest.waiters
        if waiters is None:
            waiters = rest.waiters = OrderedDict()
        key = waiter.key
        old = waiters.pop(key, None)
        waiters[key] = waiter
        if waiter.data:  # (most holds have none: no call)
            charge_data(waiter.usage, len(waiter.data))
        if old is not None and old.data:  # (most holds have none: no call)
            charge_data(old.usage, -len(old.data))
        return old

    def restate_waiter(self, waiter: Waiter) -> None:
        """Replace its holder's queued request with ``waiter``, in the same place."""
        rest = self._rest
        waiters = rest.waiters if isinstance(rest, SemaphoreRest) else None
        assert waiters is not None, "restating a request of an empty queue"
        assert waiter.key in waiters, "restating a request not queued"
        old = waiters[waiter.key]
        waiters[waiter.key] = waiter  # (an existing key keeps its place in a dict)
        if old.data:  # (most holds have none: no call)
            charge_data(old.usage, -len(old.data))
        if waiter.data:  # (most holds have none: no call)
            charge_data(waiter.usage, len(waiter.data))

    def is_head(self, key: int) -> bool:
        """Whether holder ``key``'s request is first in the queue."""
        rest = self._rest
        waiters = rest.waiters if isinstance(rest, SemaphoreRest) else None
        return waiters is not None and next(iter(waiters)) == key

    def remove_waiter(self, key: int) -> Waiter | None:
        """Take the waiter of holder ``key`` out of the queue, if any."""
        rest = self._rest
        waiters = rest.waiters if isinstance(rest, SemaphoreRest) else None
        if waiters is None:
            return None
        waiter = waiters.pop(key, None)
        if not waiters:
            assert isinstance(rest, SemaphoreRest)  # (it has the waiters)
            rest.waiters = None
            self._tidy()
        if waiter is not None and waiter.data:  # (most holds have none: no call)
            charge_data(waiter.usage, -len(waiter.data))
        return waiter

    def forget_holders_data(self) -> None:
        """It is dropped with its owners and waiters: their data counts no longer."""
        for owner in self.each_owner():
            forget_hold(owner)
        for waiter in self.waiters.values():
            if waiter.data:  # (most holds have none: no call)
                charge_data(waiter.usage, -len(waiter.data))

    def head(self) -> Waiter | None:
        """The first request in the queue, if any (served next, when it fits)."""
        rest = self._rest
        waiters = rest.waiters if isinstance(rest, SemaphoreRest) else None
        return None if waiters is None else next(iter(waiters.values()))
