"""Which trace holds a lock, as operators see it: a real ``tenure serve --http-port``,
a client instrumented by ``tenure.contrib.otel.instrument()`` holding a mutex inside a
span, and what ``tenure describe`` (the installed command) and the dashboard's API
show of its owner: the acquire's ``traceparent``, in the caller's trace.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tenure
from tenure.contrib import otel
from tests.cli.support import run_tenure
from tests.server.wire import WAIT, ServerProcess, free_port

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[ServerProcess, int]]:
    http = free_port()
    with ServerProcess(tmp_path / "data", "--fsync", "off", "--http-port", str(http)) as server:
        yield server, http


async def board(http: int) -> dict[str, Any]:
    """The dashboard's view (``GET /dashboard/api/board``)."""
    timeout = aiohttp.ClientTimeout(total=WAIT)
    async with (
        aiohttp.ClientSession(timeout=timeout) as client,
        client.get(f"http://127.0.0.1:{http}/dashboard/api/board") as response,
    ):
        assert response.status == 200
        answer: dict[str, Any] = await response.json(content_type=None)
        view: dict[str, Any] = answer["view"]
        return view


async def test_describe_and_the_dashboard_show_the_trace_that_holds_a_lock(
    served: tuple[ServerProcess, int],
) -> None:
    server, http = served
    url = f"tenure://127.0.0.1:{server.port}"
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    otel.instrument(tracer_provider=provider)
    try:
        async with tenure.connect(url) as client:
            await client.create_node("app")
            async with client.session("app", description="reports") as session:
                tracer = provider.get_tracer("app")
                with tracer.start_as_current_span("nightly-report") as report:
                    async with session.mutex("report").lock() as lock:
                        described = await asyncio.to_thread(
                            run_tenure, "describe", "app", "report", "--json", url=url
                        )
                        view = await board(http)
    finally:
        otel.uninstrument()
    trace_id = report.get_span_context().trace_id
    [acquire] = [s for s in spans.get_finished_spans() if s.name == otel.ACQUIRE_SPAN]
    assert acquire.context is not None
    expected = otel.traceparent(acquire.context)
    assert lock.data == expected.encode()
    # tenure describe: the owner's data is the traceparent, of the caller's trace.
    assert described.returncode == 0, described.stderr
    [owner] = json.loads(described.stdout)["owners"]
    assert owner["data"] == expected
    assert owner["token"] == lock.token
    found = otel.span_context_of(owner["data"].encode())
    assert found is not None
    assert found.trace_id == trace_id
    # The dashboard: the same, on the mutex's holder.
    [node] = view["board"]["nodes"]
    [mutex] = [s for s in node["semaphores"] if s["name"] == "report"]
    [holder] = mutex["owners"]
    assert (holder["data"], holder["token"], holder["description"]) == (
        expected,
        lock.token,
        "reports",
    )
