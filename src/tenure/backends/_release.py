"""A session's releases: started at once, settled in the background.

The rule is :mod:`tenure.backends._session`'s (its docstring, "A release is sent
until it is answered"); this module carries it out for one :class:`StoreSession`.
:meth:`Releases.start` takes the hold out of the session's ``held`` into its
``releasing`` (so the hold's number stays taken), sends the release, and returns
its answer's future, which nobody need await. A store that can send at once
(:class:`~tenure.backends._store.EagerRelease`) sends it before ``start``
returns, and its answer's future settles the release without a task; otherwise,
and whenever a send is not answered, a task sends it until the store answers or
the session ends. Then the hold's number is free again, and the answer's future
gets the store's answer, or the session's loss (at once, when the session ends
while the release is being tried; and when the store refuses a release that
reaches it after the session's end, which gave the hold back already), or the
grant's loss (the store had ended the grant before the release reached it: it told
so, :attr:`~tenure.backends._ledger.HoldLedger.ended_first`, or a release sent once
found nothing held, sent at once or, by a store that sends it once a call
(:class:`~tenure.backends._store.SendsReleaseOnce`), from the task; one sent again may
find its own first send applied, and says nothing), or the store's error, which is also logged:
nobody may be waiting to hear it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, Final, Protocol, TypeVar

from tenure.backends._base import Grant
from tenure.backends._ledger import HoldLedger, Place
from tenure.backends._store import Acquiring, SendsReleaseOnce
from tenure.errors import LeaseLostError, LostError, UnavailableError

__all__ = ["Releases", "ReleasesHome"]

log = logging.getLogger("tenure.client")

R = TypeVar("R")

#: What sends a release at once: its answer's future, or None if it cannot now.
SendNow = Callable[[str, int], "asyncio.Future[bool] | None"]


class ReleasesHome(Protocol):
    """What :class:`Releases` may ask of its home, the session (a
    :class:`~tenure.backends._session.StoreSession`, which imports this module)."""

    @property
    def session_id(self) -> int:
        """The store's id of the session, for the log."""
        ...

    ledger: HoldLedger
    ended: LostError | None

    def ending(self) -> asyncio.Future[None]:
        """A future done when the session ends."""
        ...

    def until_answered(self, call: Callable[..., Awaitable[R]], *args: Any) -> Awaitable[R]:
        """``call(*args)`` sent until the store answers or the session ends."""
        ...

    def keep(self, task: asyncio.Future[Any]) -> None:
        """Keep a reference to background work that is already running."""
        ...


class Releases:
    """The releases of one session (module docstring): ``acquiring`` sends one the slow
    way, ``send_now`` (if the store has it) at once."""

    __slots__ = ("_acquiring", "_loop", "_send_now", "_session")

    def __init__(
        self, session: ReleasesHome, acquiring: Acquiring, send_now: SendNow | None
    ) -> None:
        self._session = session
        self._acquiring = acquiring
        self._send_now: Final = send_now
        self._loop = asyncio.get_running_loop()

    @property
    def in_order(self) -> bool:
        """Whether a release is sent before :meth:`start` returns."""
        return self._send_now is not None

    def start(self, name: str, grant: Grant) -> asyncio.Future[bool]:
        """Release the hold ``grant`` of ``name``: its answer's future (module docstring)."""
        ledger = self._session.ledger
        place = (name, grant.hold)
        held = ledger.held.pop(place, None)
        if held is not None:
            ledger.releasing[place] = held
        answer: asyncio.Future[bool] = self._loop.create_future()
        first = None if self._send_now is None else self._send_now(name, grant.hold)
        if first is None:
            self._send(place, held, answer)
        else:
            # No task on the common path: the answer's future settles the release.
            first.add_done_callback(partial(self._first_answered, place, held, answer))
        return answer

    def _first_answered(
        self,
        place: Place,
        held: Grant | None,
        answer: asyncio.Future[bool],
        first: asyncio.Future[bool],
    ) -> None:
        """The release sent at once was answered, or could not be: done, or sent
        again until answered (also when ``answer``'s waiter has given up)."""
        if not first.cancelled() and (error := first.exception()) is None:
            # Applied (the common case): _released with nothing to log.
            ended = self._drop(place, held)
            if not answer.done():
                held_there = first.result()
                if ended is None and not held_there and held is not None:
                    # Sent once, and the store held nothing: it had ended the grant
                    # first (its push of the loss may come after this answer).
                    ended = _ended_first(place)
                if ended is None:
                    answer.set_result(held_there)
                else:
                    _lost_first(answer, ended)
        elif not first.cancelled() and not isinstance(error, UnavailableError):
            self._released(place, held, answer, None, first)  # (an error: no answer)
        elif self._session.ended is None:
            self._send(place, held, answer, sent=1)  # (it may have been applied)
        else:  # not answered, and the session has ended meanwhile: its loss is the answer
            _retrieve(first)
            self._drop(place, held)
            self._fail(answer)

    def _send(
        self, place: Place, held: Grant | None, answer: asyncio.Future[bool], sent: int = 0
    ) -> None:
        """Send the release from a task until the store answers or the session ends
        (``sent``: how many times it was sent already, unanswered)."""
        session = self._session
        sends = _Sends(self._acquiring.release, sent)
        counted = isinstance(self._acquiring, SendsReleaseOnce)  # (else a call may resend)
        tries = asyncio.ensure_future(session.until_answered(sends, *place))
        session.keep(tries)
        ending = session.ending()
        # The answer's waiter hears of the session's end at once; the tries may linger.
        on_end = partial(self._fail, answer)
        ending.add_done_callback(on_end)
        tries.add_done_callback(lambda _: ending.remove_done_callback(on_end))
        tries.add_done_callback(
            partial(self._released, place, held, answer, sends if counted else None)
        )

    def _released(
        self,
        place: Place,
        held: Grant | None,
        answer: asyncio.Future[bool],
        sends: _Sends | None,
        outcome: asyncio.Future[bool],
    ) -> None:
        """The release is through: its hold number is free again, ``answer`` is settled;
        a failure other than the session's loss is logged (nobody may be waiting)."""
        ended = self._drop(place, held)
        once = sends is not None and sends.count == 1
        if ended is None and once and held is not None and _held_nothing(outcome):
            ended = _ended_first(place)  # (as _first_answered's)
        if ended is not None and not answer.done():
            _retrieve(outcome)
            _lost_first(answer, ended)
            return
        error = None if outcome.cancelled() else outcome.exception()
        if error is not None and not isinstance(error, LostError):
            if self._session.ended is not None:
                # The session ended before the answer came: its end gave the hold
                # back, so the release had nothing left to do, and the store's
                # refusal says only that (tenure://'s server has forgotten a killed
                # session: PERMISSION_DENIED, behind the SessionEnded push).
                self._fail(answer)
                return
            session_id = self._session.session_id
            log.warning("session %d: release of %r failed: %s", session_id, place, error)
        _settle(answer, outcome)

    def _drop(self, place: Place, held: Grant | None) -> LostError | None:
        """The release of ``place`` is through: its hold number is free again. The loss,
        if the store ended the grant before the release reached it."""
        ledger = self._session.ledger
        releasing = ledger.releasing
        if held is not None and releasing.get(place) is held:
            del releasing[place]
            if ledger.ended_first:  # (a truth test: nothing called on every release)
                return ledger.ended_first.pop(place, None)
        return None

    def _fail(self, answer: asyncio.Future[Any], _: object = None) -> None:
        """The session ended while the release was being sent: ``answer`` raises the loss."""
        ended = self._session.ended
        if not answer.done() and ended is not None:
            answer.set_exception(type(ended)(*ended.args))
            _retrieve(answer)


class _Sends:
    """A store's release, counting its sends: a release sent once that finds nothing
    held tells that the store ended the grant first; one sent again may have found its
    own first send applied."""

    __slots__ = ("_release", "count")

    def __init__(self, release: Callable[[str, int], Awaitable[bool]], sent: int) -> None:
        self.count = sent
        self._release = release

    def __call__(self, name: str, hold: int) -> Awaitable[bool]:
        self.count += 1
        return self._release(name, hold)


def _held_nothing(outcome: asyncio.Future[bool]) -> bool:
    """Whether the store answered the release: nothing was held."""
    return not outcome.cancelled() and outcome.exception() is None and not outcome.result()


def _ended_first(place: Place) -> LeaseLostError:
    """The loss of a hold the store ended before its release reached it."""
    return LeaseLostError(
        f"the hold of {place[0]!r} had ended before its release reached "
        "the store (its max_hold passed, it was adopted, or deleted)"
    )


def _settle(answer: asyncio.Future[R], outcome: asyncio.Future[R]) -> None:
    """Pass ``outcome`` on to ``answer`` (unless its waiter gave up or it was failed)."""
    if answer.done():
        return
    if outcome.cancelled():
        answer.cancel()
    elif (error := outcome.exception()) is not None:
        answer.set_exception(error)
    else:
        answer.set_result(outcome.result())
    _retrieve(answer)  # (nobody need wait for a release's answer)


def _lost_first(answer: asyncio.Future[bool], ended: LostError) -> None:
    """``answer`` is the loss: the store ended the grant before the release reached it
    (retrieved: leaving ``async with`` need not wait for it)."""
    answer.set_exception(type(ended)(*ended.args))
    _retrieve(answer)


def _retrieve(future: asyncio.Future[Any]) -> None:
    """Mark ``future``'s error as seen: whoever needed it was told another way."""
    if not future.cancelled():
        future.exception()
