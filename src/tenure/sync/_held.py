"""What a held thing (session, lease, lock, leadership) shows blocking code about its end.

Blocking code cannot be cancelled, so instead of cancelling a body, a loss is
*published*: the async object's :class:`~tenure.client.EndSignal` calls back on
the portal thread, which sets a :class:`threading.Event` and runs the callbacks
registered with :meth:`Held.on_lost`. ``with`` blocks check on the way out.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType
from typing import Self

from tenure.client import EndSignal
from tenure.client._loss import report_callback_error
from tenure.errors import LostError
from tenure.sync._portal import Portal

#: A loss callback: called with the loss error, on the portal thread.
LostCallback = Callable[[LostError], object]


class Held:
    """Base of the sync Session, Lease, Lock and Leadership: how their end is seen.

    ``lost`` is a :class:`threading.Event` set when the object is **lost** (it ended
    without your say-so: expiry, forced delete, dropped node, TTL not renewed, or
    its session or client being closed under it). Releasing or closing it yourself
    does not set it; :attr:`ended` tells about any end. So a worker can loop with
    ``while not lock.lost.is_set(): work()`` or block in ``lock.lost.wait()``.

    Leaving a ``with`` block releases (or closes) the object; if it was lost while
    the block ran, leaving raises the loss error, because the body ran unprotected.
    An exception raised by the body itself takes precedence.
    """

    def __init__(self, portal: Portal, signal: EndSignal) -> None:
        # Built on the portal thread, so the EndSignal is only touched from there.
        self._portal = portal
        self._guard = threading.Lock()
        self._ended = False
        self._reason: LostError | None = None
        self._callbacks: list[LostCallback] = []
        self.lost = threading.Event()
        """Set (once, for good) when the object is lost; never by your own release."""
        signal.add_callback(self._on_end)

    @property
    def lost_reason(self) -> LostError | None:
        """Why it was lost, or None while held or after your own release."""
        return self._reason

    @property
    def ended(self) -> bool:
        """Whether it has ended, by loss or by your own release or close."""
        return self._ended

    def check(self) -> None:
        """Raise the loss error if it was lost; otherwise do nothing."""
        if self._reason is not None:
            raise self._reason

    def on_lost(self, callback: LostCallback) -> None:
        """Call ``callback(error)`` once, when (if ever) it is lost.

        The callback runs on the portal thread, where it holds up the client's
        event loop: keep it quick (set a flag, signal a thread), and do not call
        blocking tenure.sync methods from it (they raise RuntimeError). An
        exception it raises goes to the loop's exception handler (it is logged).
        If the object was already lost, ``callback`` runs at once, in the calling
        thread; after a clean release it never runs.
        """
        with self._guard:
            if not self._ended:
                self._callbacks.append(callback)
                return
            reason = self._reason
        if reason is not None:
            callback(reason)

    def _on_end(self, reason: LostError | None) -> None:
        """The EndSignal's callback (portal thread)."""
        with self._guard:
            self._ended = True
            self._reason = reason
            callbacks, self._callbacks = self._callbacks, []
        if reason is None:
            return
        self.lost.set()
        for callback in callbacks:
            try:
                callback(reason)
            except Exception as error:
                report_callback_error(error, callback)

    def _finish(self) -> None:
        """Release or close it (what leaving a ``with`` block does)."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        self.check()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._finish()
        if exc_type is None:
            self.check()


class ClosesOnExit:
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
