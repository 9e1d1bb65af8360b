"""The sync leases: a :class:`Lease` and its kinds (:class:`Lock`, :class:`ReadLock`,
:class:`WriteLock`, :class:`Leadership`)."""

from __future__ import annotations

from typing import Protocol, TypeVar

from tenure import client as aio
from tenure.client._args import Data
from tenure.errors import LostError, PreconditionFailedError
from tenure.sync._held import Held
from tenure.sync._portal import Portal


class LeaseSession(Protocol):
    """The sync session a lease belongs to (a :class:`tenure.sync.Session`), as the
    lease sees it: its id, and the portal the lease's calls go through.

    Typed with this protocol, not the session, so that the session's module makes
    leases while this one never imports it (``tests/test_import_graph.py``).
    """

    @property
    def id(self) -> int:
        """The backend's id of the session."""
        ...

    @property
    def portal(self) -> Portal:
        """The loop thread of the session's client."""
        ...


W = TypeVar("W", bound="Lease")


class RecipeSession(LeaseSession, Protocol):
    """The sync session as a recipe sees it: a lease session that keeps the one sync
    wrapper of each of its leases (a :class:`tenure.sync.Session`; a protocol, so that
    the session's module makes recipes while theirs never import it)."""

    def keep_lease(self, lease: W) -> W:
        """Keep ``lease`` as its async lease's one sync twin; ``lease``."""
        ...


class Lease(Held):
    """``count`` tokens of semaphore ``name`` with fencing ``token`` (see :class:`tenure.Lease`).

    ``with lease:`` releases it at the end, raising the loss error if it was lost
    meanwhile.
    """

    def __init__(self, session: LeaseSession, lease: aio.Lease) -> None:
        super().__init__(session.portal, lease.lost)
        self._lease = lease
        #: The session that holds it (a :class:`tenure.sync.Session`).
        self.session = session
        self.name = lease.name
        self.token = lease.token
        self.count = lease.count

    def __repr__(self) -> str:
        return f"<sync {self._lease!r}>"

    @property
    def data(self) -> bytes:
        """This holder's data."""
        return self._lease.data

    @property
    def held(self) -> bool:
        """Whether it is still held."""
        return not self.ended

    def restate(
        self, count: int | None = None, *, data: Data | None = None, timeout: float | None = None
    ) -> None:
        """Change this hold in place: count, data or both (see :meth:`tenure.Lease.restate`).

        Fewer tokens or new data apply at once with the same token; more tokens wait
        for ``timeout`` and then give the lease a new, greater :attr:`token`.
        """
        self._portal.call(self._lease.restate, count, data=data, timeout=timeout)
        self.token, self.count = self._lease.token, self._lease.count

    def handoff(self) -> str:
        """A string with which another session, of any client or process, takes this
        hold over under a new, greater token (see :meth:`tenure.Lease.handoff`): pass
        it as a secret; whoever has it can take the hold, once."""
        return self._portal.call(self._lease.handoff)

    def release(self, *, wait: bool = True) -> None:
        """Give the tokens back. Idempotent; a no-op once lost.

        Returns once the backend has applied it, or the session has ended;
        ``wait=False``: once it is under way, as leaving ``with`` does (see
        :meth:`tenure.Lease.release`). After
        leaving ``with``, whose release is under way, it waits for that release.
        A hold the store ended before the release reached it (adopted, its
        ``max_hold`` passed, deleted by force) is told as :attr:`lost_reason` once
        this returns, where the store tells it (see :meth:`tenure.Lease.release`).
        """
        # Ended, it may still have a release to wait for (the one leaving ``with``
        # started): the async release knows, and returns at once if none is under way.
        if self.ended and self._portal.closed:
            return  # the client closed: every release ended with it
        reason = self._portal.call(_release, self._lease, wait)
        if reason is not None:  # the store had ended the hold first (async release())
            self.lost.lost_first(reason)

    def _check_enter(self) -> None:
        if self.ended and self.lost_reason is None:
            raise PreconditionFailedError(f"{self!r} was released; acquire it again")

    def _finish(self) -> None:
        # Leaving ``with`` does what leaving ``async with`` does: no wait for the
        # release's answer where the backend keeps the client's requests in order.
        if not self.ended:
            self._portal.call(self._lease._leave)


class Lock(Lease):
    """An exclusive hold of a mutex; ``token`` is its fencing token."""


class WriteLock(Lock):
    """The writer's hold of a readers-writer lock (see :class:`tenure.WriteLock`);
    ``restate(1)`` downgrades it to a reader's share, keeping its token."""


class ReadLock(Lease):
    """A reader's share of a readers-writer lock (see :class:`tenure.ReadLock`)."""


class Leadership(Lease):
    """Leadership of an election (see :class:`tenure.Leadership`); ``with`` resigns at the end.

    Lost leadership (other than by the session's loss) is a LeaderChangedError.
    """

    def __init__(self, session: LeaseSession, leadership: aio.Leadership) -> None:
        super().__init__(session, leadership)
        self._leadership = leadership

    def proclaim(self, data: Data) -> None:
        """Replace the leader's data in place (same token)."""
        self._portal.call(self._leadership.proclaim, data)

    def resign(self) -> None:
        """Step down (the same as :meth:`release`)."""
        self.release()


async def _release(lease: aio.Lease, wait: bool) -> LostError | None:
    """``lease.release(wait=wait)``, then its loss, if the store had ended it first."""
    await lease.release(wait=wait)
    return lease.lost_reason
