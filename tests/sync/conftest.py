"""Fixtures for the sync facade: a FakeClock-driven memory:// client and sessions.

Tests that take ``shared_url`` run twice: on memory:// and on a real ``tenure serve``.
"""

from __future__ import annotations

import signal
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import tenure.sync
from tenure.testing import FakeClock
from tests.server.wire import ServerProcess

NODE = "app"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def client(clock: FakeClock) -> Iterator[tenure.sync.Client]:
    before = set(threading.enumerate())
    with tenure.sync.connect("memory://", clock=clock) as client:
        client.create_node(NODE, recovery_window=15.0)
        yield client
    # Threads of earlier tests (gRPC's, a server's) may end meanwhile: only a thread
    # that started during this one and still runs is the portal's.
    started = set(threading.enumerate()) - before
    assert not started, f"the portal thread outlived its client: {started}"


@pytest.fixture
def session(client: tenure.sync.Client) -> Iterator[tenure.sync.Session]:
    session = client.session(NODE, recovery_window=15.0, description="first")
    yield session
    session.close()


@pytest.fixture
def other(client: tenure.sync.Client) -> Iterator[tenure.sync.Session]:
    session = client.session(NODE, recovery_window=15.0, description="second")
    yield session
    session.close()


@pytest.fixture
def memory_url() -> str:
    """A fresh memory:// name: clients made from it share one engine and one portal."""
    return f"memory://sync-{uuid.uuid4().hex}"


@pytest.fixture(params=["memory", "tenure"])
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A URL whose clients share state: a memory:// name, or a fresh ``tenure serve``."""
    if request.param == "memory":
        yield f"memory://sync-{uuid.uuid4().hex}"
        return
    with ServerProcess(tmp_path / "data", "--fsync", "off") as server:
        yield f"tenure://127.0.0.1:{server.port}"


def advance(client: tenure.sync.Client, clock: FakeClock, seconds: float) -> None:
    """Move the fake clock on the client's loop."""
    client.portal.call(clock.advance, seconds)


def wait_for_waiters(session: tenure.sync.Session, name: str, count: int) -> None:
    """Block (on watch notifications, not sleeps) until ``name`` has ``count`` waiters."""
    with session.semaphore(name).watch(waiters=True) as stream:
        for description in stream:
            if len(description.waiters) >= count:
                return


def interrupted_once_queued(
    watched: tenure.sync.Session, name: str, call: Callable[[], object]
) -> threading.Thread:
    """Run ``call()`` (an acquire of ``name`` that blocks) in this thread, the main
    one, and Ctrl-C it (a real SIGINT, which wakes the blocked wait) once ``watched``
    sees it queued: it must raise KeyboardInterrupt. The thread that sent the
    signal, to join."""
    main = threading.main_thread().ident
    assert main is not None
    assert threading.get_ident() == main

    def interrupt_once_queued() -> None:
        wait_for_waiters(watched, name, 1)
        signal.pthread_kill(main, signal.SIGINT)

    # Python raises KeyboardInterrupt on SIGINT only if it found SIGINT at its default
    # when it started: a test run started in the background of a shell (`cmd &`)
    # inherits it ignored, and the wait then went on until the test's timeout.
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    thread = threading.Thread(target=interrupt_once_queued)
    thread.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            call()
    finally:
        signal.signal(signal.SIGINT, inherited)
    return thread
