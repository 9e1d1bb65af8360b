"""The backend session's core: what every backend must do (:class:`CoreSession`).

**The core** (ten members) is what the client cannot do without: every recipe that
can be written at all is written over it, so a backend that implements only the
core (a third party's, say) locks, counts, elects, joins groups and watches. The
ten, and why each is in:

1. ``session_id`` and 2. ``recovery_window``: what the client shows of the session
   (owners and waiters name sessions by id; ``Session.recovery_window``). Two
   read-only values, kept as two members rather than one record: every backend has
   both at hand, and a record would be one more type to build for nothing.
3. ``acquire`` (a new hold, with its wait, timeout and ephemeral semaphore): the one
   primitive every lock is made of. Whose caller asks (the ``task`` number) is an
   ability (:class:`~tenure.backends._abilities.TaskNumbers`): a backend that does
   not look for deadlocks has no use for it.
4. ``restate``: a hold changed in place, keeping its token (a reader's count, a
   member's data). Not buildable over acquire and release: between the two the
   hold would be nobody's, and its token would change.
5. ``release``: the end of one hold.
6. ``deadline_passed``: the session's keep-alive as the client sees it (the
   backend keeps the session alive by itself; the client asks before it acts as a
   holder whether the local deadline passed, so that it never believes in its holds
   longer than the store could keep them). A store that never loses a session
   (a dict in this process) answers False.
7. ``describe_semaphore``: the one read.
8. ``write_semaphore``: every change to a semaphore that is not a hold, as one
   member taking one of four small values (:data:`SemaphoreWrite`: create, update
   the data, compare-and-set the data, delete). Four members before; one now,
   because a backend writes them alike (a row, a key, a command) and a new kind of
   write is a new value, not a new member every backend must grow. The
   compare-and-set is what counters, latches, barriers and rate limiters are built
   over.
9. ``watch_semaphore``: news of one semaphore pushed as it happens (or, on a
   backend without :attr:`~tenure.backends._base.Capability.WATCH`, found by
   reading back: the stream is the same).
10. ``close``: the session's end, every hold released.

What is left out of the core is what the code shows can be done without, or built
over it: each is an ability (:mod:`tenure.backends._abilities`). Each member's
meaning is stated here, once; :class:`~tenure.backends._base.BackendSession`, the
full set, is this protocol and every ability composed.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Protocol

from tenure._core.values import SemaphoreDescription
from tenure.backends._grants import Grant
from tenure.backends._watch_streams import WatchStream
from tenure.backends._writes import SemaphoreWrite

__all__ = ["CoreSession"]


class CoreSession(Protocol):
    """One session: an owner of grants, alive while its client is or for its window;
    the ten members every backend session has (module docstring: why these ten).

    While the connection to the backend is lost, the backend keeps the session for
    its recovery window and re-attaches it by itself when it can (with
    :attr:`Capability.SESSION_RECOVERY`); calls made meanwhile wait for that, within
    the window. If the window passes, the listener hears :meth:`session_lost
    <tenure.backends._grants.SessionListener.session_lost>`, and every call raises
    the loss error.
    """

    @property
    def session_id(self) -> int:
        """The backend's id of this session, as owners and waiters show it."""

    @property
    def recovery_window(self) -> float:
        """The window in force, in seconds: the one asked for (or the node's default)
        as the backend keeps it (``etcd://`` rounds it up to whole seconds, 2 at least)."""

    async def acquire(
        self, name: str, *, count: int, data: bytes, timeout: float | None, ephemeral: bool
    ) -> Grant | None:
        """A new hold of ``count`` tokens of semaphore ``name``, with owner data ``data``.

        A session may hold a semaphore more than once: each acquire is a hold of its
        own, an owner or waiter like another session's (two holds of one session
        queue behind each other in arrival order). :attr:`Grant.hold` names it for
        :meth:`restate`, :meth:`release` and ``renew`` (:class:`LeaseRenewal
        <tenure.backends._abilities.LeaseRenewal>`).

        ``timeout`` is how long to wait, by the backend's clock (None: forever; 0:
        only try, returning None if the tokens are not free now or others wait).
        A waiting request is served in arrival order (with :attr:`Capability.FIFO`).
        ``ephemeral`` creates a missing semaphore with the largest limit; it is
        deleted when its last owner and waiter are gone. Who asks (``task``) is
        :class:`~tenure.backends._abilities.TaskNumbers`'.

        Raises TimeoutError when a positive timeout passes, NotFoundError for a
        missing semaphore that is not ephemeral, LimitExceededError if ``count``
        exceeds the limit or the queue is full. If the awaiting task is cancelled,
        the request is withdrawn (a grant that raced the cancellation is released),
        so a cancelled acquire never leaves a hold behind.
        """

    async def restate(
        self, name: str, grant: Grant, *, count: int, data: bytes, timeout: float | None
    ) -> Grant | None:
        """Change the hold ``grant`` in place: its count, its data, or both.

        No more tokens than held, or new data, apply at once and keep the token.
        More tokens queue as an upgrade (``timeout`` as for :meth:`acquire`) that,
        once granted, replaces the hold with a new token; until then, and if the
        upgrade fails or is cancelled, the hold stays as it was. Returns the hold's
        new Grant (None: ``timeout`` 0 and the tokens are not free).
        """

    def release(self, name: str, grant: Grant) -> Awaitable[bool]:
        """Drop the hold ``grant`` (and a queued upgrade of it); await whether it was there.

        Started before it returns: the hold is the session's no more, and the
        release is sent until the store answers (or the session ends), whether or
        not anyone awaits the answer. A session whose ``releases_in_order`` is true
        (an optional attribute: false if missing) sends it before this returns, so
        the client's later requests reach the store after it (``tenure://``,
        ``memory://``, ``redis://``); leaving ``async with`` then does not wait for
        the answer.
        """

    def deadline_passed(self) -> bool:
        """Give the session up if its local deadline passed (the listener hears
        ``session_lost`` before this returns); whether the session has ended.

        The deadline's timer may not have run yet when the client asks (its event
        loop was blocked past the window): a client that is about to act as a holder
        (a release) asks first, so that it never believes in its holds longer than
        the store could keep them.
        """

    async def describe_semaphore(
        self, name: str, *, owners: bool, waiters: bool
    ) -> SemaphoreDescription:
        """Describe a semaphore (owners in grant order, waiters in service order).

        NotFoundError if missing.
        """

    async def write_semaphore(self, name: str, write: SemaphoreWrite) -> bool:
        """Create a persistent semaphore, replace its data, compare-and-set it, or delete
        it: ``write`` is one of the four kinds (:data:`SemaphoreWrite`, each kind's
        meaning and errors in its docstring); whether it did (False only for a
        :class:`~tenure.backends._writes.SwapWrite` whose data was not its
        ``expected``)."""

    async def watch_semaphore(
        self, name: str, *, data: bool, owners: bool, waiters: bool
    ) -> WatchStream:
        """Arm a watch on the semaphore's data, owners and/or waiters (:class:`WatchStream`).

        Every state has owners and waiters listed if watched. The stream survives
        reconnects; LimitExceededError if the session watches too much already.
        """

    async def close(self) -> None:
        """End the session: every hold is released and every request withdrawn. Idempotent.

        The listener hears nothing: the client asked for it.
        """
