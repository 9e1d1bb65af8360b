"""OpenTelemetry for tenure's clients: spans of acquires and holds, histograms of their
times, and the trace that holds a lock in its owner data (``pip install 'tenure[otel]'``).

It is an observer of the clients (:class:`tenure.Observer`), over opentelemetry-api
alone: with no SDK configured the API's tracer and meter do nothing, and cost next to
nothing. Every client of the process at once::

    import tenure.contrib.otel

    tenure.contrib.otel.instrument()  # the global tracer and meter providers

or one client: ``tenure.connect(url, observers=[tenure.contrib.otel.Instrumentation()])``.

What it makes, under names of its own (there is no semantic convention for locks yet;
docs/operations.md, "OpenTelemetry", is the reference):

* a span ``tenure.acquire`` (kind CLIENT) per acquire, from the call to its grant or
  failure, a child of the caller's current span: ``tenure.node``, ``tenure.name``
  (``tenure.names`` for a lock_all), ``tenure.kind``, ``tenure.count`` or
  ``tenure.exclusive``, ``tenure.timeout``, ``tenure.session.id``, and at its end
  ``tenure.outcome``, ``tenure.wait.duration``, ``tenure.token`` (``tenure.tokens``);
* a span ``tenure.hold`` per hold granted, from the grant to its release or loss
  (``tenure.hold.end``; a loss adds the event ``tenure.lost`` and the status ERROR),
  linked to its acquire's span;
* histograms ``tenure.wait.duration`` and ``tenure.hold.duration`` (seconds);
* the acquire's span context as its owner data (the W3C ``traceparent``, e.g.
  ``00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01``), where the caller gave
  none: ``tenure describe`` and the dashboard then show which trace holds the lock,
  and :func:`span_context_of` reads it back (to link a waiter's trace to the holder's).
  Never over data a caller or a recipe gave, nor as an election's leader data (what
  its observers are told); ``owner_data=False``: never at all.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Sequence
from functools import partial
from typing import Final

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

import tenure
from tenure.errors import DeadlockError, LostError

__all__ = [
    "ACQUIRE_SPAN",
    "BUCKETS",
    "HOLD_SPAN",
    "Instrumentation",
    "instrument",
    "span_context_of",
    "traceparent",
    "uninstrument",
]

#: The spans' names.
ACQUIRE_SPAN: Final = "tenure.acquire"
HOLD_SPAN: Final = "tenure.hold"

#: The histograms' bucket bounds, in seconds: waits and holds last from a round trip
#: to many minutes (OpenTelemetry's default bounds are for milliseconds).
BUCKETS: Final = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    300.0, 900.0, 3600.0,
)  # fmt: skip

#: The largest integer an attribute carries (OTLP's int64); a count above it is "every
#: token" (tenure.MAX_COUNT), told as ``tenure.exclusive``.
_INT64: Final = 2**63 - 1

#: A W3C traceparent of version 00: version, trace id, parent (span) id, flags.
_TRACEPARENT: Final = re.compile(rb"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")


class Instrumentation:
    """The observer that traces and measures a client's acquires (module docstring).

    Args:
        tracer_provider, meter_provider: where spans and measurements go (None: the
            global ones, as ``opentelemetry.trace.set_tracer_provider`` sets them).
        owner_data: send the acquire's ``traceparent`` as its owner data where the
            caller gave none (never a campaign's: an election's data is the leader's
            message to its observers).
        name_in_metrics: give the histograms a ``tenure.name`` attribute too. Off by
            default: names are often many (``report-{id}``), and each is a series.
    """

    def __init__(
        self,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        owner_data: bool = True,
        name_in_metrics: bool = False,
    ) -> None:
        self.owner_data = owner_data
        self.name_in_metrics = name_in_metrics
        self.tracer = trace.get_tracer("tenure", tenure.__version__, tracer_provider)
        meter = metrics.get_meter("tenure", tenure.__version__, meter_provider)
        self.wait_duration = meter.create_histogram(
            "tenure.wait.duration",
            unit="s",
            description="How long acquires waited, from the call to the grant or failure",
            explicit_bucket_boundaries_advisory=BUCKETS,
        )
        self.hold_duration = meter.create_histogram(
            "tenure.hold.duration",
            unit="s",
            description="How long holds lasted, from the grant to the release or loss",
            explicit_bucket_boundaries_advisory=BUCKETS,
        )

    def __repr__(self) -> str:
        return f"<tenure.contrib.otel.Instrumentation owner_data={self.owner_data}>"

    def acquire_started(self, attempt: tenure.Attempt) -> _Acquiring:
        """Start the acquire's span (and offer its traceparent as owner data)."""
        return _Acquiring(self, attempt)


class _Acquiring:
    """One acquire's span, ended by its outcome (a :class:`tenure.AttemptObserver`)."""

    __slots__ = ("_attempt", "_context", "_instrumentation", "_span", "_started")

    def __init__(self, instrumentation: Instrumentation, attempt: tenure.Attempt) -> None:
        self._instrumentation = instrumentation
        self._attempt = attempt
        self._context = otel_context.get_current()  # the caller's: the holds' parent too
        self._span = instrumentation.tracer.start_span(
            ACQUIRE_SPAN, self._context, kind=SpanKind.CLIENT, attributes=_asked(attempt)
        )
        self._started = time.monotonic()
        spanned = self._span.get_span_context()
        # Not a campaign's: an election's data is what its observers are told of the
        # leader (election.observe(), leader()), the application's own message.
        campaign = issubclass(attempt.kind, tenure.Leadership)
        if instrumentation.owner_data and spanned.is_valid and not campaign:
            attempt.offer_data(traceparent(spanned).encode("ascii"))

    def granted(self, leases: tuple[tenure.Lease, ...]) -> None:
        """End the span (granted), and start a hold's span per lease."""
        waited = time.monotonic() - self._started
        span, attempt = self._span, self._attempt
        span.set_attribute("tenure.outcome", "granted")
        span.set_attribute("tenure.wait.duration", waited)
        tokens = [lease.token for lease in leases if lease.token <= _INT64]
        if len(attempt.names) == 1:
            if tokens:
                span.set_attribute("tenure.token", tokens[0])
        else:
            span.set_attribute("tenure.tokens", tokens)
        span.end()
        self._measure_wait(waited, "granted")
        for lease in leases:
            _Holding(self._instrumentation, attempt, lease, self._context, span)

    def failed(self, error: BaseException) -> None:
        """End the span with the outcome ``error`` says."""
        waited = time.monotonic() - self._started
        outcome = _outcome(error, self._attempt)
        span = self._span
        span.set_attribute("tenure.outcome", outcome)
        span.set_attribute("tenure.wait.duration", waited)
        if outcome not in ("busy", "cancelled"):
            span.set_attribute("error.type", type(error).__qualname__)
            span.set_status(Status(StatusCode.ERROR, str(error)))
        span.end()
        self._measure_wait(waited, outcome)

    def _measure_wait(self, waited: float, outcome: str) -> None:
        instrumentation, attempt = self._instrumentation, self._attempt
        attributes = _measured(instrumentation, attempt)
        attributes["tenure.outcome"] = outcome
        instrumentation.wait_duration.record(waited, attributes)


class _Holding:
    """One hold's span, from its grant to its lease's end."""

    __slots__ = ("_attempt", "_instrumentation", "_span", "_started")

    def __init__(
        self,
        instrumentation: Instrumentation,
        attempt: tenure.Attempt,
        lease: tenure.Lease,
        parent: otel_context.Context,
        acquire_span: trace.Span,
    ) -> None:
        self._instrumentation = instrumentation
        self._attempt = attempt
        attributes = _held(attempt, lease)
        self._span = instrumentation.tracer.start_span(
            HOLD_SPAN,
            parent,
            attributes=attributes,
            links=[Link(acquire_span.get_span_context())],
        )
        self._started = time.monotonic()
        lease.lost.add_callback(partial(self._ended, lease.name))

    def _ended(self, name: str, reason: LostError | None) -> None:
        held = time.monotonic() - self._started
        span = self._span
        end = "released" if reason is None else "lost"
        span.set_attribute("tenure.hold.end", end)
        span.set_attribute("tenure.hold.duration", held)
        if reason is not None:
            span.add_event(
                "tenure.lost",
                {"error.type": type(reason).__qualname__, "exception.message": str(reason)},
            )
            span.set_status(Status(StatusCode.ERROR, str(reason)))
        span.end()
        instrumentation = self._instrumentation
        attributes = _measured(instrumentation, self._attempt, name)
        attributes["tenure.hold.end"] = end
        instrumentation.hold_duration.record(held, attributes)


def _asked(attempt: tenure.Attempt) -> dict[str, str | bool | int | float | Sequence[str]]:
    """An acquire span's attributes at its start."""
    attributes: dict[str, str | bool | int | float | Sequence[str]] = {
        "tenure.node": attempt.node,
        "tenure.kind": attempt.kind.__name__,
        "tenure.exclusive": attempt.count == tenure.MAX_COUNT,
    }
    if len(attempt.names) == 1:
        attributes["tenure.name"] = attempt.names[0]
    else:
        attributes["tenure.names"] = list(attempt.names)
    if attempt.count <= _INT64:
        attributes["tenure.count"] = attempt.count
    if attempt.timeout is not None:
        attributes["tenure.timeout"] = attempt.timeout
    if attempt.session_id <= _INT64:
        attributes["tenure.session.id"] = attempt.session_id
    return attributes


def _held(attempt: tenure.Attempt, lease: tenure.Lease) -> dict[str, str | bool | int]:
    """A hold span's attributes."""
    attributes: dict[str, str | bool | int] = {
        "tenure.node": attempt.node,
        "tenure.name": lease.name,
        "tenure.kind": attempt.kind.__name__,
        "tenure.exclusive": lease.count == tenure.MAX_COUNT,
    }
    if lease.count <= _INT64:
        attributes["tenure.count"] = lease.count
    if lease.token <= _INT64:
        attributes["tenure.token"] = lease.token
    if attempt.session_id <= _INT64:
        attributes["tenure.session.id"] = attempt.session_id
    return attributes


def _measured(
    instrumentation: Instrumentation, attempt: tenure.Attempt, name: str | None = None
) -> dict[str, str]:
    """A histogram's attributes (a hold's ``name``; an acquire's, if it has one name)."""
    attributes = {"tenure.node": attempt.node, "tenure.kind": attempt.kind.__name__}
    if instrumentation.name_in_metrics:
        if name is None and len(attempt.names) == 1:
            name = attempt.names[0]
        if name is not None:
            attributes["tenure.name"] = name
    return attributes


def _outcome(error: BaseException, attempt: tenure.Attempt) -> str:
    """``tenure.outcome`` of an acquire that failed with ``error``."""
    if isinstance(error, TimeoutError):
        return "busy" if attempt.timeout == 0 else "timeout"
    if isinstance(error, DeadlockError):
        return "deadlock"
    if isinstance(error, LostError):
        return "lost"
    if isinstance(error, asyncio.CancelledError):
        return "cancelled"
    return "error"


def traceparent(span_context: SpanContext) -> str:
    """``span_context`` as a W3C ``traceparent`` (version 00)."""
    return (
        f"00-{span_context.trace_id:032x}-{span_context.span_id:016x}-"
        f"{int(span_context.trace_flags):02x}"
    )


def span_context_of(data: bytes) -> SpanContext | None:
    """The span context in owner data that :class:`Instrumentation` wrote (a W3C
    ``traceparent``), marked remote; None if ``data`` is not one.

    With it, code that meets a held lock (``describe``, a watch) can link its own
    span to the holder's trace: ``Link(span_context_of(owner.data))``.
    """
    found = _TRACEPARENT.fullmatch(bytes(data))
    if found is None:
        return None
    trace_id, span_id = int(found[1], 16), int(found[2], 16)
    if trace_id == 0 or span_id == 0:
        return None
    return SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(int(found[3], 16)))


# -- every client of the process -------------------------------------------------------

_installed: Instrumentation | None = None
_installing = threading.Lock()


def instrument(
    *,
    tracer_provider: trace.TracerProvider | None = None,
    meter_provider: metrics.MeterProvider | None = None,
    owner_data: bool = True,
    name_in_metrics: bool = False,
) -> Instrumentation:
    """Trace and measure every tenure client of this process (:func:`tenure.add_observer`),
    those made before too; it replaces what an earlier call installed. The arguments
    are :class:`Instrumentation`'s; returns the one installed."""
    global _installed
    instrumentation = Instrumentation(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        owner_data=owner_data,
        name_in_metrics=name_in_metrics,
    )
    with _installing:
        if _installed is not None:
            tenure.remove_observer(_installed)
        tenure.add_observer(instrumentation)
        _installed = instrumentation
    return instrumentation


def uninstrument() -> bool:
    """Undo :func:`instrument`; whether it was installed."""
    global _installed
    with _installing:
        installed, _installed = _installed, None
        return installed is not None and tenure.remove_observer(installed)
