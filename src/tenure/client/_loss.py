"""How the end of a session, lease, lock or leadership reaches the code relying on it.

Every held thing owns one :class:`EndSignal`. It ends exactly once: cleanly (the
holder released it; reason ``None``) or by loss (reason a
:class:`~tenure.errors.LostError`). Code can await it (``await lease.lost``), read
``lost_reason``, or register callbacks (the sync facade does).

The ``async with`` forms go further, the way :func:`asyncio.timeout` does: while
the body runs, a loss cancels the body's task, and on the way out the
cancellation is turned into the loss error. A cancellation that came from
somewhere else is left alone.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable, Generator
from types import TracebackType
from typing import Any, Self

from tenure.errors import LostError

LossCallback = Callable[[LostError | None], None]

# Tasks with a loss cancellation requested and not yet turned into an error.
_CANCELLED_FOR_LOSS: weakref.WeakSet[asyncio.Task[Any]] = weakref.WeakSet()


class EndSignal:
    """The single end of one held thing."""

    __slots__ = ("_callbacks", "_future", "_reason", "_scopes", "ended")

    def __init__(self) -> None:
        #: Whether it ended, cleanly or not (read-only for others; an attribute, not a
        #: property, since every acquire and release reads it).
        self.ended = False
        self._reason: LostError | None = None
        self._future: asyncio.Future[LostError | None] | None = None
        self._scopes: set[CancelOnLoss] = set()
        self._callbacks: list[LossCallback] = []

    @property
    def reason(self) -> LostError | None:
        """The loss error, or None (still held, or released cleanly)."""
        return self._reason

    def end(self, reason: LostError | None) -> None:
        """End now (idempotent: only the first end counts)."""
        if self.ended:
            return
        self.ended = True
        self._reason = reason
        if self._future is not None and not self._future.done():
            self._future.set_result(reason)
        if reason is not None:
            for scope in list(self._scopes):
                scope.cancel_body()
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            # One failing callback must neither skip the others nor break the
            # delivery path that reported the end.
            try:
                callback(reason)
            except Exception as error:
                report_callback_error(error, callback)

    def lost_first(self, reason: LostError) -> None:
        """It ended cleanly here (released), but the store had ended it first, before
        the release reached it: the loss is its reason after all. Those told of the
        clean end (awaiters, callbacks) are not told again; :attr:`reason` says it."""
        if self.ended and self._reason is None:
            self._reason = reason

    def add_callback(self, callback: LossCallback) -> None:
        """Call ``callback(reason)`` at the end (at once if it already ended)."""
        if self.ended:
            callback(self._reason)
        else:
            self._callbacks.append(callback)

    def wait(self) -> Generator[Any, None, LostError | None]:
        """Await the end; returns the loss error, or None for a clean release."""
        if self.ended:
            return self._reason
        if self._future is None:
            self._future = asyncio.get_running_loop().create_future()
        return (yield from asyncio.shield(self._future).__await__())

    def __await__(self) -> Generator[Any, None, LostError | None]:
        return self.wait()


class CancelOnLoss:
    """Cancels the current task if ``signal`` is lost while the scope is open.

    The scope is open from its making (entered: one call, not two, on every block)
    until :meth:`__exit__`, which returns normally unless the scope turned a
    cancellation into the loss error, which it then raises (chained to the
    CancelledError).
    """

    __slots__ = ("_cancelled_by_us", "_cancelling", "_signal", "_task")

    def __init__(self, signal: EndSignal) -> None:
        reason = signal._reason
        if reason is not None:
            raise reason
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("async with on a tenure object needs to run inside a task")
        self._signal = signal
        self._task: asyncio.Task[Any] | None = task
        self._cancelling = task.cancelling()
        self._cancelled_by_us = False
        signal._scopes.add(self)

    def cancel_body(self) -> None:
        """Called by the signal on loss.

        One loss often ends several nested scopes of one task at once (a session
        and the leases it holds). The task is cancelled only once, and the
        innermost lost scope turns that cancellation into its own loss error; the
        outer ones then see that error pass, not a second cancellation.
        """
        task = self._task
        if task is None or self._cancelled_by_us:
            return
        self._cancelled_by_us = True
        if task not in _CANCELLED_FOR_LOSS:
            _CANCELLED_FOR_LOSS.add(task)
            task.cancel(msg=f"tenure: {self._signal.reason}")

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._signal._scopes.discard(self)
        task, self._task = self._task, None
        if not self._cancelled_by_us or task is None:
            return  # not lost while open
        reason = self._signal.reason
        assert reason is not None
        if task not in _CANCELLED_FOR_LOSS:
            # An inner scope already reported the loss. If the body caught that error
            # and finished anyway, it ran on without protection: say so once more.
            if exc_type is None:
                raise reason
            return
        # The loss cancellation ends here, whatever the body did with it: forget it
        # (or a later loss in this task would never cancel) and withdraw its count.
        _CANCELLED_FOR_LOSS.discard(task)
        remaining = task.uncancel()
        if exc_type is not None and exc_type is not asyncio.CancelledError:
            return  # the body's own error wins; the reason stays in lost_reason
        # Like asyncio.timeout: only a cancellation we requested becomes the loss error.
        if remaining <= self._cancelling:
            if exc_type is None:
                raise reason  # the body swallowed the cancellation; it was not protected
            raise reason from exc

    async def aexit(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """:meth:`__exit__` for ``__aexit__``: also gives an unlanded cancellation a place to land.

        A loss noticed while the body's own task is running (the body deleted its own
        semaphore, closed its session, dropped the node...) requests a cancellation
        that only lands at the task's next ``await``. If the body ends before that,
        the cancellation would hit whatever the task awaits next, outside the scope,
        and turn the loss error into a stray CancelledError (before Python 3.13,
        ``uncancel()`` does not withdraw a requested cancellation). It lands here
        instead, and is dropped unless somebody else asked for a cancellation too.
        """
        task = self._task
        unlanded = self._cancelled_by_us and exc_type is not asyncio.CancelledError
        try:
            self.__exit__(exc_type, exc, tb)
        finally:
            if unlanded and task is not None:
                try:
                    await asyncio.sleep(0)
                except asyncio.CancelledError:
                    if task.cancelling() > self._cancelling:
                        raise  # a cancellation from elsewhere: it wins


class Guarded:
    """Mixin for held things: ``async with obj:`` guards the block, then ends ``obj``.

    While the block runs, a loss of ``obj`` cancels it (see :class:`CancelOnLoss`);
    leaving the block ends ``obj`` cleanly (``_end_block``: release or close).
    Subclasses set ``_signal`` and ``_scopes`` in their ``__init__``.
    """

    _signal: EndSignal
    _scopes: list[CancelOnLoss]

    @property
    def lost(self) -> EndSignal:
        """Awaitable of the end: returns the loss error, or None after your own release."""
        return self._signal

    @property
    def lost_reason(self) -> LostError | None:
        """Why it was lost, or None while held or after your own release or close."""
        return self._signal.reason

    def check(self) -> None:
        """Raise the loss error if it was lost; otherwise do nothing."""
        if self._signal.reason is not None:
            raise self._signal.reason

    def _check_enter(self) -> None:
        """Refuse to guard a block (the default allows it)."""

    def _confirm_held(self) -> None:
        """As its block ends, find a loss not told yet (its session's deadline passed
        while the loop was blocked), so that the block's exit raises it; the default
        finds none."""

    def _end_block(self) -> Awaitable[object] | None:
        """End ``obj`` as leaving its block does: what to await for it (shielded), or
        None if there is nothing to wait for."""
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        self._check_enter()
        self._scopes.append(CancelOnLoss(self._signal))
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not self._scopes:
            # Left once already (or never entered): the first exit released it, and a
            # second one does what a second release() does, nothing.
            return
        scope = self._scopes.pop()
        try:
            self._confirm_held()
            if scope._cancelled_by_us:
                await scope.aexit(exc_type, exc, tb)
            else:  # (not lost while open, the usual case: __exit__'s first step, inline)
                self._signal._scopes.discard(scope)
                scope._task = None
        finally:
            ending = self._end_block()
            if ending is not None:
                await asyncio.shield(ending)


def report_callback_error(error: Exception, callback: Callable[..., object]) -> None:
    """Hand a failing end callback's error to the running loop's exception handler."""
    context = {"message": f"tenure: on_lost callback {callback!r} failed", "exception": error}
    try:
        asyncio.get_running_loop().call_exception_handler(context)
    except RuntimeError:  # no running loop: nowhere better to report it
        import traceback

        traceback.print_exception(error)
