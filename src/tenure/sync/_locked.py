"""``@tenure.sync.locked``: a plain function that runs holding a mutex named from its call.

The sync twin of :func:`tenure.locked` (:mod:`tenure.client._locked`): the same name
templates, arguments and default session (one per process, client and node, shared
by every thread), with one difference a thread imposes: a blocking function cannot
be cancelled. A loss while it runs sets the lock's ``lost`` event (watch it through
:func:`current_lock`: ``current_lock().lost.is_set()``, ``current_lock().check()``),
and once the function has returned, the call raises the loss error instead of
returning, as leaving a ``with`` block does.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from contextvars import ContextVar
from typing import Literal, overload

from tenure.client._args import Data
from tenure.client._lock_names import LockName, lock_spec
from tenure.client._locked import P, R, not_a_plain_function
from tenure.errors import InvalidArgumentError, PreconditionFailedError
from tenure.sync._client import Client
from tenure.sync._defaults import default_session
from tenure.sync._leases import Lock

__all__ = ["current_lock", "locked"]

#: The lock of the innermost ``@locked`` call running in this context (thread).
_current: ContextVar[Lock | None] = ContextVar("tenure.sync.current_lock", default=None)


def current_lock() -> Lock:
    """The lock of the innermost ``@tenure.sync.locked`` call that runs in this thread:
    for its fencing ``token``, its ``lost`` event and ``check()``.

    (A thread started inside the function does not see it: a new thread starts
    with a context of its own; hand it the lock.)

    Raises:
        PreconditionFailedError: no ``@tenure.sync.locked`` function is running here.
    """
    lock = _current.get()
    if lock is None:
        raise PreconditionFailedError(
            "tenure.sync.current_lock(): no @tenure.sync.locked function is running in this thread"
        )
    return lock


@overload
def locked(
    name: str,
    *,
    timeout: float | None = None,
    blocking: Literal[True] = True,
    node: str | None = None,
    client: Client | None = None,
    reentrant: bool = False,
    data: Data | None = None,
) -> Callable[[Callable[P, R]], Callable[P, R]]: ...


@overload
def locked(
    name: str,
    *,
    timeout: float | None = None,
    blocking: bool,
    node: str | None = None,
    client: Client | None = None,
    reentrant: bool = False,
    data: Data | None = None,
) -> Callable[[Callable[P, R]], Callable[P, R | None]]: ...


def locked(
    name: str,
    *,
    timeout: float | None = None,
    blocking: bool = True,
    node: str | None = None,
    client: Client | None = None,
    reentrant: bool = False,
    data: Data | None = None,
) -> Callable[[Callable[P, R]], Callable[P, R | None]]:
    """Run the decorated plain function holding the mutex ``name``, formatted per call.

    As :func:`tenure.locked` (the template, ``timeout``, ``blocking=False`` skipping
    the call with None, ``reentrant``, ``data``), in the default session
    (:func:`tenure.sync.default_session`) of ``client`` (this process's default
    client) on ``node`` (the configured node), shared by all the process's threads;
    each thread is a caller of its own there (a second thread queues; ``reentrant``
    nests per thread).

    A loss while the function runs cannot cancel it: it sets the lock's ``lost``
    event (``tenure.sync.current_lock().lost``; ``check()`` raises the loss), so a
    long function should look between steps; once it returns, the call raises the
    loss error (a :class:`~tenure.errors.LostError`) instead of returning, as
    leaving a ``with`` block does (an exception of the function's own wins).

    Raises:
        InvalidArgumentError: as :func:`tenure.locked`.
        TypeError: at decoration, an ``async def`` function (decorate it with
            ``tenure.locked``) or a generator function; at the call, a function that
            returned a coroutine (it was closed, never run).
        ConfigError: at the call, no ``client`` or ``node`` given and none configured.
    """
    spec = lock_spec(name, timeout, blocking, node, reentrant, data)
    if client is not None and not isinstance(client, Client):
        raise InvalidArgumentError(
            f"client must be a tenure.sync.Client, got {type(client).__name__}"
        )
    wait = spec.wait()

    def decorate(fn: Callable[P, R]) -> Callable[P, R | None]:
        refusal = not_a_plain_function(fn)
        if refusal is not None:
            raise TypeError(refusal)
        names = LockName(spec.template, fn)
        owner_data = spec.owner_data(names)

        @functools.wraps(fn)
        def run_locked(*args: P.args, **kwargs: P.kwargs) -> R | None:
            lock_name = names.format(args, kwargs)
            session = default_session(spec.node, client=client)
            mutex = session.mutex(lock_name, reentrant=spec.reentrant)
            try:
                lock = mutex.lock(timeout=wait, data=owner_data)
            except TimeoutError:
                if spec.blocking:
                    raise
                return None  # held elsewhere: skipped
            with lock:  # leaving it raises the loss error if the lock was lost meanwhile
                entered = _current.set(lock)
                try:
                    result = fn(*args, **kwargs)
                finally:
                    _current.reset(entered)
                if inspect.iscoroutine(result):
                    result.close()
                    raise TypeError(
                        f"tenure.sync.locked: {names.function} returned a coroutine (closed "
                        "unawaited): decorate an async function with tenure.locked"
                    )
            return result

        return run_locked

    return decorate
