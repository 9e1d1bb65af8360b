"""Host: who advances time, and what its journal and writer are told.

Time reaches the engine in exactly one place per path: ``Engine.apply`` ticks to a
command's time itself, and the host ticks only from its timer. A host's journal
still learns (``log_tick``, before ``log_command``) when a command's way in changed
the state, also when the command then fails: that is what the journal logs. Its
writer is told of every step, and whether it logged anything.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tenure._core import (
    Acquire,
    AttachSession,
    Command,
    CreateNode,
    CreateSemaphore,
    CreateSession,
    DescribeNode,
    DetachSession,
    Effect,
    Engine,
    KillSession,
    NodeConfig,
    SessionEnded,
)
from tenure._protocol.payloads import encode_command
from tenure._runtime.host import Host
from tenure.errors import SessionExpiredError, UnavailableError

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


class RecordingJournal:
    """Records what the host logs, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, float]] = []
        self.commands: list[object] = []
        self.raw: list[bytes | None] = []

    def log_command(
        self, command: Command[object], now: float, actor: str, raw: bytes | None
    ) -> None:
        self.calls.append((type(command).__name__, now))
        self.commands.append(command)
        self.raw.append(raw)

    def log_tick(self, now: float) -> None:
        self.calls.append(("ticked", now))

    def log_record(self, record: bytes) -> None:
        self.calls.append(("record", float(len(record))))


class RecordingWriter:
    """Admits everything and records the steps it is told of."""

    ticking = True
    dead = False

    def __init__(self) -> None:
        self.steps: list[bool] = []
        self.failures: list[str] = []

    def admit(self, command: Command[object], actor: str, now: float) -> None:
        pass

    def admit_request(self, actor: str, now: float) -> None:
        pass

    def stepped(self, logged: bool) -> None:
        self.steps.append(logged)

    def failed(self, what: str, error: BaseException) -> None:
        self.failures.append(what)
        self.dead = True
        self.ticking = False

    async def committed(self) -> None:
        pass


class RecordingHost(Host):
    """A host given a recording journal and writer; effects kept as routed."""

    def __init__(self, clock: ManualClock, **options: Any) -> None:
        self.log = RecordingJournal()
        self.writer_seen = RecordingWriter()
        super().__init__(Engine(), clock, self.log, self.writer_seen, **options)
        self.delivered: list[Effect] = []
        self.route = self.delivered.extend

    @property
    def calls(self) -> list[tuple[str, float]]:
        return self.log.calls


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

    host = RecordingHost(ManualClock(), wall_clock=lambda: 1_750_000_000.0)
    applied = host.log.commands
    host.execute(CreateNode("n", NodeConfig()))
    sid = host.execute(CreateSession("n", KEY, timeout=10.0)).session_id
    host.execute(CreateSemaphore(sid, "api", 1, bucket_data(Bucket(1.0, 1.0, 0.0))))
    forged = ReserveUnits(sid, "api", 1, None, at=42.0)
    reply = host.execute(forged, "", encode_command(forged))  # a forged time, as sent
    assert reply.at == 1_750_000_000.0
    assert applied[-1] == ReserveUnits(sid, "api", 1, None, at=1_750_000_000.0)  # as logged
    assert host.log.raw[-1] is None  # (encoded as the host made it, not logged as sent)
    data = host.engine.nodes["n"].semaphores["api"].data
    assert parse_bucket("api", data).tat == 1_750_000_001.0


def test_a_claim_and_its_release_are_given_the_hosts_wall_clock() -> None:
    from tenure._core import ClaimName, ReleaseClaim
    from tenure._core.claims import parse_claim

    wall = [1_750_000_000.0]
    host = RecordingHost(ManualClock(), wall_clock=lambda: wall[0])
    applied = host.log.commands
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


def test_the_writer_hears_each_step_and_whether_it_logged() -> None:
    clock = ManualClock()
    host = RecordingHost(clock)
    detached_session(host)
    host.writer_seen.steps.clear()
    with pytest.raises(SessionExpiredError):
        host.execute(Acquire(999, "s", 1, 1))  # failed, nothing due: nothing logged
    host.execute(DescribeNode("n"))  # succeeded (the journal skips what only reads)
    assert host.writer_seen.steps == [False, True]


def test_the_bytes_a_client_sent_are_handed_to_the_journal() -> None:
    host = RecordingHost(ManualClock())
    command = CreateNode("n", NodeConfig())
    host.execute(command, "", encode_command(command))
    assert host.log.raw == [encode_command(command)]


def test_a_journal_that_fails_makes_the_writer_stop_and_the_command_unavailable() -> None:
    class Failing(RecordingJournal):
        def log_command(
            self, command: Command[object], now: float, actor: str, raw: bytes | None
        ) -> None:
            raise OSError("disk full")

    clock = ManualClock()
    writer = RecordingWriter()
    host = Host(Engine(), clock, Failing(), writer)
    with pytest.raises(UnavailableError, match="failed to log"):
        host.execute(CreateNode("n", NodeConfig()))
    assert writer.failures == ["writing to the journal"]
    assert host.dead


def test_a_journal_needs_a_writer() -> None:
    with pytest.raises(ValueError, match="needs a writer"):
        Host(Engine(), ManualClock(), RecordingJournal())


def test_memory_hosts_route_to_the_sessions_sinks() -> None:
    host = Host(Engine(), ManualClock())  # (memory://'s: no journal, no writer)
    sid = detached_session_of(host)
    heard: list[Effect] = []
    host.subscribe(sid, heard.append)
    host.execute(KillSession("n", sid))
    assert [type(effect) for effect in heard] == [SessionEnded]
    assert not host.dead


def detached_session_of(host: Host) -> int:
    host.execute(CreateNode("n", NodeConfig()))
    return host.execute(CreateSession("n", KEY, timeout=10.0)).session_id
