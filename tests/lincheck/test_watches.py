"""What watchers saw, held to the key's linearized states: in order (skips allowed:
changes coalesce), none repeated, none from the future, none older than at arming,
and the final state last for a watcher that lasted to the end."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tenure.testing import lincheck

# Three writes one after another (times 10-60), then a read.
WRITES = [
    {"process": 0, "type": "invoke", "f": "write", "value": 1, "time": 10},
    {"process": 0, "type": "ok", "f": "write", "value": 1, "time": 20},
    {"process": 0, "type": "invoke", "f": "write", "value": 2, "time": 30},
    {"process": 0, "type": "ok", "f": "write", "value": 2, "time": 40},
    {"process": 0, "type": "invoke", "f": "write", "value": 3, "time": 50},
    {"process": 0, "type": "ok", "f": "write", "value": 3, "time": 60},
]


def result() -> lincheck.CheckResult:
    checked = lincheck.check(lincheck.read_jsonl(map(json.dumps, WRITES)), "register")
    assert checked.ok
    return checked


def watcher(armed: float, *seen: tuple[Any, float], final: bool = False) -> list[str]:
    lines = [{"watcher": "w", "key": None, "event": "armed", "time": armed}]
    lines += [{"watcher": "w", "event": "saw", "value": v, "time": t} for v, t in seen]
    if final:
        lines.append({"watcher": "w", "event": "ended", "final": True, "time": 100})
    return [json.dumps(line) for line in lines]


def verdict(lines: list[str]) -> lincheck.WatchCheck:
    return lincheck.check_watches(result(), lincheck.read_watches(lines))


def test_every_state_in_order_to_the_final_one() -> None:
    checked = verdict(watcher(0, (None, 5), (1, 25), (2, 45), (3, 65), final=True))
    assert checked.ok, checked.violations
    assert (checked.watchers, checked.items) == (1, 4)


def test_changes_may_coalesce() -> None:
    # armed after the first write: its first item is 1 or later; 2 was skipped
    assert verdict(watcher(25, (1, 26), (3, 70), final=True)).ok


def test_a_lagging_watcher_is_no_violation() -> None:
    # 1 seen long after 3 was written: late, but in order
    assert verdict(watcher(15, (1, 90), (3, 95))).ok


@pytest.mark.parametrize(
    ("lines", "says"),
    [
        (watcher(0, (1, 25), (1, 26)), "saw 1 again (one change, seen twice)"),
        (watcher(0, (2, 45), (1, 46)), "ok 1 (item 2 of watcher 'w'): out of order"),
        (watcher(0, (7, 45)), "ok 7 (item 1 of watcher 'w'): a value the key never held"),
        (watcher(0, (3, 45)), "seen before the operation that made it was called"),
        (watcher(45, (1, 46)), "older than the state when it was armed"),
        (watcher(0, (1, 25), (2, 45), final=True), "(item 2 of watcher 'w'): out of order"),
        (watcher(0, final=True), "watched to the end and saw nothing"),
    ],
)
def test_what_a_watcher_could_not_have_seen(lines: list[str], says: str) -> None:
    checked = verdict(lines)
    assert not checked.ok
    [violation] = checked.violations
    assert says in violation


def test_a_watch_record_that_breaks_the_format_names_its_line() -> None:
    with pytest.raises(lincheck.HistoryError, match=r"<watches>:2: watcher 'x' was never armed"):
        lincheck.read_watches(
            [
                json.dumps({"watcher": "w", "event": "armed", "time": 1}),
                json.dumps({"watcher": "x", "event": "saw", "value": 1, "time": 2}),
            ]
        )


def test_a_model_with_nothing_to_watch_is_refused() -> None:
    mutex = lincheck.check(lincheck.read_jsonl([]), "mutex")
    with pytest.raises(lincheck.HistoryError, match="no state a watch can see"):
        lincheck.check_watches(mutex, [])


def test_concurrent_writes_seen_in_either_order_are_explained() -> None:
    # write 1 is called first, write 2 returns first: either order is a linearization
    both = [
        {"process": 0, "type": "invoke", "f": "write", "value": 1, "time": 10},
        {"process": 1, "type": "invoke", "f": "write", "value": 2, "time": 12},
        {"process": 1, "type": "ok", "f": "write", "value": 2, "time": 14},
        {"process": 0, "type": "ok", "f": "write", "value": 1, "time": 16},
    ]
    checked = lincheck.check(lincheck.read_jsonl(map(json.dumps, both)), "register")
    for order in ((1, 2), (2, 1)):
        lines = [{"watcher": "w", "event": "armed", "time": 0}]
        lines += [{"watcher": "w", "event": "saw", "value": v, "time": 20 + v} for v in order]
        lines.append({"watcher": "w", "event": "ended", "final": True, "time": 30})
        records = lincheck.read_watches(map(json.dumps, lines))
        found = lincheck.check_watches(checked, records)
        assert found.ok, (order, found.violations)
    # ...but not both orders at once, by two watchers that watched to the end
    lines = [{"watcher": w, "event": "armed", "time": 0} for w in ("a", "b")]
    lines += [{"watcher": "a", "event": "saw", "value": v, "time": 20 + v} for v in (1, 2)]
    lines += [{"watcher": "b", "event": "saw", "value": v, "time": 20 + v} for v in (2, 1)]
    lines += [{"watcher": w, "event": "ended", "final": True, "time": 30} for w in ("a", "b")]
    found = lincheck.check_watches(checked, lincheck.read_watches(map(json.dumps, lines)))
    assert not found.ok
    assert "no linearization explains what they saw" in found.violations[0]
