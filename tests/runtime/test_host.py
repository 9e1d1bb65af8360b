"""Host: who advances time, and what a durable host is told.

Time reaches the engine in exactly one place per path: ``Engine.apply`` ticks to a
command's time itself, and the host ticks only from its timer. A durable host still
learns (``_ticked``, before ``_applied``) when a command's way in changed the state,
also when the command then fails: that is what the journal logs.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tenure._core import (
    Acquire,
    AttachSession,
    CreateNode,
    CreateSemaphore,
    CreateSession,
    DetachSession,
    Effect,
    NodeConfig,
    SessionEnded,
)
from tenure._runtime.host import Host
from tenure.errors import SessionExpiredError

KEY = b"protection-key"


class ManualClock:
    """A clock whose time a test sets, and whose timer a test fires."""

    def __init__(self) -> None:
        self.time = 0.0
        self.timers: list[tuple[float, Callable[[], None]]] = []

    def now(self) -> float:
        return self.time

    def call_at(self, when: float, callback: Callable[[], None]) -> ManualClock:
        self.timers.append((when, callback))
        return self

    def cancel(self) -> None:
        self.timers.clear()


class RecordingHost(Host):
    """Records the durable-host hooks, in order."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock)
        self.calls: list[tuple[str, float]] = []
        self.delivered: list[Effect] = []

    def _ticked(self, now: float) -> None:
        self.calls.append(("ticked", now))

    def _applied(self, command: object, now: float) -> None:
        self.calls.append((type(command).__name__, now))

    def _deliver(self, effects: list[Effect]) -> None:
        self.delivered += effects


def detached_session(host: RecordingHost) -> int:
    host.execute(CreateNode("n", NodeConfig()))
    sid = host.execute(CreateSession("n", KEY, timeout=10.0)).session_id
    host.execute(DetachSession(sid))
    host.calls.clear()
    return sid


def test_a_command_with_nothing_due_reports_no_tick() -> None:
    clock = ManualClock()
    host = RecordingHost(clock)
    sid = detached_session(host)
    clock.time = 5.0
    host.execute(CreateSemaphore(sid, "s", 1))
    assert host.calls == [("CreateSemaphore", 5.0)]


def test_a_tick_on_a_commands_way_in_is_reported_before_it() -> None:
    clock = ManualClock()
    host = RecordingHost(clock)
    sid = detached_session(host)
    other = host.execute(CreateSession("n", KEY)).session_id
    host.calls.clear()
    clock.time = 12.0  # past sid's window; the timer has not fired
    host.execute(CreateSemaphore(other, "s", 1))
    assert host.calls == [("ticked", 12.0), ("CreateSemaphore", 12.0)]
    assert [type(e) for e in host.delivered] == [SessionEnded]
    assert host.engine.deadlines_handled == 1  # ticked once, not by host and engine both
    assert sid not in host.engine.sessions


def test_the_tick_is_reported_even_when_the_command_then_fails() -> None:
    clock = ManualClock()
    host = RecordingHost(clock)
    sid = detached_session(host)
    clock.time = 10.0
    with pytest.raises(SessionExpiredError):
        host.execute(AttachSession(sid, KEY, 2))
    assert host.calls == [("ticked", 10.0)]
    assert sid not in host.engine.sessions


def test_the_timer_ticks_when_no_command_comes() -> None:
    clock = ManualClock()
    host = RecordingHost(clock)
    sid = detached_session(host)
    ((when, fire),) = clock.timers
    clock.timers.clear()  # (it fires now)
    assert when == 10.0
    clock.time = when
    fire()
    assert host.calls == [("ticked", 10.0)]
    assert sid not in host.engine.sessions
    assert clock.timers == []  # nothing left to time: no timer re-armed


def test_a_failed_command_with_nothing_due_reports_nothing() -> None:
    clock = ManualClock()
    host = RecordingHost(clock)
    detached_session(host)
    with pytest.raises(SessionExpiredError):
        host.execute(Acquire(999, "s", 1, 1))
    assert host.calls == []


def test_a_reservation_is_given_the_hosts_wall_clock_whatever_the_client_sent() -> None:
    from tenure._core import CreateSemaphore, ReserveUnits
    from tenure._core.rates import Bucket, bucket_data, parse_bucket

    applied: list[object] = []

    class Logging(Host):
        def _applied(self, command: object, now: float) -> None:
            applied.append(command)

    host = Logging(ManualClock(), wall_clock=lambda: 1_750_000_000.0)
    host.execute(CreateNode("n", NodeConfig()))
    sid = host.execute(CreateSession("n", KEY, timeout=10.0)).session_id
    host.execute(CreateSemaphore(sid, "api", 1, bucket_data(Bucket(1.0, 1.0, 0.0))))
    reply = host.execute(ReserveUnits(sid, "api", 1, None, at=42.0))  # a forged time
    assert reply.at == 1_750_000_000.0
    assert applied[-1] == ReserveUnits(sid, "api", 1, None, at=1_750_000_000.0)  # as logged
    data = host.engine.nodes["n"].semaphores["api"].data
    assert parse_bucket("api", data).tat == 1_750_000_001.0


def test_a_claim_and_its_release_are_given_the_hosts_wall_clock() -> None:
    from tenure._core import ClaimName, ReleaseClaim
    from tenure._core.claims import parse_claim

    applied: list[object] = []

    class Logging(Host):
        def _applied(self, command: object, now: float) -> None:
            applied.append(command)

    wall = [1_750_000_000.0]
    host = Logging(ManualClock(), wall_clock=lambda: wall[0])
    host.execute(CreateNode("n", NodeConfig()))
    sid = host.execute(CreateSession("n", KEY, timeout=10.0)).session_id
    record = host.execute(ClaimName(sid, "job", "a" * 32, 5.0, 50.0, at=42.0))  # forged
    assert record.granted_at == 1_750_000_000.0
    claimed = applied[-1]
    assert claimed == ClaimName(sid, "job", "a" * 32, 5.0, 50.0, at=1_750_000_000.0)
    wall[0] += 1.0
    assert host.execute(ReleaseClaim("n", "job", "a" * 32, at=7.0))
    released = applied[-1]
    assert released == ReleaseClaim("n", "job", "a" * 32, at=1_750_000_001.0)
    data = host.engine.nodes["n"].semaphores["job"].data
    assert parse_claim("job", data).released_at == 1_750_000_001.0
