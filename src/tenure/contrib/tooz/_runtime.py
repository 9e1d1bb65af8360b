"""One tenure client per process and URL, shared by the process's coordinators.

tooz code makes coordinators freely (a test makes several per test; a service one
per worker). Each :class:`Runtime` is a :class:`tenure.sync.Portal` (an event loop
in a thread) running one async :class:`tenure.Client`, so every coordinator of
the process that uses the URL talks over one connection, and the server's pushes
to all their sessions arrive in one order with its replies: a coordinator that
breaks another's lock sees, when ``break_`` returns, that the other lost it. The
last coordinator to stop closes it.

A forked child never uses its parent's: a runtime belongs to the process that
made it (its loop thread does not survive a fork), and the child's first
coordinator connects anew. The parent's stays the parent's: the child neither
closes it nor touches its sessions.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, Generic, TypeVar

import tooz
from tooz import coordination

import tenure
import tenure.sync
from tenure.errors import TenureError, UnavailableError

__all__ = ["Result", "Runtime", "acquire_runtime", "release_runtime", "translated"]

T = TypeVar("T")


@contextlib.contextmanager
def translated() -> Iterator[None]:
    """tenure's errors as tooz's: unreachable servers are ToozConnectionError, every
    other error ToozError (the tenure error is the cause); tooz's pass through."""
    try:
        yield
    except UnavailableError as error:
        raise coordination.ToozConnectionError(str(error)) from error
    except TenureError as error:
        raise tooz.ToozError(f"{type(error).__name__}: {error}") from error


class Runtime:
    """A portal thread and a tenure client connected to ``url`` (module docstring)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.pid = os.getpid()
        self.users = 0
        self.portal = tenure.sync.Portal("tenure-tooz")
        try:
            with translated():
                self.client: tenure.Client = self.portal.call(_connect, url)
        except BaseException:
            self.portal.close()
            raise

    def call(self, fn: Callable[..., Coroutine[Any, Any, T]], /, *args: Any) -> T:
        """``await fn(*args)`` on the loop, tenure's errors made tooz's."""
        with translated():
            return self.portal.call(fn, *args)

    def close(self) -> None:
        """Close the client (its sessions end) and stop the loop thread."""
        try:
            with contextlib.suppress(TenureError):
                self.portal.call(self.client.aclose)
        finally:
            self.portal.close()


async def _connect(url: str) -> tenure.Client:
    return await tenure.connect(url, client_name="tooz")


class _Registry:
    """The runtimes of this process, by URL, counted by their users."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.runtimes: dict[str, Runtime] = {}

    def forget_after_fork(self) -> None:
        """In a forked child: the parent's runtimes are not ours (nor is its lock's state)."""
        self.lock = threading.Lock()
        self.runtimes = {}


_registry = _Registry()
os.register_at_fork(after_in_child=_registry.forget_after_fork)


def acquire_runtime(url: str) -> Runtime:
    """The process's runtime for ``url``, connected now if there is none (one more user).

    Raises:
        ToozConnectionError: the server cannot be reached.
        ToozError: the URL or the connection is refused otherwise.
    """
    with _registry.lock:
        runtime = _registry.runtimes.get(url)
        if runtime is None or runtime.pid != os.getpid() or runtime.portal.closed:
            runtime = Runtime(url)
            _registry.runtimes[url] = runtime
        runtime.users += 1
        return runtime


def release_runtime(runtime: Runtime) -> None:
    """One user fewer; the last one closes it (a parent's runtime is left alone)."""
    if runtime.pid != os.getpid():
        return
    with _registry.lock:
        runtime.users -= 1
        if runtime.users > 0:
            return
        if _registry.runtimes.get(runtime.url) is runtime:
            del _registry.runtimes[runtime.url]
    runtime.close()


class Result(coordination.CoordAsyncResult[T], Generic[T]):
    """What a tooz call returns: the driver does the work in the call (its order is
    the caller's), and ``get()`` gives its value or raises its error."""

    def __init__(self, value: T | None = None, error: Exception | None = None) -> None:
        self._value = value
        self._error = error

    @classmethod
    def of(cls, work: Callable[[], T]) -> Result[T]:
        """Run ``work`` now; its value or its error for ``get()``."""
        try:
            return cls(work())
        except Exception as error:
            return cls(error=error)

    def get(self, timeout: float | None = None) -> T:
        """The call's value, or its error raised (done already: ``timeout`` is moot)."""
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]

    def done(self) -> bool:
        """Always: the call was made."""
        return True
