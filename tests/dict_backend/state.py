"""The dict backend's state: nodes, semaphores, their owners and FIFO queues.

Everything lives in plain dicts and lists of one process, changed on its event loop
only (no locks: a change runs to its end between two awaits). A semaphore's queue
is served in arrival order and nobody overtakes its head (FIFO); every grant of a
node takes the node's next token (fencing tokens, strictly increasing).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tenure import ClientIdentity, NodeConfig, OwnerInfo, SemaphoreDescription, WaiterInfo
from tenure.backends import Grant
from tenure.errors import LostError, NotFoundError

#: The limit of an ephemeral semaphore (the contract's MAX_COUNT).
MAX_COUNT = 2**64 - 1


@dataclass(eq=False)
class Holder:
    """One session as its holds and waits show it (the session's own fields)."""

    session_id: int
    description: str
    identity: ClientIdentity


@dataclass(eq=False)
class Owner:
    """One hold of a semaphore: its session, hold number, token, count and data."""

    holder: Holder
    hold: int
    token: int
    count: int
    data: bytes
    since: float

    def grant(self) -> Grant:
        """The hold as the contract's Grant."""
        return Grant(self.token, self.count, None, self.hold)


@dataclass(eq=False)
class Waiter:
    """One request in a semaphore's queue; ``upgrade`` is the hold a restate replaces."""

    holder: Holder
    hold: int
    count: int
    data: bytes
    since: float
    done: asyncio.Future[Owner]
    upgrade: Owner | None = None


@dataclass(eq=False)
class Sem:
    """One semaphore: its limit, data, owners in grant order and queue in arrival order."""

    name: str
    limit: int
    data: bytes
    ephemeral: bool
    owners: list[Owner] = field(default_factory=list)
    queue: list[Waiter] = field(default_factory=list)

    def held(self) -> int:
        """Tokens held now."""
        return sum(owner.count for owner in self.owners)

    def fits(self, count: int, upgrade: Owner | None) -> bool:
        """Whether ``count`` tokens fit now (an upgrade's own tokens count as free)."""
        mine = upgrade.count if upgrade is not None and upgrade in self.owners else 0
        return count <= self.limit - self.held() + mine

    def describe(self, *, owners: bool, waiters: bool) -> SemaphoreDescription:
        """Its state as the contract describes it."""
        return SemaphoreDescription(
            self.name,
            self.limit,
            self.held(),
            self.data,
            self.ephemeral,
            owners=tuple(_owner_info(o) for o in self.owners) if owners else (),
            waiters=tuple(_waiter_info(w) for w in self.queue) if waiters else (),
        )


def _owner_info(owner: Owner) -> OwnerInfo:
    h = owner.holder
    return OwnerInfo(
        h.session_id, owner.count, owner.data, owner.token, h.description, h.identity, owner.since
    )


def _waiter_info(waiter: Waiter) -> WaiterInfo:
    h = waiter.holder
    return WaiterInfo(
        h.session_id, waiter.count, waiter.data, h.description, h.identity, waiter.since
    )


def missing(name: str) -> SemaphoreDescription:
    """What a watch of a semaphore that does not exist sees."""
    return SemaphoreDescription(name, 0, 0, b"", False, exists=False)


@dataclass(eq=False)
class Node:
    """A node: its settings, semaphores by name, and where its fencing tokens come from.

    ``changed`` is told the name of every semaphore whose state changed (the
    sessions' watches hear of it through it); ``lost``, each hold a forced delete
    takes, with its semaphore's name and the error (its session's listener hears it).
    """

    name: str
    config: NodeConfig
    next_token: Callable[[], int]
    changed: Callable[[str], None]
    lost: Callable[[Owner, str, LostError], None]
    semaphores: dict[str, Sem] = field(default_factory=dict)

    def semaphore(self, name: str) -> Sem:
        """The semaphore ``name``; NotFoundError if missing."""
        sem = self.semaphores.get(name)
        if sem is None:
            raise NotFoundError(f"semaphore {name!r} does not exist")
        return sem

    def grant(self, sem: Sem, waiter: Waiter) -> Owner:
        """Make ``waiter`` an owner of ``sem`` with the node's next token (an upgrade
        replaces the hold it upgrades)."""
        if waiter.upgrade is not None and waiter.upgrade in sem.owners:
            sem.owners.remove(waiter.upgrade)
        token = self.next_token()
        owner = Owner(waiter.holder, waiter.hold, token, waiter.count, waiter.data, now())
        sem.owners.append(owner)
        return owner

    def serve(self, sem: Sem) -> None:
        """Grant the queue's head while it fits (FIFO: none overtakes it); then delete
        an ephemeral semaphore nobody holds or waits for. Tells ``changed``."""
        while sem.queue and sem.fits(sem.queue[0].count, sem.queue[0].upgrade):
            waiter = sem.queue.pop(0)
            waiter.done.set_result(self.grant(sem, waiter))
        if sem.ephemeral and not sem.owners and not sem.queue:
            self.semaphores.pop(sem.name, None)
        self.changed(sem.name)

    def remove(self, sem: Sem, error: LostError) -> None:
        """Delete ``sem`` by force: its waiters fail (NotFoundError), each owner is
        :attr:`lost`."""
        del self.semaphores[sem.name]
        for waiter in sem.queue:
            if not waiter.done.done():
                waiter.done.set_exception(NotFoundError(f"semaphore {sem.name!r} was deleted"))
        sem.queue.clear()
        for owner in list(sem.owners):
            self.lost(owner, sem.name, error)
        sem.owners.clear()
        self.changed(sem.name)


def now() -> float:
    """UNIX seconds: when a hold was granted or a request queued."""
    return time.time()
