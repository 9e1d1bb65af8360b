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
from collections.abc import Callable, Generator
from types import TracebackType
from typing import Any

from tenure.errors import LostError

LossCallback = Callable[[LostError | None], None]


class EndSignal:
    """The single end of one held thing."""

    __slots__ = ("_callbacks", "_ended", "_future", "_reason", "_scopes")

    def __init__(self) -> None:
        self._ended = False
        self._reason: LostError | None = None
        self._future: asyncio.Future[LostError | None] | None = None
        self._scopes: set[CancelOnLoss] = set()
        self._callbacks: list[LossCallback] = []

    @property
    def ended(self) -> bool:
        """Whether it ended, cleanly or not."""
        return self._ended

    @property
    def reason(self) -> LostError | None:
        """The loss error, or None (still held, or released cleanly)."""
        return self._reason

    def end(self, reason: LostError | None) -> None:
        """End now (idempotent: only the first end counts)."""
        if self._ended:
            return
        self._ended = True
        self._reason = reason
        if self._future is not None and not self._future.done():
            self._future.set_result(reason)
        if reason is not None:
            for scope in list(self._scopes):
                scope.cancel_body()
        for callback in self._callbacks:
            callback(reason)
        self._callbacks.clear()

    def add_callback(self, callback: LossCallback) -> None:
        """Call ``callback(reason)`` at the end (at once if it already ended)."""
        if self._ended:
            callback(self._reason)
        else:
            self._callbacks.append(callback)

    def wait(self) -> Generator[Any, None, LostError | None]:
        """Await the end; returns the loss error, or None for a clean release."""
        if self._ended:
            return self._reason
        if self._future is None:
            self._future = asyncio.get_running_loop().create_future()
        return (yield from asyncio.shield(self._future).__await__())

    def __await__(self) -> Generator[Any, None, LostError | None]:
        return self.wait()


class CancelOnLoss:
    """Cancels the current task if ``signal`` is lost while the scope is open.

    ``__exit__`` returns normally unless the scope turned a cancellation into the
    loss error, which it then raises (chained to the CancelledError).
    """

    __slots__ = ("_cancelled_by_us", "_cancelling", "_signal", "_task")

    def __init__(self, signal: EndSignal) -> None:
        self._signal = signal
        self._task: asyncio.Task[Any] | None = None
        self._cancelling = 0
        self._cancelled_by_us = False

    def __enter__(self) -> CancelOnLoss:
        if self._signal.reason is not None:
            raise self._signal.reason
        self._task = asyncio.current_task()
        if self._task is None:
            raise RuntimeError("async with on a tenure object needs to run inside a task")
        self._cancelling = self._task.cancelling()
        self._signal._scopes.add(self)
        return self

    def cancel_body(self) -> None:
        """Called by the signal on loss."""
        if self._task is not None and not self._cancelled_by_us:
            self._cancelled_by_us = True
            self._task.cancel(msg=f"tenure: {self._signal.reason}")

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._signal._scopes.discard(self)
        reason = self._signal.reason
        if not self._cancelled_by_us or self._task is None:
            return
        self._task = None
        assert reason is not None
        # Like asyncio.timeout: only a cancellation we requested becomes the loss error.
        task = asyncio.current_task()
        remaining = task.uncancel() if task is not None else 0
        if remaining <= self._cancelling and exc_type is asyncio.CancelledError:
            raise reason from exc
        if exc_type is None:
            # The body finished anyway, but its protection ended before it did.
            raise reason
