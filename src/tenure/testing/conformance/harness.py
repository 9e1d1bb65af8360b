"""Harnesses: how the conformance kit reaches the backend under test.

A harness knows how to reach one backend: a URL factory (two URLs made from the
same state name reach the same state), the connect options, a clock (a
:class:`~tenure.testing.FakeClock` where the backend can run on one, else None),
and what the *test* can do to it, which is not the same as what the backend can do
(its :class:`~tenure.Capability` set, read from the backend itself):

* ``can_fake_time``: its expiry and timeouts follow a FakeClock the test moves;
* ``can_disconnect``: a session's connection can be dropped and restored;
* ``can_share_with_processes``: a client in another process (a child interpreter the
  test starts, and may ``kill -9``) reaches the test's state by its URL alone.

``--tenure-url=URL`` picks the harness by the URL's scheme (:func:`harness_for_url`):
``memory://`` can do both, any other URL (``tenure://``, a third party's scheme)
neither: it runs on the backend's real clock, over connections the kit does not
control. A project that starts its own servers passes its own harnesses instead
(:func:`use_harnesses`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar
from urllib.parse import urlsplit

import pytest

import tenure
from tenure.backends import BUILTIN, Capability
from tenure.testing._clock import FakeClock
from tenure.testing._connection import disconnect as memory_disconnect
from tenure.testing._connection import reconnect as memory_reconnect

#: ``await make_client()``: one more client on the test's state.
MakeClient = Callable[[], Awaitable[tenure.Client]]

#: ``await expire(session)``: drop its connection and let its recovery window pass.
Expire = Callable[[tenure.Session], Awaitable[None]]

#: ``drop_at_end(name)``: ``name``, a node the test makes beside ``node``, to be dropped
#: at the test's end.
DropAtEnd = Callable[[str], str]


def unique(prefix: str) -> str:
    """A name no other test (nor an earlier run against a persistent server) uses."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def in_ci() -> bool:
    """Whether this run is CI's (where a missing backend must fail, not skip)."""
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


class Harness:
    """How the kit reaches one backend. Subclass per kind of backend."""

    #: How test ids name it (``test_x[memory]``).
    name: str = "backend"
    can_fake_time: ClassVar[bool] = False
    can_disconnect: ClassVar[bool] = False
    #: Whether :meth:`url` reaches the same state from another process, with no
    #: connect options (:meth:`options` gives none): ``memory://`` lives in this one.
    can_share_with_processes: bool = False
    #: Whether the grants one operation makes on several semaphores at once (a
    #: session's end, the release of a lock_all's set) take their tokens in the
    #: engine's order. A backend whose waiters each commit their own grant (etcd://)
    #: gives them in the order the waiters commit: the differential test then holds
    #: them only to each semaphore's order and to the operations' order.
    orders_tokens_of_one_step: ClassVar[bool] = True

    #: What the backend declares (``client.capabilities``), read by :meth:`probe`.
    capabilities: frozenset[Capability] = frozenset()

    def unavailable(self) -> str | None:
        """Why the backend cannot be used here (server not installed...), or None."""
        return None

    def start(self) -> None:
        """Once per test run, before its first test (start a server subprocess...)."""

    def stop(self) -> None:
        """Once per test run, after its last test."""

    def probe(self) -> None:
        """Connect once and read the backend's :attr:`capabilities` (after :meth:`start`).

        Runs on an event loop of its own, before any test's loop exists.
        """

        async def read() -> frozenset[Capability]:
            async with tenure.connect(self.url(unique("probe")), **self.options(None)) as client:
                return client.capabilities

        loop = asyncio.new_event_loop()
        try:
            self.capabilities = loop.run_until_complete(read())
        finally:
            loop.close()

    def new_clock(self) -> FakeClock | None:
        """The clock of one test's state, or None when the backend keeps real time."""
        return None

    def url(self, state: str) -> str:
        """The URL of the state named ``state``: equal names give shared state."""
        raise NotImplementedError

    def options(self, clock: FakeClock | None) -> dict[str, Any]:
        """Keyword options for :func:`tenure.connect`."""
        return {}

    async def disconnect(self, session: tenure.Session, *, lose_pushes: bool = False) -> None:
        """Drop ``session``'s connection (its recovery window starts).

        ``lose_pushes``: what the server sends the session until it re-attaches is
        lost, as in flight on a dead connection.
        """
        raise NotImplementedError(f"{self.name} cannot drop connections")

    async def reconnect(self, session: tenure.Session) -> None:
        """Restore ``session``'s connection within its window (it re-attaches)."""
        raise NotImplementedError(f"{self.name} cannot drop connections")

    async def cleanup(self, node: str) -> None:
        """Remove what a test left behind, on a backend whose state outlives the test."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


class MemoryHarness(Harness):
    """``memory://NAME``: an in-process engine shared by name, on a FakeClock."""

    name = "memory"
    can_fake_time = True
    can_disconnect = True

    def new_clock(self) -> FakeClock:
        return FakeClock()

    def url(self, state: str) -> str:
        return f"memory://{state}"

    def options(self, clock: FakeClock | None) -> dict[str, Any]:
        return {} if clock is None else {"clock": clock}

    async def disconnect(self, session: tenure.Session, *, lose_pushes: bool = False) -> None:
        memory_disconnect(session, lose_pushes=lose_pushes)

    async def reconnect(self, session: tenure.Session) -> None:
        memory_reconnect(session)

    # cleanup(): nothing to do, the engine goes away with the test's last client.


class UrlHarness(Harness):
    """Any other URL: one shared backend on its own real clock, a fresh node per test.

    Every client connects to the same URL, so they share its state; tests do not
    meet because each works in its own node, dropped at its end. Time is the
    backend's real clock (no FakeClock) and the kit cannot cut its connections, so
    the tests that need either skip, saying so. A client in another process reaches
    the same state through the same URL when the scheme is one of tenure's own
    backends of a server (``tenure://``, ``etcd://``, ``redis://``, ``postgres://``);
    of a third party's scheme the kit cannot tell, and does not assume it.
    """

    def __init__(self, url: str) -> None:
        self._url = url
        scheme = urlsplit(url).scheme.lower()
        self.name = scheme or "url"
        self.can_share_with_processes = scheme in BUILTIN and scheme != "memory"

    def url(self, state: str) -> str:
        return self._url

    async def cleanup(self, node: str) -> None:
        async with tenure.connect(self.url(node)) as client:
            with contextlib.suppress(tenure.errors.NotFoundError):  # the test dropped it
                await client.drop_node(node, force=True)


def harness_for_url(url: str) -> Harness:
    """The harness of ``--tenure-url=URL``, chosen by its scheme."""
    if urlsplit(url).scheme.lower() == "memory":
        return MemoryHarness()
    return UrlHarness(url)


#: Where a project's own harnesses are kept (see :func:`use_harnesses`).
HARNESSES = pytest.StashKey[list[Harness]]()


def use_harnesses(config: pytest.Config, harnesses: list[Harness]) -> None:
    """Run the kit on ``harnesses`` when no ``--tenure-url`` is given (call it in
    ``pytest_configure``): how a project that starts its own servers plugs them in.
    """
    config.stash[HARNESSES] = list(harnesses)


def selected_harnesses(config: pytest.Config) -> list[Harness]:
    """The harnesses of this run: one per ``--tenure-url``, else those of :func:`use_harnesses`."""
    urls: list[str] = config.getoption("tenure_url", None) or []
    if urls:
        return [harness_for_url(url) for url in urls]
    harnesses = config.stash.get(HARNESSES, None)
    if harnesses is None:
        raise pytest.UsageError(
            "the tenure conformance kit needs a backend: pass --tenure-url=URL "
            "(e.g. --tenure-url=memory:// or --tenure-url=tenure://127.0.0.1:6388)"
        )
    return harnesses


class Network:
    """Drops and restores sessions' connections (the ``network`` fixture)."""

    def __init__(self, harness: Harness) -> None:
        self._harness = harness

    async def disconnect(self, session: tenure.Session, *, lose_pushes: bool = False) -> None:
        """The session's connection drops: its recovery window starts running.

        ``lose_pushes``: what the server sends it meanwhile is lost in flight, so
        :meth:`reconnect` must learn it from the session's state.
        """
        await self._harness.disconnect(session, lose_pushes=lose_pushes)

    async def reconnect(self, session: tenure.Session) -> None:
        """The connection comes back within the window: the session re-attaches."""
        await self._harness.reconnect(session)
