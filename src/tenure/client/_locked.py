"""``@tenure.locked``: an async function that runs holding a mutex named from its call.

::

    @tenure.locked("report-{report.id}", timeout=30)
    async def build(report: Report) -> None:
        token = tenure.current_lock().token  # the fencing token, for the writes
        ...

Each call formats its lock name from its arguments (:mod:`tenure.client._lock_names`),
takes the mutex in the default session of the client and node given, or configured
(:func:`tenure.default_session`: one session per event loop, client and node, shared
by every decorated call, replaced once lost), runs the function in ``async with
lock``, so a loss cancels it and raises the loss error, as a block does, and
releases the lock when it returns. The lock is the context's
(:func:`current_lock`), for its fencing token.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Coroutine
from contextvars import ContextVar
from typing import Any, Literal, ParamSpec, TypeVar, overload

from tenure.client._args import Data
from tenure.client._client import Client
from tenure.client._defaults import default_session
from tenure.client._lease import Lock
from tenure.client._lock_names import LockName, lock_spec
from tenure.errors import InvalidArgumentError, PreconditionFailedError

__all__ = ["P", "R", "current_lock", "locked", "not_a_coroutine_function", "not_a_plain_function"]

P = ParamSpec("P")
R = TypeVar("R")

#: The lock of the innermost ``@locked`` call running in this context.
_current: ContextVar[Lock | None] = ContextVar("tenure.current_lock", default=None)


def current_lock() -> Lock:
    """The lock of the innermost ``@tenure.locked`` call that runs here (in this task,
    or a task it started): for its fencing ``token``, its ``lost`` signal.

    Raises:
        PreconditionFailedError: no ``@tenure.locked`` function is running here.
    """
    lock = _current.get()
    if lock is None:
        raise PreconditionFailedError(
            "tenure.current_lock(): no @tenure.locked function is running in this task"
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
) -> Callable[[Callable[P, Coroutine[Any, Any, R]]], Callable[P, Coroutine[Any, Any, R]]]: ...


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
) -> Callable[
    [Callable[P, Coroutine[Any, Any, R]]], Callable[P, Coroutine[Any, Any, R | None]]
]: ...


def locked(
    name: str,
    *,
    timeout: float | None = None,
    blocking: bool = True,
    node: str | None = None,
    client: Client | None = None,
    reentrant: bool = False,
    data: Data | None = None,
) -> Callable[[Callable[P, Coroutine[Any, Any, R]]], Callable[P, Coroutine[Any, Any, R | None]]]:
    """Run the decorated ``async def`` function holding the mutex ``name``, formatted per call.

    ``name`` is a :meth:`str.format` template over the function's parameters
    (``"report-{report.id}"``, ``"day-{day:%Y-%m-%d}"``; a constant name is a
    template too), bound as the call passes them, defaults applied. Each call
    waits for that mutex (``timeout`` seconds at most: TimeoutError, as acquires
    raise), in the default session (:func:`tenure.default_session`) of ``client``
    (this event loop's default client) on ``node`` (the configured node), runs the
    function, and releases the mutex when it returns or raises. With
    ``blocking=False`` it only tries: a mutex held elsewhere skips the call, which
    returns None.

    While the function runs, :func:`tenure.current_lock` is its lock (the fencing
    ``token`` for its writes). If the lock is lost meanwhile (the session expired,
    its node dropped...), the function is cancelled and the call raises the loss
    error (a :class:`~tenure.errors.LostError`), as an ``async with`` block does.
    A mutex already held by this task deadlocks no one: a second, nested call of
    the same name raises PreconditionFailedError, unless ``reentrant`` (then it
    nests, with the same token). ``data`` is the owner data operators see; by
    default the function's ``module.qualname``.

    Raises:
        InvalidArgumentError: at decoration: a bad argument, or a field of ``name``
            that names no parameter; at the call, before anything is sent: a field
            that cannot be read or formatted (both name the template and the field).
        TypeError: at decoration, a function that is not ``async def`` (decorate a
            plain function with ``tenure.sync.locked``).
        ConfigError: at the call, no ``client`` or ``node`` given and none configured.
    """
    spec = lock_spec(name, timeout, blocking, node, reentrant, data)
    if client is not None and not isinstance(client, Client):
        raise InvalidArgumentError(f"client must be a tenure.Client, got {type(client).__name__}")
    wait = spec.wait()

    def decorate(
        fn: Callable[P, Coroutine[Any, Any, R]],
    ) -> Callable[P, Coroutine[Any, Any, R | None]]:
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(not_a_coroutine_function(fn))
        names = LockName(spec.template, fn)
        owner_data = spec.owner_data(names)

        @functools.wraps(fn)
        async def run_locked(*args: P.args, **kwargs: P.kwargs) -> R | None:
            lock_name = names.format(args, kwargs)
            session = await default_session(spec.node, client=client)
            mutex = session.mutex(lock_name, reentrant=spec.reentrant)
            try:
                lock = await mutex.lock(timeout=wait, data=owner_data)
            except TimeoutError:
                if spec.blocking:
                    raise
                return None  # held elsewhere: skipped
            async with lock:  # a loss cancels the function and raises the loss error
                entered = _current.set(lock)
                try:
                    return await fn(*args, **kwargs)
                finally:
                    _current.reset(entered)

        return run_locked

    return decorate


def not_a_coroutine_function(fn: Callable[..., object]) -> str:
    """Why ``tenure.locked`` refuses ``fn``."""
    if inspect.isasyncgenfunction(fn):
        return (
            f"tenure.locked: {fn!r} is an async generator function: its lock would be held "
            "while its consumer runs between yields; take session.mutex(...) inside it"
        )
    return (
        f"tenure.locked decorates async functions (async def), not {fn!r}: decorate a "
        "plain function with tenure.sync.locked"
    )


def not_a_plain_function(fn: Callable[..., object]) -> str | None:
    """Why ``tenure.sync.locked`` refuses ``fn``, or None."""
    if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
        return (
            f"tenure.sync.locked decorates plain functions, not {fn!r} (async): "
            "decorate an async function with tenure.locked"
        )
    if inspect.isgeneratorfunction(fn):
        return (
            f"tenure.sync.locked: {fn!r} is a generator function: its lock would be held "
            "while its consumer runs between yields; take session.mutex(...) inside it"
        )
    return None
