"""The portal: an asyncio event loop in a background thread, and the door into it.

Every :class:`tenure.sync.Client` runs the one asyncio implementation of tenure
on a portal's loop. A sync method submits a coroutine with
:meth:`Portal.call` and blocks the calling thread until it is done, while the
loop goes on serving everything else: session keep-alive, lease renewal, loss
notices. This is the "blocking portal" pattern, built on the standard library
(:func:`asyncio.run_coroutine_threadsafe` and a :class:`threading.Thread`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar
from urllib.parse import urlsplit

from tenure.errors import ClientClosedError

P = ParamSpec("P")
T = TypeVar("T")


class Portal:
    """An event loop running in its own (daemon) thread until :meth:`close`.

    Made by :func:`tenure.sync.connect`; reach it as ``client.portal`` to run your
    own coroutines next to the client's, e.g. ``client.portal.call(clock.advance, 31)``
    to move a :class:`~tenure.testing.FakeClock`.
    """

    def __init__(self, name: str = "tenure-portal") -> None:
        self._loop = asyncio.new_event_loop()
        self._guard = threading.Lock()
        self._closed = False
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
        """Whether :meth:`close` was called."""
        return self._closed

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

        Returns its result or raises its exception. If the calling thread is
        interrupted (KeyboardInterrupt), the coroutine is cancelled.

        Raises:
            ClientClosedError: the portal (its client) is closed.
            RuntimeError: called from the portal thread itself, which would deadlock.
        """
        if self.in_portal_thread():
            raise RuntimeError(
                "tenure.sync: blocking call from the portal thread (an on_lost callback?) "
                "would deadlock; hand the work to another thread"
            )
        with self._guard:
            if self._closed:
                raise ClientClosedError("the client is closed")
            future = asyncio.run_coroutine_threadsafe(fn(*args, **kwargs), self._loop)
        try:
            return future.result()
        except concurrent.futures.CancelledError:
            if self._closed:
                raise ClientClosedError("the client was closed during the call") from None
            raise
        except BaseException:
            future.cancel()  # only has an effect if the wait itself was interrupted
            raise

    def close(self) -> None:
        """Stop the loop (cancelling what still runs on it) and join its thread. Idempotent."""
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

        def release() -> None:
            nonlocal released
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
