"""A lease: tokens of a semaphore held by a session, with its fencing token.

:class:`Lock` (from a mutex), :class:`ReadLock` and :class:`WriteLock` (from a
readers-writer lock) and :class:`Leadership` (from an election) are leases too;
all of them end the same way, through one :class:`EndSignal`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import replace
from functools import partial
from typing import Protocol, TypeVar

from tenure._core.values import check_max_hold
from tenure.backends._base import CoreSession, Grant, lease_renewal
from tenure.client import _args
from tenure.client._args import Data
from tenure.client._caller import Caller
from tenure.client._loss import CancelOnLoss, EndSignal, Guarded
from tenure.client._opening import Opening
from tenure.errors import (
    InvalidArgumentError,
    LeaderChangedError,
    LeaseLostError,
    LostError,
    PreconditionFailedError,
    TenureError,
)


class LeaseKeeper(Protocol):
    """What a lease needs of the session that holds it (a :class:`~tenure.client.Session`).

    The session makes its leases and keeps them by token; a lease gives its grant
    back, restates and renews it through the session, and tells it when it ended.
    Typed with this protocol, not the session, so that the session's module imports
    this one and never the other way round (``tests/test_import_graph.py``).
    """

    @property
    def id(self) -> int:
        """The backend's id of the session."""
        ...

    def _backend_session(self) -> CoreSession:
        """The backend's session; the session's loss error once it has ended."""
        ...

    def _release(self, lease: Lease) -> Awaitable[bool] | None:
        """Give ``lease``'s grant back: the release to await (None: it ended with the session)."""
        ...

    def _deadline_passed(self) -> bool:
        """Give the session up if its local deadline passed, its timer not run yet (its
        leases end lost, with its loss); whether the session has ended."""
        ...

    @property
    def _releases_in_order(self) -> bool:
        """Whether the backend sends a release ahead of the client's next request."""
        ...

    async def _restate(self, lease: Lease, count: int, data: bytes, timeout: float | None) -> Grant:
        """Change ``lease``'s count or data through the backend; the new grant."""
        ...

    def _forget(self, lease: Lease) -> None:
        """``lease`` ended: stop tracking it."""
        ...

    async def _handoff(self, lease: Lease) -> str:
        """Offer ``lease``'s hold for adoption through the backend; the hand-off string."""
        ...


L = TypeVar("L", bound="Lease")


class LeaseMaker(Protocol):
    """What makes a new lease in a session (a :class:`~tenure.client.Session`): the
    acquire of arguments already checked. Declared once, here, for the protocols of
    those that call it: a recipe's (:class:`~tenure.client._recipe_session.RecipeSession`)
    and the session's own, for a reentrant mutex's new hold."""

    async def _acquire(
        self,
        kind: type[L],
        name: str,
        count: int,
        data: bytes,
        timeout: float | None,
        ephemeral: bool,
        max_hold: float | None = None,
    ) -> L:
        """A new lease of ``kind`` (see :meth:`tenure.Session.acquire`, which checks
        the arguments first; the mutex's hot path calls this with them checked)."""
        ...


def open_lease(
    maker: LeaseMaker,
    name: str,
    count: int,
    data: Data,
    timeout: float | None,
    ephemeral: bool,
    kind: type[L],
    max_hold: float | None = None,
) -> Opening[L]:
    """A new lease of ``kind`` in ``maker``'s session, its arguments checked now (the
    one acquire :meth:`tenure.Session.acquire` and the recipes make; see it): bad
    ones raise InvalidArgumentError before anything is awaited."""
    name = _args.semaphore_name(name)
    count = _args.count(count)
    owner_data = _args.as_data(data)
    timeout = _args.timeout(timeout)
    ephemeral = _args.flag("ephemeral", ephemeral)
    if not (isinstance(kind, type) and issubclass(kind, Lease)):
        raise InvalidArgumentError(f"kind must be a Lease subclass, got {kind!r}")
    bound = check_max_hold(max_hold)
    return Opening(
        partial(maker._acquire, kind, name, count, owner_data, timeout, ephemeral, bound),
        "acquire(...)",
        "lease",
    )


def shared_grant(lease: Lease) -> Grant:
    """``lease``'s grant as a lease that shares its hold is made with (a reentrant
    mutex's nested acquisitions, :mod:`tenure.client._reentrant`): its token, count
    and hold number, without its TTL (``lease`` keeps the hold renewed; a sharer
    never renews it)."""
    return replace(lease._grant, lease_ttl=None)


def start_release(lease: Lease) -> asyncio.Future[bool] | None:
    """End ``lease`` and start its release, without waiting for the backend's answer:
    that answer (a future the session settles), or None when there is nothing to
    release (it ended already, or went with its session).

    What leaving ``async with lease`` does where the backend keeps a session's requests
    in order: the release is sent before this returns, so whatever this session asks
    next reaches the backend after it. Until the backend has applied it, another
    client may still see the tokens taken. For code that cannot wait (a callback, a
    failure path); ``await lease.release()`` waits. Public as
    :func:`tenure.lowlevel.start_release`.
    """
    return lease._release_soon()


class Lease(Guarded):
    """``count`` tokens of semaphore ``name``, held by ``session`` since the grant of ``token``.

    ``token`` is the fencing token: strictly greater than that of every earlier
    grant. Pass it to the resource you protect and have it refuse smaller ones; a
    lease alone cannot stop a paused process from acting late.

    Use ``async with lease:`` (or ``async with sem.acquire(...) as lease:``) to run a
    block that is cancelled if the lease is lost, raising the loss error.
    """

    def __init__(
        self, session: LeaseKeeper, name: str, grant: Grant, data: bytes, *, resumed: bool = False
    ) -> None:
        #: The session that holds it (a :class:`~tenure.client.Session`).
        self.session = session
        self.name = name
        self.token = grant.token
        self.count = grant.count
        self.data = data
        self._grant = grant  # the backend's, for restating, releasing and renewing
        # Who acquired it: the task, or the sync face's thread (None: resumed, nobody's).
        self._caller: Caller = None
        self._signal = EndSignal()
        self._scopes: list[CancelOnLoss] = []
        self._renewer: asyncio.Task[None] | None = None
        self._releasing: asyncio.Future[bool] | None = None  # the release's answer, once released
        if grant.lease_ttl is not None:
            # A resumed hold was last renewed by the process that died, up to a whole
            # TTL ago: renewed at once, not a third of a TTL from now.
            first = 0.0 if resumed else grant.lease_ttl / 3
            self._renewer = asyncio.create_task(self._keep_renewed(grant.lease_ttl, first))

    def __repr__(self) -> str:
        state = "held" if not self._signal.ended else f"ended({self._signal.reason!r})"
        kind = type(self).__name__
        return f"<{kind} {self.name!r} token={self.token} count={self.count} {state}>"

    @property
    def held(self) -> bool:
        """Whether the lease is still held."""
        return not self._signal.ended

    async def release(self, *, wait: bool = True) -> None:
        """Give the tokens back. Idempotent; a no-op once the lease was lost.

        A hold the store ended before the release reached it (adopted by another
        session after :meth:`handoff`, its ``max_hold`` passed, deleted by force) is
        not given back by it: where the store tells that loss (``tenure://``,
        ``memory://``), :attr:`lost_reason` is the loss once this returns (also
        after leaving ``async with``, whose release it waits for), though the
        lease's ``lost`` awaiters and callbacks were told of the release.

        Returns once the backend has applied the release (from then on, every
        client sees the tokens free), or once the session has ended (one given up
        on the client's clock ends on the server later: "Releasing" in
        docs/concepts.md). After leaving
        ``async with``, whose release is under way but perhaps not applied yet,
        ``release()`` waits for it. ``wait=False`` returns as soon as the release
        is under way, as leaving ``async with`` does: see :meth:`_release_soon`
        and "Releasing" in docs/concepts.md.
        """
        self._release_soon()
        releasing = self._releasing
        if releasing is None:
            return
        if not releasing.done():
            if not wait:
                return
            try:
                # Shielded: a waiter that is cancelled stops waiting, not the release.
                await _shielded(releasing)
            except LeaseLostError as error:  # the store had ended the hold first
                self._signal.lost_first(self._translate(error))
            except LostError:  # (not contextlib.suppress: three calls more per release)
                return
        elif not releasing.cancelled():  # answered already (leaving ``async with``)
            answer = releasing.exception()
            if isinstance(answer, LeaseLostError):
                self._signal.lost_first(self._translate(answer))

    def _release_soon(self) -> asyncio.Future[bool] | None:
        """End the lease and start its release; the backend's answer, or None (nothing
        to release: the lease ended already, or went with its session).

        The session sends the release until the backend answers or the session
        ends. On ``tenure://``, ``memory://`` and ``redis://`` it is sent before this
        returns, so whatever this client asks next reaches the server after it; this session's
        next acquire of the same name queues behind it. Until the backend has
        applied it, another client may still see the tokens taken (usually one
        round trip).
        """
        if self._signal.ended:
            return None
        # A loop blocked past the session's window (its deadline's timer not run yet)
        # must not release as a holder what the server may have expired and granted
        # to another meanwhile: the lease was lost, and says so (promise 6a).
        if self.session._deadline_passed() and self._signal.ended:
            return None
        if self._renewer is not None:  # (_finish, inline: on every release)
            self._renewer.cancel()
            self._renewer = None
        self._signal.end(None)
        try:
            releasing = self.session._release(self)
            if releasing is not None:
                if not isinstance(releasing, asyncio.Future):
                    # A coroutine, from another backend: it must run even if nobody waits.
                    releasing = asyncio.ensure_future(releasing)
                    releasing.add_done_callback(_seen)
                elif not self.session._releases_in_order:
                    releasing.add_done_callback(_seen)
                # (else tenure's own in-order backends, whose StoreSession marks every
                # answer seen as it settles it: no callback to run.)
                self._releasing = releasing
            return self._releasing
        finally:
            # The hold number stays taken until the backend answers (the session's
            # ledger), so another task of this session may ask for the semaphore now:
            # its acquire takes another number and cannot restate this grant.
            self.session._forget(self)

    async def restate(
        self, count: int | None = None, *, data: Data | None = None, timeout: float | None = None
    ) -> None:
        """Change this hold in place: its count, its owner data, or both.

        No more tokens than held, or new data, apply at once and keep the token.
        More tokens wait, first in first out behind earlier waiters, for ``timeout``
        seconds (the backend's clock decides; ``None`` waits forever, ``0`` only
        tries): meanwhile the lease keeps its hold; once granted, the lease holds
        the new count with a new, greater :attr:`token` (as any new grant). If the
        wait fails (TimeoutError) or is cancelled, the lease keeps its old hold.

        Raises:
            TimeoutError: the extra tokens were not granted within ``timeout``.
            DeadlockError: waiting for them would close a deadlock (the lease stays
                as it was: see docs/recipes.md, "Deadlock detection").
            LimitExceededError: ``count`` exceeds the semaphore's limit.
            PreconditionFailedError: the lease was released.
            LostError: the lease was lost (its error).
        """
        self.check()
        if not self.held:
            raise PreconditionFailedError(f"{self!r} was released; acquire it again")
        count = self.count if count is None else _args.count(count)
        new_data = self.data if data is None else _args.as_data(data)
        timeout = _args.timeout(timeout)
        try:
            grant = await self.session._restate(self, count, new_data, timeout)
        except LostError as error:
            # The hold itself ended while the upgrade waited (its grant lost again
            # before it was taken): so did this lease.
            if self.held:
                self._lose(error)
            raise
        self.check()  # lost while the upgrade waited: the grant went with it
        self._grant = grant
        self.token, self.count, self.data = grant.token, grant.count, new_data

    async def handoff(self) -> str:
        """A string with which another session, of any client or process, takes this
        hold over: ``await other_session.adopt(text)``, in one step of the store. This
        lease then ends lost (LeaseLostError, as any loss); the adopter holds the same
        count and data under a new token, strictly greater than :attr:`token`. Held
        until adopted; adopts once, only the latest string; a restate in place keeps
        it, an upgrade withdraws it. A capability: whoever has the string (a 128-bit
        secret; the store keeps its digest) can take the hold (docs/recipes.md,
        "Handing a lease to another process").

        Raises:
            UnsupportedError: the backend cannot hand holds off (no HANDOFF).
            PreconditionFailedError: the lease was released.
            LostError: the lease was lost (its error).
        """
        self.check()
        if not self.held:
            raise PreconditionFailedError(f"{self!r} was released; nothing to hand off")
        return await self.session._handoff(self)

    # -- async with -------------------------------------------------------------------

    def _check_enter(self) -> None:
        if self._signal.ended and self._signal.reason is None:
            raise PreconditionFailedError(f"{self!r} was released; acquire it again")

    def _confirm_held(self) -> None:
        if not self._signal.ended:
            self.session._deadline_passed()  # a loss found ends this lease too

    def _end_block(self) -> Awaitable[None] | None:
        # Where the backend sends the release ahead of the client's next request,
        # leaving the block does not wait for its answer (_release_soon): one round
        # trip per acquire-and-release on tenure://, and no task here. Elsewhere a
        # later request could overtake it, so the block waits, as release() does.
        releasing = self._release_soon()
        if releasing is None or releasing.done() or self.session._releases_in_order:
            return None
        return self.release()  # (its wait: the lease has ended, this only waits)

    async def _leave(self) -> None:
        """What leaving a block does, awaited (the sync face's ``with``)."""
        waiting = self._end_block()
        if waiting is not None:
            await waiting

    # -- called by the session --------------------------------------------------------

    def _lose(self, error: LostError) -> None:
        self._finish(self._translate(error))
        self.session._forget(self)

    def _translate(self, error: LostError) -> LostError:
        return error

    def _finish(self, reason: LostError | None) -> None:
        if self._renewer is not None:
            self._renewer.cancel()
            self._renewer = None
        self._signal.end(reason)

    async def _keep_renewed(self, ttl: float, first: float) -> None:
        """Renew a lease that has a TTL, ``first`` seconds from now, then three times
        per TTL, until it ends."""
        pause = first
        while True:
            await asyncio.sleep(pause)
            try:
                ttl = await lease_renewal(self.session._backend_session()).renew(
                    self.name, self._grant
                )
                pause = ttl / 3
            except TenureError as error:
                self._renewer = None
                self._lose(
                    error
                    if isinstance(error, LostError)
                    else LeaseLostError(f"could not renew the lease on {self.name!r}: {error}")
                )
                return


class Lock(Lease):
    """An exclusive hold of a mutex; ``token`` is its fencing token."""


class WriteLock(Lock):
    """The writer's hold of a readers-writer lock: every token of its semaphore, alone.

    ``await lock.restate(1)`` downgrades it to a reader's share, keeping its token.
    """


class ReadLock(Lease):
    """A reader's share of a readers-writer lock: one token of its semaphore."""


class Leadership(Lease):
    """Leadership of an election: the single token of its semaphore, with the leader's data.

    Lost leadership (other than by the session's loss) raises LeaderChangedError.
    """

    def _translate(self, error: LostError) -> LostError:
        if type(error) is LeaseLostError:
            return LeaderChangedError(str(error))
        return error

    async def proclaim(self, data: Data) -> None:
        """Replace the leader's data in place, without a new election (same token)."""
        if not self.held and self._signal.reason is None:
            raise LeaderChangedError(f"leadership of {self.name!r} was resigned")
        await self.restate(data=data)

    async def resign(self) -> None:
        """Step down (the same as :meth:`release`)."""
        await self.release()


def _shielded(releasing: asyncio.Future[bool]) -> asyncio.Future[bool]:
    """A future of ``releasing``'s outcome that its waiter alone owns: cancelling the
    waiter cancels this one, not the release (``asyncio.shield``'s rule, in one
    callback: the release path's wait is the common case of an awaited release)."""
    waiter: asyncio.Future[bool] = releasing.get_loop().create_future()
    releasing.add_done_callback(partial(_pass_on, waiter))
    return waiter


def _pass_on(waiter: asyncio.Future[bool], releasing: asyncio.Future[bool]) -> None:
    """Give ``releasing``'s outcome to ``waiter``, unless its waiter gave up."""
    if waiter.done():
        if not releasing.cancelled():
            releasing.exception()  # (seen: the waiter that would have read it left)
        return
    if releasing.cancelled():
        waiter.cancel()
    elif (error := releasing.exception()) is not None:
        waiter.set_exception(error)
    else:
        waiter.set_result(releasing.result())


def _seen(releasing: asyncio.Future[bool]) -> None:
    """A release's failure was the backend's to tell (a loss reaches the session's
    listener): marked seen, so that a release nobody awaited logs no stray error."""
    if not releasing.cancelled():
        releasing.exception()
