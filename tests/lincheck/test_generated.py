"""Property tests: histories made by running a real object (``tests/lincheck/histories``)
are linearizable whatever the interleaving, the unknown outcomes and the keys; the
same histories with one anomaly planted after them are not, and the search finds it
through everything before.

Proving a history wrong is the search's costly case: it must rule out every order of
what came before, and each operation of unknown outcome (``info``) may be placed
anywhere after its call, or nowhere, which doubles the orders it could take. Without
unknown operations a planted anomaly after 1,000 operations of 8 processes is found in
0.1 s; with 5% of them unknown, after 100 operations in up to 2.3 s, after 150 not
within 10 s (``bench/micro/lincheck.py``). So the planted histories are 100 operations,
3% unknown."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tenure.testing import lincheck
from tests.lincheck.histories import OBJECTS, generate, lines

MODELS = sorted(OBJECTS)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    model=st.sampled_from(MODELS),
    operations=st.integers(1, 120),
    processes=st.integers(1, 8),
    keys=st.integers(1, 3),
    info=st.sampled_from((0.0, 0.05, 0.2)),
    seed=st.integers(0, 2**32),
)
def test_a_history_of_a_real_object_is_linearizable(
    model: str, operations: int, processes: int, keys: int, info: float, seed: int
) -> None:
    events = generate(model, operations, processes, seed, keys=keys, info=info)
    result = lincheck.check(lincheck.read_jsonl(lines(events)), model, timeout=30)
    assert result.verdict == lincheck.LINEARIZABLE, result.explain()


def _sequential(*rows: tuple[Any, ...]) -> list[dict[str, Any]]:
    """Events of operations one after another, each by a process of its own (ids from
    1,000: no generated process has one)."""
    events: list[dict[str, Any]] = []
    for number, (f, value, outcome, output) in enumerate(rows):
        process = 1000 + number
        events.append({"process": process, "type": "invoke", "f": f, "value": value})
        events.append({"process": process, "type": outcome, "f": f, "value": output})
    return events


#: One anomaly per kind, after the generated history has ended (so it is certain):
#: what it plants, for which model.
PLANTED: dict[str, tuple[str, list[dict[str, Any]]]] = {
    "a stale read": (
        "register",
        _sequential(
            ("write", 100, "ok", 100),
            ("write", 101, "ok", 101),
            ("read", None, "ok", 100),
        ),
    ),
    "a doubled cas": (
        "register",
        _sequential(
            ("write", 100, "ok", 100),
            ("cas", [100, 101], "ok", [100, 101]),
            ("cas", [100, 102], "ok", [100, 102]),
        ),
    ),
    "a lost add": (
        "counter",
        _sequential(
            ("cas", [0, 0], "fail", None),  # whatever the total was, it was not 0...
            ("add", 1, "ok", None),
            ("read", None, "ok", -1),  # ...and an add of 1 left it at -1
        ),
    ),
    "a double grant": (
        "mutex",
        _sequential(
            ("acquire", None, "ok", 10_000),
            ("acquire", None, "ok", 10_001),
        ),
    ),
    "a token regression": (
        "semaphore",
        _sequential(
            ("acquire", 1, "ok", 10_000),
            ("release", 10_000, "ok", None),
            ("acquire", 1, "ok", 9_999),
        ),
    ),
    "a member that never joined": (
        "membership",
        _sequential(("members", None, "ok", ["ghost", "ghost-2"])),
    ),
}


@pytest.mark.parametrize("anomaly", sorted(PLANTED))
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_one_planted_anomaly_is_found(anomaly: str, seed: int) -> None:
    model, planted = PLANTED[anomaly]
    events = generate(model, 100, 8, seed, info=0.03) + planted
    result = lincheck.check(lincheck.read_jsonl(map(json.dumps, events)), model, timeout=60)
    assert result.verdict == lincheck.NOT_LINEARIZABLE, result.explain()
    assert "could not linearize" in result.explain()


def test_past_the_timeout_the_verdict_is_unknown_never_linearizable() -> None:
    events = generate("register", 400, 8, 7, info=0.1)
    result = lincheck.check(lincheck.read_jsonl(lines(events)), "register", timeout=1e-9)
    # one look at the clock every 2,048 steps: a history this size takes more
    assert result.verdict == lincheck.UNKNOWN
    assert "unknown (the timeout passed" in result.explain()
    assert result.to_dict()["reason"] == "the timeout passed"


def test_past_the_memory_bound_the_verdict_is_unknown() -> None:
    events = generate("register", 400, 8, 7, info=0.1)
    result = lincheck.check(lincheck.read_jsonl(lines(events)), "register", memory_mb=0.001)
    assert result.verdict == lincheck.UNKNOWN
    assert result.to_dict()["reason"] == "the memory bound passed"


def test_unknown_twins_are_searched_as_one_count_not_as_sets() -> None:
    # 16 unknown adds of 1, then reads that pin how many took effect: without the
    # twins' order, 2**16 sets of them would each be a configuration of its own.
    events = []
    for process in range(16):
        events.append({"process": process, "type": "invoke", "f": "add", "value": 1})
        events.append({"process": process, "type": "info", "f": "add", "value": 1})
    for total in (3, 9, 15):
        events.append({"process": 100 + total, "type": "invoke", "f": "read", "value": None})
        events.append({"process": 100 + total, "type": "ok", "f": "read", "value": total})
    events.append({"process": 99, "type": "invoke", "f": "read", "value": None})
    events.append({"process": 99, "type": "ok", "f": "read", "value": 2})  # back in time
    result = lincheck.check(lincheck.read_jsonl(map(json.dumps, events)), "counter")
    assert result.verdict == lincheck.NOT_LINEARIZABLE
    [key] = result.keys
    assert key.cache_entries < 1_000
    ok = lincheck.check(lincheck.read_jsonl(map(json.dumps, events[:-2])), "counter")
    assert ok.verdict == lincheck.LINEARIZABLE
