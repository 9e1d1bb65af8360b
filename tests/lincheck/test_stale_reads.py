"""Stale reads (``max_staleness`` on a read's invoke): each may take effect from S
seconds before its call to its return, and never before an operation of its own
session that had completed by its call (tenure.testing.lincheck._stale).

Hand-made histories whose verdict is known; bad input; the search held to a brute
force (every order of every subset of the unknown operations, on small histories);
histories made by running a register whose reads are served stale as a standby
serves them, linearizable by construction, and the same with an anomaly planted."""

from __future__ import annotations

import itertools
import json
import math
import random
from pathlib import Path
from typing import Any, Final

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tenure.testing import lincheck
from tenure.testing.lincheck._models import REGISTER
from tenure.testing.lincheck._stale import session_waits

L, N = lincheck.LINEARIZABLE, lincheck.NOT_LINEARIZABLE

#: Times in seconds (the default unit is the nanosecond).
SECONDS: Final = {"time_unit": 1}


def timed(*rows: tuple[Any, ...], header: dict[str, Any] | None = None) -> lincheck.History:
    """Events as ``(process, type, f, value, time)`` tuples, a dict of more fields
    after (``max_staleness``, ``session``, ``key``), in real-time order."""
    lines = [json.dumps({**SECONDS, **(header or {})})]
    for process, kind, f, value, time, *more in rows:
        event = {"process": process, "type": kind, "f": f, "value": value, "time": time}
        for extra in more:
            event.update(extra)
        lines.append(json.dumps(event))
    return lincheck.read_jsonl(lines)


def stale(seconds: Any, **more: Any) -> dict[str, Any]:
    """An invoke's fields of a stale read of ``seconds`` (a bad one too, to refuse)."""
    return {"max_staleness": seconds, **more}


#: Two writes, 1 over [0, 1] and 2 over [2, 3], by process 0.
WRITES: Final = (
    (0, "invoke", "write", 1, 0),
    (0, "ok", "write", 1, 1),
    (0, "invoke", "write", 2, 2),
    (0, "ok", "write", 2, 3),
)

CASES: dict[str, tuple[lincheck.History, str]] = {
    "a stale read of a value overwritten less than S before its call": (
        timed(*WRITES, (1, "invoke", "read", None, 4, stale(2)), (1, "ok", "read", 1, 5)),
        L,
    ),
    "the same read without max_staleness is not linearizable": (
        timed(*WRITES, (1, "invoke", "read", None, 4), (1, "ok", "read", 1, 5)),
        N,
    ),
    "a stale read of a value overwritten more than S before its call": (
        timed(*WRITES, (1, "invoke", "read", None, 6, stale(2)), (1, "ok", "read", 1, 7)),
        N,
    ),
    "S back reaches a write's return exactly (intervals are closed)": (
        timed(*WRITES, (1, "invoke", "read", None, 5, stale(2)), (1, "ok", "read", 1, 6)),
        L,
    ),
    "a stale read may still see the newest value": (
        timed(*WRITES, (1, "invoke", "read", None, 4, stale(2)), (1, "ok", "read", 2, 5)),
        L,
    ),
    "a stale read of a value written concurrently with it": (
        timed(
            (0, "invoke", "write", 1, 0),
            (1, "invoke", "read", None, 1, stale(0.5)),
            (1, "ok", "read", 1, 2),
            (0, "ok", "write", 1, 3),
        ),
        L,
    ),
    "a stale read of a value never written": (
        timed(*WRITES, (1, "invoke", "read", None, 4, stale(100)), (1, "ok", "read", 7, 5)),
        N,
    ),
    "a stale read older than its own client's previous write, though within S": (
        timed(*WRITES, (0, "invoke", "read", None, 4, stale(2)), (0, "ok", "read", 1, 5)),
        N,
    ),
    "older than its session's write, the write under another process id": (
        timed(
            (0, "invoke", "write", 1, 0, {"session": "c"}),
            (0, "ok", "write", 1, 1),
            (0, "invoke", "write", 2, 2, {"session": "c"}),
            (0, "ok", "write", 2, 3),
            (5, "invoke", "read", None, 4, stale(2, session="c")),
            (5, "ok", "read", 1, 5),
        ),
        N,
    ),
    "another session's stale read may be as old": (
        timed(
            (0, "invoke", "write", 1, 0, {"session": "c"}),
            (0, "ok", "write", 1, 1),
            (0, "invoke", "write", 2, 2, {"session": "c"}),
            (0, "ok", "write", 2, 3),
            (5, "invoke", "read", None, 4, stale(2, session="d")),
            (5, "ok", "read", 1, 5),
        ),
        L,
    ),
    "a write of unknown outcome binds no later read of its session": (
        timed(
            (0, "invoke", "write", 1, 0),
            (0, "ok", "write", 1, 1),
            (0, "invoke", "write", 2, 2, {"session": "c"}),
            (0, "info", "write", 2, 3),
            (5, "invoke", "read", None, 4, stale(2, session="c")),
            (5, "ok", "read", 1, 5),
            (6, "invoke", "read", None, 6),
            (6, "ok", "read", 2, 7),
        ),
        L,
    ),
    "a stale read older than its own client's previous read (monotonic reads)": (
        timed(
            *WRITES,
            (1, "invoke", "read", None, 4, stale(2)),
            (1, "ok", "read", 2, 4.5),
            (1, "invoke", "read", None, 5, stale(2)),
            (1, "ok", "read", 1, 6),
        ),
        N,
    ),
    "two clients' stale reads in either order (each monotonic)": (
        timed(
            *WRITES,
            (1, "invoke", "read", None, 4, stale(2)),
            (1, "ok", "read", 2, 4.5),
            (2, "invoke", "read", None, 5, stale(2)),
            (2, "ok", "read", 1, 6),
        ),
        L,
    ),
    "older than the client's previous fresh read": (
        timed(
            *WRITES,
            (1, "invoke", "read", None, 3.5),
            (1, "ok", "read", 2, 4),
            (1, "invoke", "read", None, 4, stale(2)),
            (1, "ok", "read", 1, 5),
        ),
        N,
    ),
    "a stale read concurrent with its client's unknown write": (
        timed(
            *WRITES,
            (1, "invoke", "write", 3, 4),
            (1, "info", "write", 3, 5),
            (7, "invoke", "read", None, 5, stale(3, session=1)),
            (7, "ok", "read", 2, 6),
        ),
        L,
    ),
    "older than its client's write on another key (that write's call bounds it)": (
        timed(
            (1, "invoke", "write", 5, 0, {"key": "b"}),
            (1, "ok", "write", 5, 1),
            (1, "invoke", "write", 6, 2, {"key": "b"}),
            (1, "ok", "write", 6, 3),
            (0, "invoke", "write", 1, 10, {"key": "a"}),
            (0, "ok", "write", 1, 11),
            (0, "invoke", "read", None, 12, stale(20, key="b")),
            (0, "ok", "read", 5, 13),
        ),
        N,
    ),
    "the same read by a client that wrote nothing before": (
        timed(
            (1, "invoke", "write", 5, 0, {"key": "b"}),
            (1, "ok", "write", 5, 1),
            (1, "invoke", "write", 6, 2, {"key": "b"}),
            (1, "ok", "write", 6, 3),
            (0, "invoke", "write", 1, 10, {"key": "a"}),
            (0, "ok", "write", 1, 11),
            (2, "invoke", "read", None, 12, stale(20, key="b")),
            (2, "ok", "read", 5, 13),
        ),
        L,
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_verdict(case: str) -> None:
    history, verdict = CASES[case]
    result = lincheck.check(history, "register")
    assert result.verdict == verdict, result.explain()


def test_a_kv_get_and_a_counter_read_may_be_stale_too() -> None:
    kv = timed(
        (0, "invoke", "put", "x", 0),
        (0, "ok", "put", "x", 1),
        (0, "invoke", "append", "y", 2),
        (0, "ok", "append", "y", 3),
        (1, "invoke", "get", None, 4, stale(2)),
        (1, "ok", "get", "x", 5),
    )
    assert lincheck.check(kv, "kv").verdict == L
    counter = timed(
        (0, "invoke", "add", 1, 0),
        (0, "ok", "add", 1, 1),
        (0, "invoke", "add", 1, 2),
        (0, "ok", "add", 2, 3),
        (0, "invoke", "read", None, 4, stale(2)),
        (0, "ok", "read", 1, 5),
    )
    assert lincheck.check(counter, "counter").verdict == N  # its own add of 2 before


def test_nanoseconds_unless_the_header_says() -> None:
    lines = [
        {"process": 0, "type": "invoke", "f": "write", "value": 1, "time": 0},
        {"process": 0, "type": "ok", "f": "write", "value": 1, "time": 10**8},
        {"process": 0, "type": "invoke", "f": "write", "value": 2, "time": 2 * 10**8},
        {"process": 0, "type": "ok", "f": "write", "value": 2, "time": 3 * 10**8},
        {"process": 1, "type": "invoke", "f": "read", "time": 6 * 10**8, "max_staleness": 0.5},
        {"process": 1, "type": "ok", "f": "read", "value": 1, "time": 7 * 10**8},
    ]
    history = lincheck.read_jsonl(map(json.dumps, lines))
    assert lincheck.check(history, "register").verdict == L  # back to 0.1 s: 1 held then
    lines[4]["time"], lines[5]["time"] = 9 * 10**8, 10**9  # back to 0.4 s: 2 since 0.3 s
    history = lincheck.read_jsonl(map(json.dumps, lines))
    assert lincheck.check(history, "register").verdict == N


def test_the_witness_names_the_stale_read_and_its_staleness() -> None:
    history, _ = CASES["a stale read older than its own client's previous read (monotonic reads)"]
    explained = lincheck.check(history, "register").explain()
    assert "could not linearize [line 8] p1 read(max_staleness=2) -> ok 1" in explained


BAD: Final = {
    "a negative staleness": ([stale(-1)], "'max_staleness' is a number of seconds"),
    "a staleness that is not a number": ([stale("1")], "'max_staleness' is a number"),
    "a staleness that is a boolean": ([stale(True)], "'max_staleness' is a number"),
    "a session that is a boolean": ([{"session": True}], "'session' is a number or a string"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_fields_name_their_line(case: str) -> None:
    fields, says = BAD[case]
    with pytest.raises(lincheck.HistoryError, match=says) as caught:
        timed(*WRITES, (1, "invoke", "read", None, 4, *fields), (1, "ok", "read", 1, 5))
    assert ":6:" in str(caught.value)


def test_a_stale_read_needs_times_and_a_model_that_reads_stale() -> None:
    untimed = [
        {"process": 1, "type": "invoke", "f": "read", "value": None, "max_staleness": 1},
        {"process": 1, "type": "ok", "f": "read", "value": 1},
    ]
    with pytest.raises(lincheck.HistoryError, match="needs 'time' on the events"):
        lincheck.read_jsonl(map(json.dumps, untimed))
    endless = {**untimed[0], "time": 0, "max_staleness": math.inf}  # (1e400 in JSON)
    with pytest.raises(lincheck.HistoryError, match="'max_staleness' is a number"):
        lincheck.from_events([(1, endless)])
    write = timed((0, "invoke", "write", 1, 0, stale(1)), (0, "ok", "write", 1, 1))
    with pytest.raises(lincheck.HistoryError, match=r"no stale 'write' \(its stale reads: read"):
        lincheck.check(write, "register")
    holders = timed((0, "invoke", "holders", None, 0, stale(1)), (0, "ok", "holders", [], 1))
    with pytest.raises(lincheck.HistoryError, match="its stale reads: none"):
        lincheck.check(holders, "mutex")
    for unit in (0, -1, "s", True):
        with pytest.raises(lincheck.HistoryError, match="'time_unit' is seconds per unit"):
            lincheck.check(timed(*WRITES, header={"time_unit": unit}), "register")


def test_the_writer_records_a_stale_read_as_lincheck_reads_it(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    clock = iter(range(0, 10**10, 10**8))
    with lincheck.HistoryWriter(path, clock=lambda: next(clock)) as writer:
        writer.invoke("w0c1", "read", None, "k", fields={"max_staleness": 0.5, "session": "c"})
        writer.ok("w0c1", "read", 3, "k", fields={"answered_by": "10.0.0.2:6388"})
        with pytest.raises(ValueError, match="the format's"):
            writer.ok("w0c1", "read", 3, "k", fields={"time": 1})
    [op] = lincheck.read_history(path).operations
    assert (op.max_staleness, op.session, op.output) == (0.5, "c", 3)


def test_a_watcher_is_checked_against_the_stale_reads_window() -> None:
    # The read of 1 is explained only S back; the watcher's items are searched with it.
    history, _ = CASES["a stale read of a value overwritten less than S before its call"]
    result = lincheck.check(history, "register")
    record = lincheck.WatchRecord("w", None, 0.0, [(1, 1.5), (2, 3.5)])
    assert lincheck.check_watches(result, [record]).ok


def test_a_sequential_session_waits_for_its_previous_operation_only() -> None:
    # The frontier: 200 operations of one client, each stale read named after the one
    # before it, none of the others (implied by real time, or by that one).
    events: list[tuple[Any, ...]] = []
    for n in range(100):
        events.append((0, "invoke", "write", n, 4 * n))
        events.append((0, "ok", "write", n, 4 * n + 1))
        events.append((0, "invoke", "read", None, 4 * n + 2, stale(50)))
        events.append((0, "ok", "read", n, 4 * n + 3))
    ops = timed(*events).operations
    waits = session_waits(ops, [op.call for op in ops])
    assert [bin(w).count("1") for w in waits] == [0, 1] * 100
    assert all(waits[i] == 1 << (i - 1) for i in range(1, 200, 2))
    assert lincheck.check(timed(*events), "register").verdict == L


# -- the search held to a brute force ---------------------------------------------------


def brute_force(ops: list[lincheck.Operation], initial: Any) -> bool:
    """Whether some order of the completed operations and some of the unknown ones,
    each given an instant in its window (a stale read's from S before its call, the
    instants rising along the order), is legal for the register, every stale read after
    the operations of its session that precede it (the definition, searched whole)."""
    prepared = {op.index: REGISTER.prepare(op) for op in ops}
    low = {op.index: op.call - (op.max_staleness or 0.0) for op in ops}

    def session(op: lincheck.Operation) -> Any:
        return ("s", op.session) if op.session is not None else ("p", op.process)

    must_follow = {
        r.index: {
            a.index
            for a in ops
            if a.outcome != lincheck.INFO
            and session(a) == session(r)
            and a.ret <= r.call
            and (a.call, a.index) < (r.call, r.index)
        }
        for r in ops
        if r.max_staleness is not None
    }
    completed = [op for op in ops if op.outcome != lincheck.INFO]
    unknown = [op for op in ops if op.outcome == lincheck.INFO]
    for size in range(len(unknown) + 1):
        for chosen in itertools.combinations(unknown, size):
            for order in itertools.permutations(completed + list(chosen)):
                if _legal(order, prepared, low, must_follow, initial):
                    return True
    return False


def _legal(
    order: tuple[lincheck.Operation, ...],
    prepared: dict[int, Any],
    low: dict[int, float],
    must_follow: dict[int, set[int]],
    initial: Any,
) -> bool:
    instant, state, done = -math.inf, initial, set[int]()
    for op in order:
        instant = max(instant, low[op.index])
        if instant > op.ret or not must_follow.get(op.index, set()) <= done:
            return False
        legal, state = REGISTER.step(state, prepared[op.index])
        if not legal:
            return False
        done.add(op.index)
    return True


def small_history(seed: int) -> list[lincheck.Operation]:
    """Up to 6 register operations of 3 processes (two of them one session), on small
    integer times (ties are frequent), values 0 to 2, some stale, unknown or failed."""
    rng = random.Random(seed)
    ops: list[tuple[Any, ...]] = []
    free = {0: 0, 1: 0, 2: 0}
    written = [0]  # (a read of a value written is a closer call than of any)
    for _ in range(rng.randint(1, 6)):
        process = rng.choice((0, 1, 2))
        call = free[process] + rng.randint(0, 3)
        ret = call + rng.randint(0, 4)
        free[process] = ret
        f = rng.choice(("read", "read", "write", "cas"))
        value: Any = None if f == "read" else rng.randint(0, 2)
        if f == "cas":
            value = [rng.randint(0, 2), rng.randint(0, 2)]
        if f != "read":
            written.append(value[1] if f == "cas" else value)
        outcome = rng.choices(("ok", "fail", "info"), (8, 1, 1))[0]
        output = rng.choice(written) if f == "read" else value
        staleness = float(rng.choice((0, 1, 3))) if f == "read" and rng.random() < 0.7 else None
        session = "s" if process in (0, 1) and rng.random() < 0.8 else None
        ops.append((call, ret, process, f, value, outcome, output, staleness, session))
    ops.sort(key=lambda row: row[0])
    made = []
    for index, (call, ret, process, f, value, outcome, output, staleness, session) in enumerate(
        ops
    ):
        unknown = outcome == "info"  # (its answer never came)
        made.append(
            lincheck.Operation(
                index, process, f, None, value, outcome, None if unknown else output, call,
                math.inf if unknown else ret, index + 1, staleness, session,
            )
        )  # fmt: skip
    return made


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32))
def test_the_search_agrees_with_the_brute_force(seed: int) -> None:
    ops = small_history(seed)
    result = lincheck.check(ops, "register", header={**SECONDS, "initial": 0})
    expected = L if brute_force(ops, 0) else N
    assert result.verdict == expected, "\n".join(op.describe() for op in ops)


def test_the_brute_force_sees_both_verdicts() -> None:
    # (the cross-check above compares something: its histories are of both kinds)
    verdicts = {brute_force(small_history(seed), 0) for seed in range(200)}
    assert verdicts == {True, False}


# -- histories of a register served stale, linearizable by construction ----------------


def served_stale(seed: int, operations: int = 60, processes: int = 4) -> list[dict[str, Any]]:
    """Events of clients of one register on two keys, timed by their order (seconds):
    each operation takes effect at one instant between its call and its return, a
    stale read (S of 2 to 8) at a random instant from S before its call, never
    before what its session's earlier answered operations took effect at; some
    abandoned (``info``, their process replaced, the session kept)."""
    rng = random.Random(seed)
    history: dict[str, list[tuple[float, Any]]] = {"a": [(-math.inf, 0)], "b": [(-math.inf, 0)]}
    ids = list(range(processes))
    latest: dict[int, float] = {}  # each session's latest instant an answer showed
    open_calls: dict[int, dict[str, Any]] = {}
    events: list[dict[str, Any]] = [{**SECONDS, "initial": 0}]
    started = 0
    next_value = 1
    clock = 0
    while started < operations or open_calls:
        clock += 1
        slot = rng.randrange(processes)
        call = open_calls.get(slot)
        if call is None:
            if started >= operations:
                continue
            started += 1
            f = rng.choice(("read", "read", "write"))
            event = {"process": ids[slot], "type": "invoke", "f": f, "key": rng.choice("ab")}
            event.update({"value": None, "session": slot, "time": clock})
            if f == "write":
                event["value"], next_value = next_value, next_value + 1
            elif rng.random() < 0.6:
                event["max_staleness"] = rng.choice((2, 4, 8))
            events.append(event)
            open_calls[slot] = event
            continue
        if rng.random() < 0.03:  # abandoned: a write may or may not take effect now
            if call["f"] == "write" and rng.random() < 0.5:
                history[call["key"]].append((clock, call["value"]))
            events.append({**_completion(call, "info", None), "time": clock})
            ids[slot] = max(ids) + 1
            del open_calls[slot]
            continue
        key = call["key"]
        if call["f"] == "write":
            history[key].append((clock, call["value"]))
            instant, value = float(clock), call["value"]
        else:
            lowest = max(call["time"] - call.get("max_staleness", 0), latest.get(slot, -math.inf))
            instant = rng.uniform(lowest, clock)
            value = [v for at, v in history[key] if at <= instant][-1]
        latest[slot] = max(latest.get(slot, -math.inf), instant)
        events.append({**_completion(call, "ok", value), "time": clock})
        del open_calls[slot]
    return events


def _completion(call: dict[str, Any], kind: str, value: Any) -> dict[str, Any]:
    return {"process": call["process"], "type": kind, "f": call["f"], "value": value}


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32), operations=st.integers(1, 120))
def test_a_register_served_stale_is_linearizable_with_its_stale_reads(
    seed: int, operations: int
) -> None:
    events = served_stale(seed, operations)
    result = lincheck.check(lincheck.read_jsonl(map(json.dumps, events)), "register", timeout=30)
    assert result.verdict == L, result.explain()


def _after(events: list[dict[str, Any]], *rows: tuple[Any, ...]) -> list[dict[str, Any]]:
    """``rows`` (process, f, value, call, return, staleness or None) after ``events``, on
    key ``a``, each its process's session, their times from the history's end."""
    end = max(event.get("time", 0) for event in events)
    added = []
    for process, f, value, call, ret, staleness in rows:
        invoke = {"process": process, "type": "invoke", "f": f, "key": "a"}
        invoke.update({"value": None if f == "read" else value, "time": end + call})
        if staleness is not None:
            invoke["max_staleness"] = staleness
        completion = {"process": process, "type": "ok", "f": f, "value": value}
        added += [invoke, {**completion, "time": end + ret}]
    return events + added


#: Each anomaly after a history served stale, and the same rows that are no anomaly.
PLANTED: Final = {
    "older than S": (
        [(900, "write", 900, 1, 2, None), (900, "write", 901, 3, 4, None)],
        [(901, "read", 900, 10, 11, 3)],
        [(901, "read", 900, 10, 11, 9)],
    ),
    "older than its own client's write": (
        [(900, "write", 900, 1, 2, None), (900, "write", 901, 3, 4, None)],
        [(900, "read", 900, 5, 6, 9)],
        [(902, "read", 900, 5, 6, 9)],
    ),
    "older than its own client's read": (
        [(900, "write", 900, 1, 2, None), (900, "write", 901, 3, 4, None)],
        [(902, "read", 901, 5, 6, 9), (902, "read", 900, 7, 8, 9)],
        [(902, "read", 901, 5, 6, 9), (903, "read", 900, 7, 8, 9)],
    ),
}


@pytest.mark.parametrize("anomaly", sorted(PLANTED))
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_one_planted_stale_read_is_found(anomaly: str, seed: int) -> None:
    writes, bad, fine = PLANTED[anomaly]
    events = served_stale(seed, 60)
    broken = _after(events, *writes, *bad)
    result = lincheck.check(lincheck.read_jsonl(map(json.dumps, broken)), "register", timeout=60)
    assert result.verdict == N, result.explain()
    assert "could not linearize" in result.explain()
    control = _after(events, *writes, *fine)
    result = lincheck.check(lincheck.read_jsonl(map(json.dumps, control)), "register", timeout=60)
    assert result.verdict == L, result.explain()
