"""The observers' examples, run as a user would (tests/test_examples.py's way), on
``memory://`` and against a real ``tenure serve``: ``otel_tracing.py`` (spans, the
holder's trace in its owner data, the histograms) and ``recorder.py`` (a history that
passes the recorder's checks, and a bug that fails one)."""

from __future__ import annotations

import itertools
import re

from tests.test_examples import matches, position, run_example, url_env

__all__ = ["url_env"]  # the fixture, from tests/test_examples.py


def test_otel_tracing_shows_which_trace_holds_the_lock(url_env: dict[str, str]) -> None:
    lines = run_example("otel_tracing.py", url_env)
    traces = {m[1]: m[2] for m in matches(r"(request-\d): trace ([0-9a-f]{32})$", lines)}
    assert set(traces) == {"request-1", "request-2"}
    assert len(set(traces.values())) == 2
    assert "request-1: 'nightly-report' is held by trace none (free)" in lines
    # The waiter sees the holder's trace; each holder, its own.
    assert f"request-2: 'nightly-report' is held by trace {traces['request-1']}" in lines
    for name, trace_id in traces.items():
        (held,) = matches(
            rf"{name}: holds it, token (\d+), owner data b'00-(\w+)-\w{{16}}-0\d'$", lines
        )
        assert held[2] == trace_id
        own = f"{name}: 'nightly-report' is held by trace {trace_id}"
        assert position(lines, held[0]) < position(lines, own)
        report, token = "name=nightly-report", held[1]
        acquire = f"span tenure.acquire   trace {trace_id} {report} outcome=granted token={token}"
        hold = f"span tenure.hold      trace {trace_id} {report} token={token} hold.end=released"
        assert position(lines, acquire) < position(lines, held[0]) < position(lines, hold)
        assert position(lines, hold) < position(lines, f"span {name}")
    # request-2 waited: its acquire ended after request-1's hold did.
    first_hold = position(lines, f"span tenure.hold      trace {traces['request-1']}")
    assert first_hold < position(lines, f"span tenure.acquire   trace {traces['request-2']}")
    assert lines[-2:] == ["tenure.wait.duration: 2 granted", "tenure.hold.duration: 2 released"]


def test_recorder_passes_the_mutex_and_catches_the_semaphore_of_two(
    url_env: dict[str, str],
) -> None:
    lines = run_example("recorder.py", url_env)
    holds = matches(
        r"hold: Lock 'export' token (\d+) of session \d+: #(\d+)\.\.#(\d+) released$", lines
    )
    assert len(holds) == 4
    spans = [(int(m[2]), int(m[3])) for m in holds]
    assert all(end < start for (_, end), (start, _) in itertools.pairwise(spans))
    assert "the mutex: never two holders at once, served first come, first served" in lines
    assert re.match(
        r"the semaphore of 2: two holds of 'export-2' \(node 'recorder-demo'\) at once: "
        r"Lease 'export-2' token \d+ of session \d+: #\d+\.\.#\d+ released still held when ",
        lines[-1],
    )
