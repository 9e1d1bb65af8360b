"""The portal: an asyncio event loop in a background thread, and the door into it.

Every :class:`tenure.sync.Client` runs the one asyncio implementation of tenure
on a portal's loop. A sync method submits a coroutine with
:meth:`Portal.call` and blocks the calling thread until it is done, while the
loop goes on serving everything else: session keep-alive, lease renewal, loss
notices. This is the "blocking portal" pattern, built on the standard library: a
task per call, started with ``loop.call_soon_threadsafe``, and a bare lock that its
end releases, on which the calling thread waits (:class:`_Call` says why not a
``concurrent.futures.Future``, and how a Ctrl-C anywhere in the call is handled).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Final, Generic, ParamSpec, TypeVar, cast
from urllib.parse import urlsplit

from tenure.client import _forks
from tenure.client._caller import start_for_thread, this_thread, withdraw
from tenure.errors import ClientClosedError

P = ParamSpec("P")
T = TypeVar("T")

#: Seconds the main thread waits for a call's end at a time (:meth:`_Call.outcome`).
SIGNAL_LOOK: Final = 0.1


class Portal:
    """An event loop running in its own (daemon) thread until :meth:`close`.

    Made by :func:`tenure.sync.connect`; reach it as ``client.portal`` to run your
    own coroutines next to the client's, e.g. ``client.portal.call(clock.advance, 31)``
    to move a :class:`~tenure.testing.FakeClock`.

    Its thread does not survive ``os.fork``: in a child, :meth:`call` raises
    ForkedClientError, and :meth:`close` only marks it closed there (the loop and
    what runs on it are the parent's). A :class:`tenure.sync.Client` opens a portal
    of the child's own there, on its next call.
    """

    def __init__(self, name: str = "tenure-portal") -> None:
        self._loop = asyncio.new_event_loop()
        self._guard = threading.Lock()
        self._closed = False
        self._pid = _forks.pid  # the process whose thread runs the loop
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def __repr__(self) -> str:
        return f"<Portal {self._thread.name!r}{' closed' if self._closed else ''}>"

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop the portal runs (touch it only from its own thread)."""
        return self._loop

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called (or this is a child made by fork since it
        started: its thread is the parent's)."""
        return self._closed or self.forked

    @property
    def forked(self) -> bool:
        """Whether this is a child made by ``os.fork`` since the portal started: its
        loop thread is not here, and the client running on it is the parent's."""
        return self._pid != _forks.pid

    def in_portal_thread(self) -> bool:
        """Whether the caller runs on the portal's own thread (e.g. in a loss callback)."""
        return threading.get_ident() == self._thread.ident

    def call(
        self,
        fn: Callable[P, Coroutine[Any, Any, T]],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """Run ``await fn(*args, **kwargs)`` on the portal's loop; block until it is done.

        The call's task acts for the calling thread: to tenure's sessions, the caller
        is this thread, as it is an asyncio task in async code (a reentrant mutex
        nests per thread here; see :mod:`tenure.client._caller`).

        Returns its result or raises its exception. If the calling thread is
        interrupted (KeyboardInterrupt), wherever in the call, the coroutine is
        cancelled on the loop, or never started. (An outcome that came in just as the
        interrupt did is dropped: a lock granted then stays held until its session ends.)

        Raises:
            ClientClosedError: the portal (its client) is closed.
            ForkedClientError: this is a child made by fork since the portal started.
            RuntimeError: called from the portal thread itself, which would deadlock.
        """
        if self._pid != _forks.pid:
            what = "this tenure.sync session, lease or portal (its client's)"
            raise _forks.forked_error(what, self._pid)
        if self.in_portal_thread():
            raise RuntimeError(
                "tenure.sync: blocking call from the portal thread (an on_lost callback?) "
                "would deadlock; hand the work to another thread"
            )
        call: _Call[T] = _Call(self._loop, functools.partial(fn, *args, **kwargs))
        # A Ctrl-C is raised at whichever bytecode the calling thread runs when it
        # comes, not only in the wait: from the submission on, everything is inside the
        # try, and wherever it lands the call is withdrawn.
        try:
            with self._guard:
                if self._closed:
                    raise ClientClosedError("the client is closed")
                call.submit()
            return call.outcome()
        except concurrent.futures.CancelledError:  # as the stdlib's portal raised it
            call.withdraw()
            if self._closed:
                raise ClientClosedError("the client was closed during the call") from None
            raise
        except BaseException:
            call.withdraw()
            raise

    def close(self) -> None:
        """Stop the loop (cancelling what still runs on it) and join its thread. Idempotent.

        In a child made by fork since it started, it only marks the portal closed: the
        loop is the parent's, and waking it would write to the parent's wake-up socket.
        """
        if self._pid != _forks.pid:
            self._closed = True
            return
        if self.in_portal_thread():
            raise RuntimeError("tenure.sync: cannot close the portal from its own thread")
        with self._guard:
            if not self._closed:
                self._closed = True
                self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()

    def _run(self) -> None:
        loop = self._loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:
            try:
                tasks = asyncio.all_tasks(loop)
                for task in tasks:
                    task.cancel()
                loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.run_until_complete(loop.shutdown_default_executor())
            finally:
                asyncio.set_event_loop(None)
                loop.close()


class _SharedPortals:
    """Portals shared by name, kept while some client uses them.

    ``memory://NAME`` shares its engine among the clients of one event loop, so
    every sync client of ``memory://NAME`` must run on the same portal.
    """

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._portals: dict[str, tuple[Portal, int]] = {}
        _forks.after_fork_in_child(self._forget)

    def _forget(self) -> None:
        """In a child made by fork: the parent's portals are not running here (their
        threads did not survive), so the child's clients of ``memory://NAME`` start one
        of their own. (A new lock: another thread may have held the old one at the fork.)"""
        self._guard = threading.Lock()
        self._portals = {}

    def acquire(self, url: str) -> tuple[Portal, Callable[[], None]]:
        """A portal for ``url`` and the function that gives it back (once)."""
        parts = urlsplit(url) if isinstance(url, str) else None
        if parts is None or parts.scheme.lower() != "memory" or not parts.netloc:
            portal = Portal()
            return portal, portal.close
        key = parts.netloc
        with self._guard:
            if key in self._portals:
                portal, users = self._portals[key]
            else:
                portal, users = Portal(f"tenure-portal memory://{key}"), 0
            self._portals[key] = (portal, users + 1)
        released = False
        registry = self._portals  # (replaced in a child made by fork)

        def release() -> None:
            nonlocal released
            if self._portals is not registry:  # a parent's portal, in a child made by fork
                portal.close()
                return
            with self._guard:
                if released:
                    return
                released = True
                shared, users = self._portals[key]
                if users > 1:
                    self._portals[key] = (shared, users - 1)
                    return
                del self._portals[key]
            shared.close()

        return portal, release


shared_portals = _SharedPortals()


class _Call(Generic[T]):
    """One :meth:`Portal.call`: its task on the loop, and a bare lock its end releases.

    The calling thread waits on that lock alone, and the loop's thread only ever
    releases it: it never waits for anything the calling thread holds, so no
    interrupt of the calling thread can stop the loop.

    Waiting in a ``concurrent.futures.Future`` instead
    (``run_coroutine_threadsafe(...).result()``, as this did) let a Ctrl-C wedge the
    portal. The KeyboardInterrupt is raised where the calling thread next looks for a
    signal (after any call returns, among others), which may be in
    ``Condition.__enter__`` inside ``Future.result()``, just after it took the future's
    condition lock and before the ``with`` that releases it: the interrupt left with
    the lock held, and the loop's thread, cancelling the task as asked, blocked for
    good on that lock in ``Future.cancel()``, and with it every later call of the
    client. Raised a little earlier (after ``run_coroutine_threadsafe`` had queued the
    coroutine, before the ``try`` that cancels it), it left the request queued, never
    withdrawn; raised just after ``Condition.wait`` released the lock, it came out as
    ``RuntimeError: cannot release un-acquired lock``. All need the signal before the
    calling thread reaches its wait, which a loaded machine allows: the loop queues
    the request and a watcher sends SIGINT while the calling thread still waits for
    the GIL (tests/sync/test_interrupts.py walks every such place).

    So the calling thread may be interrupted between any two steps here: the state
    the threads share is single attribute stores, :meth:`withdraw` is right wherever
    the interrupt came, and the coroutine is made on the loop (never one left
    unawaited in the calling thread).
    """

    __slots__ = (
        "_done",
        "_error",
        "_finished",
        "_loop",
        "_make",
        "_result",
        "_submitted",
        "_task",
        "_thread",
        "_withdrawn",
    )

    def __init__(
        self, loop: asyncio.AbstractEventLoop, make: Callable[[], Coroutine[Any, Any, T]]
    ) -> None:
        self._loop = loop
        self._make = make
        self._thread = this_thread()  # (made in the calling thread) whom it acts for
        self._task: asyncio.Task[T] | None = None
        self._result: T | None = None
        self._error: BaseException | None = None
        self._submitted = False  # its start may have been queued on the loop
        self._withdrawn = False  # the calling thread left without the outcome
        self._finished = False  # the outcome is in (set on the loop before _done's release)
        self._done = threading.Lock()
        self._done.acquire()

    def submit(self) -> None:
        """In the calling thread: queue the start on the loop."""
        self._submitted = True  # first: interrupted after this, withdraw() asks the loop
        # (_start runs in a copy of this thread's context, as call_soon_threadsafe takes
        # it, and the task in a copy of that: the call sees what the calling thread set,
        # a trace's current span for the client's observers among them.)
        self._loop.call_soon_threadsafe(self._start)

    def outcome(self) -> T:
        """In the calling thread: wait for the end, then its result or its exception.

        The main thread, where Python runs signal handlers, waits in slices of
        :data:`SIGNAL_LOOK`: a SIGINT that lands after its last look for signals and
        before the lock's wait blocks does not interrupt that wait (CPython runs the
        handler only once the wait returns), so a Ctrl-C there was lost and the call
        went on waiting (tests/sync/test_relock.py hung so in a full run; looped on a
        loaded machine, within a thousand interrupted waits, and in none of 20,000
        since). A slice's end is such a look. Other threads get no signals: they wait
        in one piece.
        """
        if threading.current_thread() is threading.main_thread():
            while not self._done.acquire(timeout=SIGNAL_LOOK):
                pass
        else:
            self._done.acquire()
        if self._error is not None:
            raise self._error
        return cast(T, self._result)

    def withdraw(self) -> None:
        """In the calling thread, leaving without the outcome: cancel what may run."""
        self._withdrawn = True  # a start that has not run yet will not start
        if self._finished or not self._submitted:
            return
        # Queued after the start (if that was queued at all), so it runs after it.
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            self._loop.call_soon_threadsafe(self._cancel)

    def _start(self) -> None:
        """On the loop: make the coroutine and run it as a task (unless withdrawn)."""
        if self._withdrawn:
            return
        try:
            self._task = start_for_thread(self._loop, self._make(), self._thread)
        except BaseException as error:  # e.g. fn's arguments refused: the caller's error
            self._end(None, error)
            return
        self._task.add_done_callback(self._finish)

    def _cancel(self) -> None:
        """On the loop: cancel the task (if it started and has not ended).

        It no longer acts for the calling thread, which may call again before the task
        has wound down (a withdrawn acquire takes a round trip): what the task still
        holds or asks for must not refuse the thread's next call (:mod:`tenure.client._asking`).
        """
        if self._task is not None:
            withdraw(self._task)
            self._task.cancel()

    def _finish(self, task: asyncio.Task[T]) -> None:
        if task.cancelled():
            self._end(None, concurrent.futures.CancelledError())
        elif (error := task.exception()) is not None:
            self._end(None, error)
        else:
            self._end(task.result(), None)

    def _end(self, result: T | None, error: BaseException | None) -> None:
        self._result = result
        self._error = error
        self._finished = True
        self._done.release()
