"""Backend harnesses: how the API suite reaches each backend.

A harness knows how to reach one backend: a URL factory (two URLs made from the
same state name reach the same state), the connect options, a clock (a
:class:`~tenure.testing.FakeClock` where the backend can run on one, else None),
and capability flags:

* ``can_fake_time``: its expiry and timeouts follow a FakeClock the test moves;
* ``can_disconnect``: a session's connection can be dropped and restored.

Adding a backend to the suite = adding a harness to ``ALL_HARNESSES`` (the fixtures
in ``tests/conftest.py`` do the rest).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, ClassVar

import tenure
from tenure.testing import FakeClock
from tenure.testing import disconnect as memory_disconnect
from tenure.testing import reconnect as memory_reconnect

#: ``await make_client()``: one more client on the test's state.
MakeClient = Callable[[], Awaitable[tenure.Client]]

#: ``await expire(session)``: drop its connection and let its recovery window pass.
Expire = Callable[[tenure.Session], Awaitable[None]]


def unique(prefix: str) -> str:
    """A name no other test (nor an earlier run against a persistent server) uses."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def in_ci() -> bool:
    """Whether this run is CI's (where a missing backend must fail, not skip)."""
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


class Harness:
    """How the API suite reaches one backend. Subclass per backend."""

    name: ClassVar[str]
    can_fake_time: ClassVar[bool] = False
    can_disconnect: ClassVar[bool] = False

    def unavailable(self) -> str | None:
        """Why the backend cannot be used here (server not installed...), or None."""
        return None

    def start(self) -> None:
        """Once per test run, before its first test (start a server subprocess...)."""

    def stop(self) -> None:
        """Once per test run, after its last test."""

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


class TenureHarness(Harness):
    """``tenure://``: one real ``tenure serve`` subprocess for the whole run.

    Tests share the server; each works in its own fresh node, so they do not meet.
    Time is the server's real clock (no FakeClock), so tests that need ``clock``
    skip here; tests/backends/test_remote_*.py cover expiry and disconnects in real
    time, through a TCP proxy.
    """

    name = "tenure"

    def __init__(self) -> None:
        self._tmp: Path | None = None
        self._server: Any = None

    def start(self) -> None:
        from tests.server.wire import ServerProcess  # a test helper: imported when used

        self._tmp = Path(tempfile.mkdtemp(prefix="tenure-api-"))
        # fsync off: the suite tests the API, not the disk (tests/server covers it).
        server = ServerProcess(self._tmp / "data", "--fsync", "off")
        self._server = server.__enter__()

    def stop(self) -> None:
        if self._server is not None:
            self._server.kill()
            self._server = None
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)

    def url(self, state: str) -> str:
        assert self._server is not None, "the harness was not started"
        return f"tenure://127.0.0.1:{self._server.port}"

    async def cleanup(self, node: str) -> None:
        async with tenure.connect(self.url(node)) as client:
            with contextlib.suppress(tenure.errors.NotFoundError):  # the test dropped it
                await client.drop_node(node, force=True)


#: Every backend the API suite runs on. Real servers (etcd, postgres, redis) join
#: here; their ``unavailable()`` says when their server is missing.
ALL_HARNESSES: list[Harness] = [MemoryHarness(), TenureHarness()]


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
