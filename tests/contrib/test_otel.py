"""tenure.contrib.otel with the OpenTelemetry SDK's in-memory exporter and reader.

On ``memory://`` (a FakeClock where a wait must pass): the spans of acquires and
holds with their attributes, parents and links, each outcome (granted, busy, timeout,
cancelled, deadlock, lost), a hold's loss, lock_all; the histograms; the trace context
in the owner data (only where the caller gave none), read back by ``span_context_of``;
``instrument()`` for every client, the sync face's spans under the calling thread's.
tests/contrib/test_otel_server.py shows it in ``tenure describe`` and the dashboard.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import tenure
import tenure.sync
from tenure.contrib import otel
from tenure.errors import DeadlockError, SessionExpiredError
from tenure.testing import FakeClock, disconnect
from tenure.testing.conformance.support import eventually, settle, within


class Telemetry:
    """An SDK tracer provider and meter provider whose output stays in memory."""

    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.tracer = self.tracer_provider.get_tracer("app")

    def instrumentation(self, **options: Any) -> otel.Instrumentation:
        return otel.Instrumentation(
            tracer_provider=self.tracer_provider, meter_provider=self.meter_provider, **options
        )

    def finished(self, name: str | None = None) -> list[ReadableSpan]:
        return [s for s in self.spans.get_finished_spans() if name is None or s.name == name]

    def points(self, metric: str) -> list[HistogramDataPoint]:
        data = self.reader.get_metrics_data()
        assert data is not None
        return [
            point
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for found in scope.metrics
            if found.name == metric
            for point in found.data.data_points
            if isinstance(point, HistogramDataPoint)
        ]


def attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def counted(points: Sequence[HistogramDataPoint], **wanted: str) -> int:
    """How many measurements the points whose attributes include ``wanted`` hold."""
    return sum(
        point.count
        for point in points
        if all(
            (point.attributes or {}).get(f"tenure.{key}") == value for key, value in wanted.items()
        )
    )


async def until(condition: Any, what: str) -> None:
    async def check() -> bool:
        return bool(condition())

    await eventually(check, what)


@pytest.fixture
def telemetry() -> Telemetry:
    return Telemetry()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def client(telemetry: Telemetry, clock: FakeClock) -> AsyncIterator[tenure.Client]:
    observers = [telemetry.instrumentation()]
    async with tenure.connect("memory://otel", clock=clock, observers=observers) as client:
        await client.create_node("app")
        yield client


async def test_an_acquire_and_its_hold_are_spans_of_the_callers_trace(
    client: tenure.Client, telemetry: Telemetry
) -> None:
    async with client.session("app") as session:
        with telemetry.tracer.start_as_current_span("nightly-report") as caller:
            async with session.mutex("report").lock(timeout=30) as lock:
                described = await session.mutex("report").describe()
    [acquire] = telemetry.finished(otel.ACQUIRE_SPAN)
    [hold] = telemetry.finished(otel.HOLD_SPAN)
    trace_id = caller.get_span_context().trace_id
    for span in (acquire, hold):
        assert span.context is not None
        assert span.context.trace_id == trace_id
        assert span.parent is not None
        assert span.parent.span_id == caller.get_span_context().span_id
    assert acquire.kind is SpanKind.CLIENT
    assert hold.kind is SpanKind.INTERNAL
    asked = attributes(acquire)
    waited = asked.pop("tenure.wait.duration")
    assert isinstance(waited, float)
    assert waited >= 0
    assert asked == {
        "tenure.node": "app",
        "tenure.name": "report",
        "tenure.kind": "Lock",
        "tenure.exclusive": True,  # (every token: no tenure.count, past an int64)
        "tenure.timeout": 30.0,
        "tenure.session.id": session.id,
        "tenure.outcome": "granted",
        "tenure.token": lock.token,
    }
    ended = attributes(hold)
    held = ended.pop("tenure.hold.duration")
    assert isinstance(held, float)
    assert held >= 0
    assert ended == {
        "tenure.node": "app",
        "tenure.name": "report",
        "tenure.kind": "Lock",
        "tenure.exclusive": True,
        "tenure.token": lock.token,
        "tenure.session.id": session.id,
        "tenure.hold.end": "released",
    }
    assert [link.context for link in hold.links] == [acquire.context]
    assert acquire.status.status_code is hold.status.status_code is StatusCode.UNSET
    assert acquire.end_time is not None
    assert hold.start_time is not None
    assert acquire.end_time <= hold.start_time
    # The owner data is the acquire's span context: describe shows which trace holds it.
    assert described.owner is not None
    assert lock.data == described.owner.data
    assert described.owner.data == otel.traceparent(acquire.context).encode()
    found = otel.span_context_of(described.owner.data)
    assert found is not None
    assert found.is_remote
    assert (found.trace_id, found.span_id) == (trace_id, acquire.context.span_id)


async def test_each_outcome_of_an_acquire(
    client: tenure.Client, telemetry: Telemetry, clock: FakeClock
) -> None:
    async with client.session("app") as first, client.session("app") as second:
        await first.mutex("job").lock()
        assert await second.mutex("job").try_lock() is None
        waiting = asyncio.create_task(second.mutex("job").lock(timeout=10))
        await settle()
        await clock.advance(11)
        with pytest.raises(TimeoutError):
            await within(waiting)
        cancelled = asyncio.create_task(second.mutex("job").lock())
        await settle()
        cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        # A deadlock: a task holds "a" and waits for "b", which this task holds as
        # it asks for "a".
        holds_a = asyncio.Event()

        async def a_then_b() -> None:
            async with first.mutex("a"):
                holds_a.set()
                async with first.mutex("b"):
                    pass

        async with second.mutex("b"):
            crossing = asyncio.create_task(a_then_b())
            await within(holds_a.wait())
            await settle()
            with pytest.raises(DeadlockError):
                await second.mutex("a").lock()
        await within(crossing)
    outcomes = [(attributes(s)["tenure.outcome"], s) for s in telemetry.finished(otel.ACQUIRE_SPAN)]
    assert sorted(o for o, _ in outcomes) == [
        "busy",
        "cancelled",
        "deadlock",
        *["granted"] * 4,
        "timeout",
    ]
    for outcome, error in (("timeout", "TimeoutError"), ("deadlock", "DeadlockError")):
        [span] = [s for o, s in outcomes if o == outcome]
        assert span.status.status_code is StatusCode.ERROR
        assert attributes(span)["error.type"] == error
    for outcome in ("busy", "cancelled"):
        for o, span in outcomes:
            if o == outcome:
                assert span.status.status_code is StatusCode.UNSET
                assert "error.type" not in attributes(span)
    waits = telemetry.points("tenure.wait.duration")
    assert counted(waits, outcome="granted") == 4
    assert counted(waits, outcome="busy") == 1
    assert counted(waits, outcome="timeout") == 1
    assert counted(waits, outcome="deadlock") == 1
    assert counted(waits, outcome="cancelled") == 1
    assert all("tenure.name" not in (point.attributes or {}) for point in waits)


async def test_a_lost_hold_ends_its_span_with_an_event(
    client: tenure.Client, telemetry: Telemetry, clock: FakeClock
) -> None:
    session = await client.session("app", recovery_window=5)
    await session.mutex("job").lock()
    disconnect(session)
    await clock.advance(6)
    await until(lambda: telemetry.finished(otel.HOLD_SPAN), "the hold's span ended")
    [hold] = telemetry.finished(otel.HOLD_SPAN)
    assert attributes(hold)["tenure.hold.end"] == "lost"
    assert hold.status.status_code is StatusCode.ERROR
    [event] = hold.events
    assert event.name == "tenure.lost"
    assert dict(event.attributes or {})["error.type"] == SessionExpiredError.__qualname__
    holds = telemetry.points("tenure.hold.duration")
    assert counted(holds, **{"hold.end": "lost"}) == 1


async def test_lock_all_is_one_acquire_span_and_a_hold_span_per_lock(
    client: tenure.Client, telemetry: Telemetry
) -> None:
    async with client.session("app") as session:
        async with session.lock_all(["b", "a"]) as held:
            tokens = [held.tokens["b"], held.tokens["a"]]
        await session.semaphore("pool").create(5)
        async with session.acquire("pool", 2) as lease:
            pass
    acquires = telemetry.finished(otel.ACQUIRE_SPAN)
    assert attributes(acquires[0])["tenure.names"] == ("b", "a")
    assert attributes(acquires[0])["tenure.tokens"] == tuple(tokens)
    assert "tenure.name" not in attributes(acquires[0])
    holds = telemetry.finished(otel.HOLD_SPAN)
    assert sorted(attributes(s)["tenure.name"] for s in holds[:2]) == ["a", "b"]
    # A semaphore's acquire tells its count, and is not exclusive.
    pool = attributes(acquires[1])
    assert (pool["tenure.count"], pool["tenure.exclusive"], pool["tenure.kind"]) == (
        2,
        False,
        "Lease",
    )
    assert attributes(holds[2])["tenure.token"] == lease.token


async def test_the_trace_goes_only_into_data_the_caller_left_empty(
    telemetry: Telemetry, clock: FakeClock
) -> None:
    observers = [telemetry.instrumentation(name_in_metrics=True)]
    async with tenure.connect("memory://", clock=clock, observers=observers) as client:
        await client.create_node("app")
        async with client.session("app") as session:
            lock = await session.mutex("mine").lock(data=b"host-7")
            assert lock.data == b"host-7"
            member = await session.group("workers").join("w1", data=b"w")
            assert await session.group("workers").members() == {"w1": b"w"}
            assert member.held
            # An election's data is the leader's message to its observers: left alone.
            leadership = await session.election("leader").campaign(b"")
            assert leadership.data == b""
            leader = await session.election("leader").leader()
            assert leader is not None
            assert leader.data == b""
            plain = await session.acquire("pool", 1, ephemeral=True)
            assert otel.span_context_of(plain.data) is not None
    # name_in_metrics: the histograms name the semaphore.
    waits = telemetry.points("tenure.wait.duration")
    assert {(p.attributes or {}).get("tenure.name") for p in waits} == {
        "mine",
        "workers",
        "leader",
        "pool",
    }
    # owner_data=False: never, and no tracer configured: nothing either.
    for instrumentation in (
        telemetry.instrumentation(owner_data=False),
        otel.Instrumentation(tracer_provider=trace.NoOpTracerProvider()),
    ):
        async with tenure.connect("memory://", observers=[instrumentation]) as client:
            await client.create_node("app")
            async with client.session("app") as session:
                assert (await session.mutex("job").lock()).data == b""


def test_span_context_of_reads_a_traceparent_only() -> None:
    found = otel.span_context_of(b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
    assert found is not None
    assert (found.trace_id, found.span_id, int(found.trace_flags)) == (
        0x0AF7651916CD43DD8448EB211C80319C,
        0xB7AD6B7169203331,
        1,
    )
    for data in (
        b"",
        b"host-7",
        b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01 extra",
        b"01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        b"00-00000000000000000000000000000000-b7ad6b7169203331-01",
        b"00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
    ):
        assert otel.span_context_of(data) is None, data


@pytest.fixture
def installed(telemetry: Telemetry) -> Iterator[otel.Instrumentation]:
    yield otel.instrument(
        tracer_provider=telemetry.tracer_provider, meter_provider=telemetry.meter_provider
    )
    otel.uninstrument()


async def test_instrument_traces_every_client_once(
    installed: otel.Instrumentation, telemetry: Telemetry
) -> None:
    async with tenure.connect("memory://") as client:
        await client.create_node("app")
        async with client.session("app") as session:
            await (await session.mutex("job").lock()).release()
            again = otel.instrument(
                tracer_provider=telemetry.tracer_provider,
                meter_provider=telemetry.meter_provider,
            )
            assert again is not installed  # replaced, not added
            await (await session.mutex("job").lock()).release()
            assert otel.uninstrument() is True
            assert otel.uninstrument() is False
            await (await session.mutex("job").lock()).release()
    assert len(telemetry.finished(otel.ACQUIRE_SPAN)) == 2


def test_the_sync_face_traces_under_the_calling_threads_span(telemetry: Telemetry) -> None:
    observers = [telemetry.instrumentation()]
    with tenure.sync.connect("memory://", observers=observers) as client:
        client.create_node("app")
        with (
            client.session("app") as session,
            telemetry.tracer.start_as_current_span("request") as request,
            session.mutex("job") as lock,
        ):
            token = lock.token
    [acquire] = telemetry.finished(otel.ACQUIRE_SPAN)
    [hold] = telemetry.finished(otel.HOLD_SPAN)
    for span in (acquire, hold):
        assert span.parent is not None
        assert span.parent.span_id == request.get_span_context().span_id
    assert attributes(hold)["tenure.token"] == token
