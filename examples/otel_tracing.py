"""OpenTelemetry: spans of acquires and holds, wait and hold times, and the trace that
holds a lock, as ``tenure describe`` shows it.

``tenure.contrib.otel.instrument()`` traces every client of the process. Two
requests, each in a span of its own, want the same report lock: the first holds it
while the second waits. Each acquire is a ``tenure.acquire`` span and each hold a
``tenure.hold`` span, in the trace of the request that made it; while a lock is
held, its owner data is that trace's context (a W3C ``traceparent``), which a
``describe`` (here, or ``tenure describe NODE NAME``) shows to whoever looks. The
histograms ``tenure.wait.duration`` and ``tenure.hold.duration`` count them.

An application configures its own SDK and exporters (OTLP to a collector, say);
this one prints each span as it ends, and the histograms' counts at the end. Needs
``pip install 'tenure[otel]' opentelemetry-sdk``.

Run it with::

    python examples/otel_tracing.py                                      # in-process
    TENURE_URL=tenure://127.0.0.1:6388 python examples/otel_tracing.py   # against tenure serve
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

import tenure
import tenure.contrib.otel


async def holder(mutex: tenure.Mutex) -> str:
    """The trace that holds ``mutex``, read from its owner's data (what ``describe`` shows)."""
    described = await mutex.describe()
    if described.owner is None:
        return "none (free)"
    found = tenure.contrib.otel.span_context_of(described.owner.data)
    return "none" if found is None else f"{found.trace_id:032x}"


class PrintingExporter(SpanExporter):
    """Prints one line per span ended: its name, its trace, and tenure's attributes."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        for span in spans:
            attributes = dict(span.attributes or {})
            shown = " ".join(
                f"{key.removeprefix('tenure.')}={attributes[key]}"
                for key in ("tenure.name", "tenure.outcome", "tenure.token", "tenure.hold.end")
                if key in attributes
            )
            trace_id = span.context.trace_id if span.context is not None else 0
            print(f"span {span.name:<16} trace {trace_id:032x} {shown}".rstrip())
        return SpanExportResult.SUCCESS


async def main() -> None:
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(PrintingExporter()))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    # Usually: trace.set_tracer_provider(...) once, and instrument() with no arguments.
    tenure.contrib.otel.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    tracer = tracer_provider.get_tracer("reports-service")
    first_holds = asyncio.Event()

    async with tenure.connect(os.environ.get("TENURE_URL", "memory://")) as client:
        await client.create_node("otel-demo", exist_ok=True)

        async def request(name: str) -> None:
            with tracer.start_as_current_span(name) as span:
                trace_id = span.get_span_context().trace_id
                print(f"{name}: trace {trace_id:032x}")
                async with client.session("otel-demo", description=name) as session:
                    mutex = session.mutex("nightly-report")
                    print(f"{name}: 'nightly-report' is held by trace {await holder(mutex)}")
                    async with mutex as lock:
                        print(f"{name}: holds it, token {lock.token}, owner data {lock.data!r}")
                        print(f"{name}: 'nightly-report' is held by trace {await holder(mutex)}")
                        first_holds.set()
                        await asyncio.sleep(0.05)

        first = asyncio.create_task(request("request-1"))
        await first_holds.wait()
        await asyncio.gather(first, request("request-2"))

    tenure.contrib.otel.uninstrument()
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data is not None else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    if isinstance(point, HistogramDataPoint):
                        labels = dict(point.attributes or {})
                        how = labels.get("tenure.outcome", labels.get("tenure.hold.end"))
                        print(f"{metric.name}: {point.count} {how}")


if __name__ == "__main__":
    asyncio.run(main())
