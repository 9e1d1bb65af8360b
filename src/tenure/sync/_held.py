"""What a held thing (session, lease, lock, leadership) shows blocking code about its end.

Blocking code cannot be cancelled, so instead of cancelling a body, the end is
*published*: the async object's :class:`~tenure.client.EndSignal` calls back on
the portal thread, which sets the sync :class:`EndSignal` (a
:class:`threading.Event`) and runs the callbacks registered with
:meth:`EndSignal.add_callback` and :meth:`Held.on_lost`. The sync signal ends
exactly when the async one does, with the same reason: the async face is the
reference. ``with`` blocks check on the way out.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, NoReturn, Self, cast

from tenure.client import EndSignal as AsyncEndSignal
from tenure.client._loss import Guarded, LossCallback, report_callback_error
from tenure.errors import LostError
from tenure.sync._portal import Portal

#: A loss callback: called with the loss error, on the portal thread.
LostCallback = Callable[[LostError], object]

#: An end callback: called with the loss error, or None after a clean end.
EndCallback = LossCallback


class EndSignal(threading.Event):
    """The end of a session, lease, lock or leadership, for blocking code.

    The sync face of :class:`tenure.EndSignal`: a :class:`threading.Event` set once,
    for good, when the thing ends, whether it was lost or you released or closed
    it yourself (just as ``await lease.lost`` returns in both cases). :attr:`reason`
    tells which: the :class:`~tenure.errors.LostError`, or None after a clean end.
    """

    def __init__(self) -> None:
        super().__init__()
        self._guard = threading.Lock()
        self._ended = False
        self._reason: LostError | None = None
        # (callback, whether it only wants to hear of a loss), in registration order
        self._callbacks: list[tuple[EndCallback, bool]] = []

    @property
    def ended(self) -> bool:
        """Whether it ended, cleanly or not (the same as :meth:`is_set`)."""
        return self._ended

    @property
    def reason(self) -> LostError | None:
        """The loss error, or None (still held, or ended cleanly)."""
        return self._reason

    def add_callback(self, callback: EndCallback) -> None:
        """Call ``callback(reason)`` at the end: the loss error, or None after a clean end.

        It runs on the portal thread (keep it quick; no blocking tenure.sync calls),
        or at once in the calling thread if it already ended. An exception it
        raises on the portal thread goes to the loop's exception handler.
        """
        self._subscribe(callback, losses_only=False)

    def _subscribe(self, callback: EndCallback, *, losses_only: bool) -> None:
        with self._guard:
            if not self._ended:
                self._callbacks.append((callback, losses_only))
                return
        if self._reason is not None or not losses_only:
            callback(self._reason)

    def lost_first(self, reason: LostError) -> None:
        """It ended cleanly (released), but the store had ended it first, before the
        release reached it: the loss is its reason after all (the sync face of
        :meth:`tenure.EndSignal.lost_first`; those told of the clean end are not told
        again)."""
        with self._guard:
            if self._ended and self._reason is None:
                self._reason = reason

    def _end(self, reason: LostError | None) -> None:
        """The async EndSignal's callback (portal thread): end now, once."""
        with self._guard:
            if self._ended:
                return
            # The reason is in place before the event wakes anybody who reads it.
            self._reason = reason
            self._ended = True
            self.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback, losses_only in callbacks:
            if reason is None and losses_only:
                continue
            # One failing callback must neither skip the others nor break the
            # delivery path that reported the end.
            try:
                callback(reason)
            except Exception as error:
                report_callback_error(error, callback)


class NotAsync:
    """Mixin of the sync face's objects used in ``with``: ``async with`` on one says
    what it is and what to use, not only that the object is no async context manager.

    The sync face's twin of the asyncio client's forgotten ``await``
    (:class:`tenure.client._opening.Opening`): ``async with tenure.sync.connect(url)``
    in a coroutine is the mix-up of the two faces. (No ``__await__``: code that awaits
    whatever is awaitable must go on seeing these objects as not awaitable.)
    """

    if not TYPE_CHECKING:  # (to mypy these objects stay no async context managers)

        async def __aenter__(self) -> NoReturn:
            raise TypeError(
                f"{type(self).__name__} is tenure.sync's, blocking: use `with`, not `async "
                "with`; in asyncio code use tenure.connect(...) (`async with "
                "tenure.connect(url) as client:`), whose objects are awaited"
            )

        async def __aexit__(self, *exc_info: object) -> None:
            """Never reached: :meth:`__aenter__` refuses."""


class Held(NotAsync):
    """Base of the sync Session, Lease, Lock and Leadership: how their end is seen.

    ``lost`` is an :class:`EndSignal`, a :class:`threading.Event` set when the
    object **ends**, like the async ``lost``: when it is lost (expiry, forced
    delete, dropped node, TTL not renewed, or its session or client being closed
    under it), and when you release or close it yourself. :attr:`lost_reason`
    tells a loss (the error) from a clean end (None). So a worker can loop with
    ``while not lock.lost.is_set(): work()``, and a thread blocked in
    ``lock.lost.wait()`` wakes whichever way the lock ends.

    Leaving a ``with`` block releases (or closes) the object; if it was lost while
    the block ran, leaving raises the loss error, because the body ran unprotected.
    An exception raised by the body itself takes precedence.
    """

    def __init__(self, portal: Portal, signal: AsyncEndSignal) -> None:
        # Built on the portal thread, so the async signal is only touched from there.
        self._portal = portal
        self._lost = EndSignal()
        signal.add_callback(self._lost._end)
        # ``with`` blocks open on it: leaving one more than were entered does nothing.
        self._blocks_open = 0

    @property
    def lost(self) -> EndSignal:
        """Set (once, for good) when it ends: lost, or released or closed by you."""
        return self._lost

    @property
    def lost_reason(self) -> LostError | None:
        """Why it was lost, or None while held or after your own release or close."""
        return self._lost.reason

    @property
    def ended(self) -> bool:
        """Whether it has ended, by loss or by your own release or close."""
        return self._lost.ended

    def check(self) -> None:
        """Raise the loss error if it was lost; otherwise do nothing."""
        reason = self._lost.reason
        if reason is not None:
            raise reason

    def on_lost(self, callback: LostCallback) -> None:
        """Call ``callback(error)`` once, when (if ever) it is lost.

        The callback runs on the portal thread, where it holds up the client's
        event loop: keep it quick (set a flag, signal a thread), and do not call
        blocking tenure.sync methods from it (they raise RuntimeError). An
        exception it raises goes to the loop's exception handler (it is logged).
        If the object was already lost, ``callback`` runs at once, in the calling
        thread; after a clean release it never runs (``lost.add_callback`` hears
        of every end).
        """
        # Only ever called with an error (losses_only), as LostCallback promises.
        self._lost._subscribe(cast(EndCallback, callback), losses_only=True)

    def _finish(self) -> None:
        """Release or close it (what leaving a ``with`` block does)."""
        raise NotImplementedError

    def _check_enter(self) -> None:
        """Refuse to guard a block (the default allows it), as the async twin does."""

    def __enter__(self) -> Self:
        """Return the object itself (raising the loss error if it was lost already)."""
        self._check_enter()
        self.check()
        self._blocks_open += 1
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Release or close it; raise the loss error if it was lost while the block ran.

        Leaving a block that was left already does nothing, as a second release
        does (the loss error, if any, was raised the first time).
        """
        if self._blocks_open == 0:
            return
        self._blocks_open -= 1
        self._finish()
        if exc_type is None:
            self.check()


async def end_block(guarded: Guarded) -> None:
    """What leaving ``guarded``'s ``async with`` does, awaited (on the portal's loop):
    a sync held thing's ``with`` ends its async twin so."""
    waiting = guarded._end_block()
    if waiting is not None:
        await waiting


class ClosesOnExit(NotAsync):
    """Mixin: ``with obj:`` returns ``obj`` and calls ``obj.close()`` at the end."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
