"""The suite's histories as lincheck's: hand-made histories, converted and checked.

Each case is a small history in the suite's own lines (:class:`Build`, as the workers
and the observer write them), converted by :mod:`tools.faults.lin_events` and judged
by :mod:`tools.faults.check_lin`; and the ``linearizable`` scenario's own files, as its
workers write them, closed and judged by :mod:`tools.faults.check_lin_workload`. No
process is started.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from tenure.testing import lincheck
from tenure.testing.workload import close_holds
from tests.faults.test_checkers import Build
from tools.faults import check_lin
from tools.faults.check_lin import check_events, check_linearizability
from tools.faults.check_lin_workload import check_progress, check_workload
from tools.faults.history import parse
from tools.faults.lin_events import events, mutex_ops, register_ops, stamp


def _rules(b: Build, out_dir: Path | None = None) -> set[str]:
    violations, _ = check_linearizability(parse(b.lines), out_dir)
    return {v.rule for v in violations}


def test_a_released_hold_is_an_acquire_and_a_release_over_their_own_intervals() -> None:
    b = Build()
    b.hold("w0c0", 1, 7, 1.0, 2.0)
    acquire, release = mutex_ops(parse(b.lines))
    assert (acquire.f, acquire.call, acquire.ret, acquire.result) == ("acquire", 0.99, 1.0, 7)
    # Invoked when the body ended, returned when the block's exit did.
    assert (release.f, release.value, release.call, release.ret) == ("release", 7, 2.0, 2.01)
    assert (acquire.process, release.process) == ("w0c0", "w0c0")
    assert _rules(b) == set()


def test_a_second_grant_while_the_first_is_held_is_not_linearizable(tmp_path: Path) -> None:
    b = Build()
    b.hold("w0c0", 1, 1, 1.0, 3.0)
    b.hold("w1c0", 2, 2, 2.0, 4.0)
    violations, stats = check_linearizability(parse(b.lines), tmp_path)
    assert [v.rule for v in violations] == ["linearizable:mutex"]
    assert "key 'm0': not linearizable" in violations[0].message
    assert violations[0].t == 1.99  # the grant that could not follow
    assert stats["mutex"]["verdict"] == "not linearizable"
    assert (stats["mutex"]["checked_operations"], stats["mutex"]["keys"]) == (4, 1)
    # The file written reproduces the verdict, as `python -m tenure.testing.lincheck` reads it.
    again = lincheck.check(lincheck.read_history(tmp_path / "mutex.jsonl"), "mutex")
    assert again.verdict == "not linearizable"
    assert "could not linearize" in (tmp_path / "mutex.txt").read_text()
    assert stats["register"]["verdict"] == "linearizable"
    assert not (tmp_path / "register.txt").exists()


def test_a_token_below_one_seen_before_is_not_linearizable() -> None:
    b = Build()
    b.hold("w0c0", 1, 5, 1.0, 2.0)
    b.hold("w1c0", 2, 3, 3.0, 4.0)
    assert _rules(b) == {"linearizable:mutex"}


def test_a_told_loss_frees_the_lock_between_the_grant_seen_and_the_telling() -> None:
    b = Build()  # lost while the next holder was granted: fine, it was told
    b.hold("w0c0", 1, 1, 1.0, 3.0, outcome="lost")
    b.hold("w1c0", 2, 2, 2.0, 4.0)
    lost = [op for op in mutex_ops(parse(b.lines)) if op.f == "lost"]
    assert [(op.process, op.call, op.outcome, op.ret) for op in lost] == [
        ("w0c0/lost1", 1.0, "ok", 3.0)
    ]
    assert _rules(b) == set()
    # Told after the body ended (lost_at): the same, the loss's end is when it was told.
    b = Build()
    b.op("w0c0", "acquire", 0.9, 1.0, "ok", key="m0", session=1, done={"token": 1})
    b.op("w0c0", "section", 1.0, 2.0, "lost-after-body", key="m0", session=1, token=1,
         done={"lost_at": [2.5], "returned": 2.6})  # fmt: skip
    b.hold("w1c0", 2, 2, 2.4, 4.0)
    assert [op.ret for op in mutex_ops(parse(b.lines)) if op.f == "lost"] == [2.5]
    assert _rules(b) == set()


def test_a_grant_to_another_before_the_holder_saw_its_own_is_not_linearizable() -> None:
    """The loss is invoked at the client's confirmation of its grant: a hold cannot
    end before its client saw it granted, even a hold it lost later."""
    b = Build()
    b.op("w0c0", "acquire", 0.5, 3.0, "ok", key="m0", session=1, done={"token": 1})
    b.op("w0c0", "section", 3.0, 3.5, "lost", key="m0", session=1, token=1)
    b.hold("w1c0", 2, 2, 2.0, 2.5)
    assert _rules(b) == {"linearizable:mutex"}


def test_a_hold_never_ended_or_ended_unknown_may_end_any_time_after_its_grant() -> None:
    b = Build()
    b.op("w0c0", "acquire", 0.9, 1.0, "ok", key="m0", session=1, done={"token": 1})
    b.op("w0c0", "section", 1.0, key="m0", session=1, token=1)  # its worker was killed
    b.hold("w1c0", 2, 2, 5.0, 6.0)
    b.hold("w2c0", 3, 3, 7.0, 8.0, outcome="release-failed")  # may land late, or never
    b.op("w2c0", "acquire", 8.5, 9.0, "ok", key="m0", session=3, done={"token": 4})
    b.op("w2c0", "section", 9.0, 10.0, "info", key="m0", session=3, token=4,
         done={"error": "stopped"})  # fmt: skip
    ops = mutex_ops(parse(b.lines))
    assert [(op.f, op.outcome) for op in ops if op.f != "acquire"] == [
        ("lost", None), ("release", "ok"), ("release", "info"), ("lost", None),
    ]  # fmt: skip
    # The client that did not hear its release's answer goes on as another process.
    assert [op.process for op in ops if op.f == "acquire"] == ["w0c0", "w1c0", "w2c0", "w2c0.1"]
    # ... and a granted acquire whose section was never recorded holds till a loss too.
    b.op("w1c0", "acquire", 12.0, 12.5, "ok", key="m0", session=2, done={"token": 5})
    b.hold("w0c0", 4, 6, 13.0, 14.0)
    assert _rules(b) == set()


def test_a_register_is_written_by_its_create_and_updates_and_read_by_the_observer() -> None:
    b = Build()
    b.op("observer", "read", 0.1, 0.2, "ok", key="reg-w0c0", done={"value": None})
    b.op("w0c0", "create", 0.5, 0.6, "info", key="reg-w0c0")
    b.op("w0c0", "create", 0.7, 0.8, "ok", key="reg-w0c0")
    b.op("w0c0", "update", 1.0, 1.1, "ok", key="reg-w0c0", value=1)
    b.op("observer", "read", 0.75, 1.05, "ok", key="reg-w0c0", done={"value": 0})
    b.op("observer", "read", 1.2, 1.3, "info", key="reg-w0c0")  # observed nothing
    b.op("w0c0", "update", 2.0, key="reg-w0c0", value=2)  # never answered
    b.op("observer", "read", 2.5, 2.6, "ok", key="reg-w0c0", done={"value": 2})
    ops = register_ops(parse(b.lines))
    assert [(op.process, op.f, op.value if op.f == "write" else op.result, op.outcome)
            for op in ops] == [
        ("observer", "read", None, "ok"),
        ("w0c0", "write", 0, "info"),
        ("w0c0.1", "write", 0, "ok"),
        ("observer", "read", 0, "ok"),
        ("w0c0.1", "write", 1, "ok"),
        ("w0c0.1", "write", 2, None),
        ("observer.1", "read", 2, "ok"),
    ]  # fmt: skip
    assert _rules(b) == set()
    b.op("observer", "read", 3.0, 3.1, "ok", key="reg-w0c0", done={"value": 1})  # back in time
    assert _rules(b) == {"linearizable:register"}


def test_a_register_read_of_nothing_after_its_create_was_acknowledged_is_caught() -> None:
    b = Build()
    b.op("w0c0", "create", 0.5, 0.6, "ok", key="reg-w0c0")
    b.op("observer", "read", 1.0, 1.1, "ok", key="reg-w0c0", done={"value": None})
    assert _rules(b) == {"linearizable:register"}


def test_the_events_are_in_time_order_each_process_one_operation_at_a_time() -> None:
    b = Build()
    b.hold("w0c0", 1, 1, 1.0, 2.0)
    b.op("w0c0", "acquire", 2.01, 2.5, "ok", key="m0", session=1, done={"token": 2})  # at once
    b.op("w0c0", "section", 2.5, 2.6, "release-failed", key="m0", session=1, token=2)
    found = events(mutex_ops(parse(b.lines)))
    assert [e["time"] for e in found] == sorted(e["time"] for e in found)
    # The release returned at the instant the next acquire was called: in that order.
    assert [(e["f"], e["type"]) for e in found] == [
        ("acquire", "invoke"), ("acquire", "ok"), ("release", "invoke"), ("release", "ok"),
        ("acquire", "invoke"), ("acquire", "ok"), ("release", "invoke"), ("release", "info"),
    ]  # fmt: skip
    assert found[3]["time"] == found[4]["time"] == stamp(2.01)
    history = lincheck.from_events(enumerate(found, start=1))
    assert all(math.isinf(op.ret) for op in history.operations if op.outcome == "info")


def test_a_search_past_its_bound_breaks_the_rule_as_unknown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(check_lin, "MEMORY_MB", 1e-9)
    b = Build()  # the search tries token 2 first (called first), and must back up
    b.op("w0c0", "acquire", 1.0, 3.0, "ok", key="m0", session=1, done={"token": 2})
    b.hold("w1c0", 2, 1, 2.5, 2.6)
    violations, stats = check_linearizability(parse(b.lines))
    assert {v.rule for v in violations} == {"linearizable:mutex"}
    assert violations[0].message.startswith("unknown")
    assert stats["mutex"]["verdict"] == "unknown"


def test_a_token_granted_twice_to_one_client_keeps_each_grant_with_its_own_section() -> None:
    b = Build()  # the token-reset mutant's history: the counter began again after a restart
    b.hold("w0c0", 1, 7, 1.0, 2.0)
    b.hold("w0c0", 2, 7, 3.0, 4.0, outcome="lost")
    ops = mutex_ops(parse(b.lines))
    assert [(op.f, op.call) for op in ops] == [
        ("acquire", 0.99), ("release", 2.0), ("acquire", 2.99), ("lost", 3.0),
    ]  # fmt: skip
    assert _rules(b) == {"linearizable:mutex"}


# -- the linearizable scenario's own files (tools/faults/check_lin_workload.py) -----------


def _event(process: str, kind: str, f: str, key: str, value: object, time: float) -> dict[str, Any]:
    return {"process": process, "type": kind, "f": f, "key": key, "value": value,
            "time": stamp(time)}  # fmt: skip


def test_a_hold_or_a_membership_left_open_gets_an_end_never_completed() -> None:
    events = [
        _event("w0c0", "invoke", "acquire", "m", None, 1.0),
        _event("w0c0", "ok", "acquire", "m", 7, 1.1),  # its worker stopped holding it
        _event("w0c1", "invoke", "acquire", "m", None, 2.0),
        _event("w0c1", "ok", "acquire", "m", 8, 2.1),
        _event("w0c1", "invoke", "release", "m", 8, 2.5),
        _event("w0c1", "ok", "release", "m", 8, 2.6),
    ]
    closed = close_holds("mutex", events)
    added = [e for e in closed if e not in events]
    assert added == [
        {"process": "w0c0/open-m-7", "type": "invoke", "f": "lost", "key": "m", "value": 7,
         "time": stamp(1.1)}
    ]  # fmt: skip
    assert check_events("mutex", closed)[0] == []  # without it token 8 was granted while 7 held
    assert check_events("mutex", events)[0][0].rule == "linearizable:mutex"
    joins = [
        _event("w0c0", "invoke", "join", "g", "a", 1.0),
        _event("w0c0", "info", "join", "g", "a", 1.2),  # it may have joined
        _event("w0c0.1", "invoke", "join", "g", "b", 1.3),
        _event("w0c0.1", "ok", "join", "g", "b", 1.4),  # its session ended untold
        _event("w1c0", "invoke", "members", "g", None, 2.0),
        _event("w1c0", "ok", "members", "g", ["a"], 2.1),
        _event("w1c0", "invoke", "members", "g", None, 3.0),
        _event("w1c0", "ok", "members", "g", [], 3.1),
    ]
    closed = close_holds("membership", joins)
    assert sorted((e["process"], e["f"]) for e in closed if e not in joins) == [
        ("w0c0/maybe-g-a", "leave"), ("w0c0/open-g-b", "leave"),
    ]  # fmt: skip
    assert check_events("membership", closed)[0] == []


def test_a_join_never_answered_may_have_joined_and_may_end() -> None:
    """Its client was killed while it was asked (the simulation's crash-client found it,
    seed 3000): others are refused the id meanwhile, then get it once its session ends."""
    joins = [
        _event("w1c4.3", "invoke", "join", "g", "b", 1.0),  # never answered: killed
        _event("w1c3", "invoke", "join", "g", "b", 2.0),
        _event("w1c3", "fail", "join", "g", "b", 2.1),  # taken: the join took effect
        _event("w1c3", "invoke", "members", "g", None, 3.0),
        _event("w1c3", "ok", "members", "g", ["b"], 3.1),
        _event("w1c5", "invoke", "join", "g", "b", 5.0),
        _event("w1c5", "ok", "join", "g", "b", 5.1),  # its session expired: free again
    ]
    closed = close_holds("membership", joins)
    assert sorted((e["process"], e["f"]) for e in closed if e not in joins) == [
        ("w1c4/maybe-g-b", "leave"), ("w1c5/open-g-b", "leave"),  # (w1c5's: left open)
    ]  # fmt: skip
    assert check_events("membership", closed)[0] == []
    assert check_events("membership", joins)[0][0].rule == "linearizable:membership"


def _offered_then(*end: dict[str, Any]) -> list[dict[str, Any]]:
    """w0c3 holds m (7) and offers it at 2.0; w0c1 adopts it as 9 (answered at 2.2);
    then w0c3's release: ``end``."""
    return [
        _event("w0c3", "invoke", "acquire", "m", None, 1.0),
        _event("w0c3", "ok", "acquire", "m", 7, 1.1),
        _event("w0c3/untold-m-7", "invoke", "lost", "m", 7, 2.0),  # (recorded at the offer)
        _event("w0c1", "invoke", "acquire", "m", None, 2.1),
        _event("w0c1", "ok", "acquire", "m", 9, 2.2),
        _event("w0c3", "invoke", "release", "m", 7, 2.5),
        *end,
    ]


def test_an_untold_end_stands_unless_the_release_was_answered() -> None:
    """Seed 38728 of the cluster target: w0c3 was killed with its release unanswered,
    after the adoption; the end at the offer explains the adopter's grant. A release
    answered ``ok`` says it released, and the untold end goes: two holders at once."""
    for end in ([], [_event("w0c3", "info", "release", "m", 7, 2.6)]):
        closed = close_holds("mutex", _offered_then(*end))
        ends = [e["process"] for e in closed if e["f"] == "lost"]
        assert ends == ["w0c3/untold-m-7", "w0c1/open-m-9"]  # (w0c1's: left open)
        assert check_events("mutex", closed)[0] == []
    crossed = close_holds("mutex", _offered_then(_event("w0c3", "ok", "release", "m", 7, 2.6)))
    assert [e["process"] for e in crossed if e["f"] == "lost"] == ["w0c1/open-m-9"]
    assert check_events("mutex", crossed)[0][0].rule == "linearizable:mutex"
    told = close_holds("mutex", _offered_then(_event("w0c3", "fail", "release", "m", 7, 2.6)))
    # (its loss, told, is its own: the lease's lost, _on_loss)
    assert [e["process"] for e in told if e["f"] == "lost"] == ["w0c1/open-m-9"]


def test_the_search_bound_grows_with_the_history(monkeypatch: pytest.MonkeyPatch) -> None:
    """A long run's model gets more time than a short one's (check_lin.search_bound)."""
    bounds: list[float] = []
    check = lincheck.check

    def recorded(*args: Any, **kwargs: Any) -> lincheck.CheckResult:
        bounds.append(kwargs["timeout"])
        return check(*args, **kwargs)

    monkeypatch.setattr(lincheck, "check", recorded)
    adds = [
        _event(f"w0c{n % 4}", kind, "add", "c", 1, n + (0.5 if kind == "ok" else 0.0))
        for n in range(5000)
        for kind in ("invoke", "ok")
    ]
    for n in range(5000):
        adds[2 * n + 1]["value"] = n + 1  # an ok add's value is the new total
    assert check_events("counter", adds[:20])[0] == []
    assert check_events("counter", adds)[0] == []
    assert bounds == [check_lin.TIMEOUT, 5000 * check_lin.TIMEOUT_PER_OPERATION]
    assert bounds[1] > bounds[0]


def test_a_client_with_no_answer_after_the_heal_or_a_request_unanswered_is_caught(
    tmp_path: Path,
) -> None:
    (tmp_path / "w0-counter.jsonl").write_text(
        "".join(
            json.dumps(e) + "\n"
            for e in (
                _event("w0c0", "invoke", "add", "c", 1, 1.0),
                _event("w0c0", "ok", "add", "c", 1, 1.1),
                _event("w0c0", "invoke", "add", "c", 1, 20.0),
                _event("w0c0", "ok", "add", "c", 3, 20.1),
                _event("w0c1", "invoke", "add", "c", 1, 1.0),
                _event("w0c1", "ok", "add", "c", 2, 1.2),
                _event("w0c1", "invoke", "read", "c", None, 2.0),  # never answered
            )
        )
    )
    clients = ["w0c0", "w0c1", "w0c2"]  # w0c2 never had an answer
    violations, answered = check_progress(
        tmp_path, heal=15.0, stop=40.0, bound=10.0, clients=clients
    )
    assert [(v.rule, v.message.split(":")[0]) for v in violations] == [
        ("no-progress", "w0c1"), ("no-progress", "w0c2"), ("hang", "w0c1"),
    ]  # fmt: skip
    assert answered["counter"] == 3
    found, stats = check_workload(tmp_path, tmp_path / "lincheck")
    assert found == []
    assert stats["counter"]["checked_operations"] == 4


def test_a_watcher_that_saw_what_no_linearization_explains_is_caught(tmp_path: Path) -> None:
    writes = [
        _event("w0c1", "invoke", "write", "reg-0", 1, 1.0),
        _event("w0c1", "ok", "write", "reg-0", 1, 1.1),
        _event("w0c1", "invoke", "write", "reg-0", 2, 2.0),
        _event("w0c1", "ok", "write", "reg-0", 2, 2.1),
    ]
    (tmp_path / "w0-register.jsonl").write_text("".join(json.dumps(e) + "\n" for e in writes))
    seen = [
        _event("w0c0", "invoke", "watch", "reg-0", None, 0.5),
        _event("w0c0", "ok", "watch", "reg-0", 0, 0.6),
        _event("w0c0", "invoke", "watch", "reg-0", None, 0.6),
        _event("w0c0", "ok", "watch", "reg-0", 2, 2.2),
        _event("w0c0", "invoke", "watch", "reg-0", None, 2.2),
    ]
    watch = tmp_path / "watch-w0c0.jsonl"
    watch.write_text("".join(json.dumps(e) + "\n" for e in seen))
    violations, stats = check_workload(tmp_path, None)
    assert violations == []
    assert stats["watch"] == {"watchers": 1, "states_seen": 2, "verdict": "ok"}
    back = [_event("w0c0", "ok", "watch", "reg-0", 1, 2.3)]  # after 2: back in time
    watch.write_text("".join(json.dumps(e) + "\n" for e in [*seen, *back]))
    violations, stats = check_workload(tmp_path, None)
    # Out of order: no linearization of the writes explains 2 then 1.
    assert [v.rule for v in violations] == ["linearizable:watch"]
    assert "out of order" in violations[0].message
    assert stats["watch"]["verdict"] == "violated"
    made = [_event("w0c0", "ok", "watch", "reg-0", 7, 2.3)]  # nobody wrote 7
    watch.write_text("".join(json.dumps(e) + "\n" for e in [*seen, *made]))
    violations, stats = check_workload(tmp_path, None)
    assert [v.rule for v in violations] == ["linearizable:watch"]
    assert "never held" in violations[0].message
