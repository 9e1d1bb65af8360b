"""Observers: what a client tells of its acquires and holds to code that measures them.

Tracing (``tenure.contrib.otel``), metrics, and the test fixtures' recorder
(``tenure.testing.Recorder``) all need the same few moments: an acquire is about to
be sent, it was granted (the leases), or it failed (the error); and then each hold's
end, released or lost. The client tells them to its observers, with no dependency
on what they do with them:

* an :class:`Observer` is told of each acquire before it is sent
  (:meth:`Observer.acquire_started`, with the :class:`Attempt`), and may return an
  :class:`AttemptObserver` to be told how it ended (:meth:`AttemptObserver.granted`
  or :meth:`AttemptObserver.failed`, exactly one of them);
* a hold's end is its lease's own signal, already public: ``lease.lost.add_callback(f)``
  calls ``f(None)`` when it is released and ``f(error)`` when it is lost.

Observers are a client's (``tenure.connect(url, observers=[...])``) or the process's
(:func:`add_observer`: every client's, the ones made before too). With none, an
acquire pays one test of two empty tuples (``bench/micro/observers_cost.py``).

An observer is called on the client's event loop (the sync face: its portal thread),
synchronously, in the task that acquires, so it sees that task's context variables
(a trace's current span: the sync face runs each call in a copy of the calling
thread's context). It must be quick and must not block. What it raises is reported
to the loop's exception handler and changes nothing for the acquire.
"""

from __future__ import annotations

import asyncio
import threading
import traceback
from collections.abc import Callable, Iterable
from typing import Final, Protocol, final

from tenure.client import _args
from tenure.client._lease import Lease
from tenure.errors import InvalidArgumentError

__all__ = [
    "Attempt",
    "AttemptObserver",
    "Observer",
    "add_observer",
    "checked_observers",
    "failed",
    "granted",
    "remove_observer",
    "started",
]


@final
class Attempt:
    """One acquire as its observers see it, before it is sent.

    ``names`` is one name for an acquire (a mutex's, a semaphore's, an election's...),
    the whole set for :meth:`~tenure.Session.lock_all`; ``count`` the tokens asked of
    each (``tenure.MAX_COUNT``: every token, as a mutex, a writer or an election
    takes); ``kind`` the :class:`~tenure.Lease` class it makes (``Lock``, ``ReadLock``,
    ``WriteLock``, ``Leadership``, ``Lease``); ``timeout`` the seconds it may wait
    (None: forever, 0: only tries); ``session_id`` the session's id in ``node``.
    """

    __slots__ = ("_data", "_given", "count", "kind", "names", "node", "session_id", "timeout")

    def __init__(
        self,
        node: str,
        session_id: int,
        names: tuple[str, ...],
        count: int,
        timeout: float | None,
        kind: type[Lease],
        data: bytes,
    ) -> None:
        self.node = node
        self.session_id = session_id
        self.names = names
        self.count = count
        self.timeout = timeout
        self.kind = kind
        self._data = data
        self._given = bool(data)

    def __repr__(self) -> str:
        return f"<Attempt {self.names!r} of {self.node!r} count={self.count}>"

    @property
    def data(self) -> bytes:
        """The owner data it is sent with: the caller's, or one observer's offer."""
        return self._data

    def offer_data(self, data: bytes) -> bool:
        """Send ``data`` as this acquire's owner data if its caller gave none (``b""``)
        and no observer before this one did; whether it will be sent.

        For what says who holds (a trace's context): it never replaces data a caller
        or a recipe gave (a group member's record, a barrier's arrival), and the lease
        then shows it as its ``data``, as ``describe`` and watchers do. It counts
        against the node's ``max_data_size`` like any owner data.

        Raises:
            InvalidArgumentError: ``data`` is not bytes.
        """
        offered = _args.as_data(data, "offered data")
        if self._given or self._data or not offered:
            return False
        self._data = offered
        return True


class AttemptObserver(Protocol):
    """How one acquire ended, told to what :meth:`Observer.acquire_started` returned:
    exactly one of the two methods is called, once."""

    def granted(self, leases: tuple[Lease, ...]) -> None:
        """The acquire was granted: its lease (``lock_all``: one per name, in the
        order of :attr:`Attempt.names`). Each lease's end, released or lost, is its
        ``lease.lost`` signal's: ``lease.lost.add_callback(f)``."""
        ...

    def failed(self, error: BaseException) -> None:
        """The acquire ended without a grant: TimeoutError (``timeout`` passed, or
        busy with ``timeout=0``), asyncio.CancelledError, DeadlockError, the
        session's loss, or any other error the acquire raised."""
        ...


class Observer(Protocol):
    """What a client tells of its acquires (see the module docstring): give it to
    :func:`tenure.connect` (``observers=[...]``) or to :func:`tenure.add_observer`."""

    def acquire_started(self, attempt: Attempt) -> AttemptObserver | None:
        """An acquire is about to be sent: what to tell of its end (None: nothing).

        Called in the acquiring task, before anything is sent: the place to read
        the caller's context, start a timer, and :meth:`Attempt.offer_data`.
        """
        ...


@final
class _ProcessObservers:
    """The observers every client of this process tells (:func:`add_observer`)."""

    __slots__ = ("_guard", "observers")

    def __init__(self) -> None:
        #: Read on every acquire: a tuple, replaced whole (under the guard) on a change.
        self.observers: tuple[Observer, ...] = ()
        self._guard = threading.Lock()


#: The process's observers, told before each client's own.
PROCESS: Final = _ProcessObservers()


def add_observer(observer: Observer) -> None:
    """Tell ``observer`` of every client's acquires in this process, from now on
    (clients made before too), before each client's own observers. Adding one that
    is there already does nothing.

    Raises:
        InvalidArgumentError: ``observer`` has no ``acquire_started`` method.
    """
    _check(observer, "observer")
    with PROCESS._guard:
        if not any(known is observer for known in PROCESS.observers):
            PROCESS.observers = (*PROCESS.observers, observer)


def remove_observer(observer: Observer) -> bool:
    """Stop telling ``observer`` (added by :func:`add_observer`); whether it was there.

    Acquires under way when it is removed still tell it how they end.
    """
    with PROCESS._guard:
        kept = tuple(known for known in PROCESS.observers if known is not observer)
        removed = len(kept) != len(PROCESS.observers)
        PROCESS.observers = kept
    return removed


def checked_observers(observers: object) -> tuple[Observer, ...]:
    """``connect``'s ``observers``: an iterable of objects with ``acquire_started``."""
    if isinstance(observers, str | bytes) or not isinstance(observers, Iterable):
        raise InvalidArgumentError(f"observers must be a list of observers, got {observers!r:.80}")
    listed = tuple(observers)
    for observer in listed:
        _check(observer, "observers")
    return listed


def _check(observer: object, what: str) -> None:
    if not callable(getattr(observer, "acquire_started", None)):
        raise InvalidArgumentError(
            f"{what}: {observer!r:.80} is not an observer (it has no acquire_started method)"
        )


# -- telling them (the session's acquire paths) ---------------------------------------


def started(own: tuple[Observer, ...], attempt: Attempt) -> list[AttemptObserver]:
    """Tell the process's observers, then ``own`` (a client's), of ``attempt``: those
    that want its end."""
    watching: list[AttemptObserver] = []
    for observer in (*PROCESS.observers, *own):
        try:
            watcher = observer.acquire_started(attempt)
        except Exception as error:
            _report(error, observer.acquire_started)
            continue
        if watcher is not None:
            watching.append(watcher)
    return watching


def granted(watching: list[AttemptObserver], leases: tuple[Lease, ...]) -> None:
    """Tell each of ``watching`` of the grant."""
    for watcher in watching:
        try:
            watcher.granted(leases)
        except Exception as error:
            _report(error, watcher.granted)


def failed(watching: list[AttemptObserver], error: BaseException) -> None:
    """Tell each of ``watching`` of the failure."""
    for watcher in watching:
        try:
            watcher.failed(error)
        except Exception as failure:
            _report(failure, watcher.failed)


def _report(error: Exception, where: Callable[..., object]) -> None:
    """An observer's error goes to the loop's exception handler, and no further."""
    context = {"message": f"tenure: observer {where!r} failed", "exception": error}
    try:
        asyncio.get_running_loop().call_exception_handler(context)
    except RuntimeError:  # no running loop: nowhere better to report it
        traceback.print_exception(error)
