"""Each checker rule on small synthetic histories: it fires on the bug, not on the fine case."""

from __future__ import annotations

import itertools
import json
import random
from typing import Any

import pytest

from tools.faults import failover, report
from tools.faults.check_failover import percentiles
from tools.faults.checker import Verdict, check
from tools.faults.history import parse


class Build:
    """A synthetic history, line by line (times are plain seconds)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._ids = itertools.count(1)
        self.note("harness", "params", 0.0, liveness_bound=10.0)

    def op(
        self,
        process: str,
        kind: str,
        t0: float,
        t1: float | None = None,
        outcome: str | None = None,
        *,
        done: dict[str, Any] | None = None,
        **fields: Any,
    ) -> int:
        op_id = next(self._ids)
        self.lines.append(
            json.dumps({"ev": "inv", "id": op_id, "p": process, "kind": kind, "t": t0, **fields})
        )
        if outcome is not None:
            end = {"ev": "done", "id": op_id, "p": process, "t": t1, "outcome": outcome}
            self.lines.append(json.dumps({**end, **(done or {})}))
        return op_id

    def note(self, process: str, kind: str, t: float, **fields: Any) -> None:
        self.lines.append(json.dumps({"ev": "note", "p": process, "kind": kind, "t": t, **fields}))

    def hold(
        self,
        process: str,
        session: int,
        token: int,
        start: float,
        end: float,
        outcome: str = "released",
        key: str = "m0",
    ) -> int:
        """An acquire granted at ``start`` and its section, its body ending at ``end``
        (its block's exit returning 0.01 s later, as the worker records it)."""
        self.op(process, "acquire", start - 0.01, start, "ok", key=key, session=session,
                done={"token": token})  # fmt: skip
        exited = {} if outcome in ("lost", "info") else {"returned": end + 0.01}
        return self.op(process, "section", start, end, outcome, key=key, session=session,
                       token=token, done=exited)  # fmt: skip

    def verdict(self, stop: float = 100.0, heal: float | None = None) -> Verdict:
        if heal is not None:
            self.note("harness", "heal", heal)
        self.note("harness", "stop", stop)
        return check(parse(self.lines))


def test_a_clean_history_passes() -> None:
    b = Build()
    b.hold("w0c0", 1, 1, 1.0, 2.0)
    b.hold("w1c0", 2, 2, 2.5, 3.0)
    b.hold("w0c0", 1, 3, 3.5, 4.0)
    verdict = b.verdict()
    assert verdict.ok, verdict.summary()
    assert verdict.stats["sections"] == 3


def test_overlapping_sections_are_caught_unless_the_earlier_was_cancelled_by_its_loss() -> None:
    b = Build()
    b.hold("w0c0", 1, 1, 1.0, 3.0)
    b.hold("w1c0", 2, 2, 2.0, 4.0)
    # lincheck's mutex model agrees: token 2 was granted while 1 was held, released later.
    assert b.verdict().rules() == {"overlap", "linearizable:mutex"}

    b = Build()
    b.hold("w0c0", 1, 1, 1.0, 3.0, outcome="lost")
    b.hold("w1c0", 2, 2, 2.0, 4.0)
    assert b.verdict().ok

    b = Build()  # other keys never overlap each other
    b.hold("w0c0", 1, 1, 1.0, 3.0, key="m0")
    b.hold("w1c0", 2, 2, 2.0, 4.0, key="m1")
    assert b.verdict().ok


def test_a_loss_that_lets_the_body_run_on_is_caught() -> None:
    b = Build()
    b.hold("w0c0", 1, 1, 1.0, 3.0, outcome="lost-not-cancelled")
    assert b.verdict().rules() == {"loss-not-cancelled"}


def test_tokens_that_go_backwards_or_repeat_are_caught() -> None:
    b = Build()
    b.hold("w0c0", 1, 5, 1.0, 2.0)
    b.hold("w1c0", 2, 3, 3.0, 4.0)  # invoked after token 5 was granted
    assert b.verdict().rules() == {"token-order", "linearizable:mutex"}

    b = Build()
    b.hold("w0c0", 1, 5, 1.0, 2.0)
    b.hold("w1c0", 2, 5, 3.0, 4.0, key="m1")
    assert "token-reuse" in b.verdict().rules()

    b = Build()  # concurrent acquires may complete in either order
    b.op("w0c0", "acquire", 1.0, 3.0, "ok", key="m0", session=1, done={"token": 7})
    b.op("w1c0", "acquire", 2.0, 2.5, "ok", key="m0", session=2, done={"token": 6})
    assert b.verdict().ok


def test_a_refused_fenced_write_needs_a_told_loss() -> None:
    for outcome, expected in (("released", {"fenced-write-refused"}), ("lost", set())):
        b = Build()
        section = b.hold("w0c0", 1, 1, 1.0, 3.0, outcome=outcome)
        b.op("w0c0", "write", 2.0, 2.1, "rejected", key="m0", token=1, section=section)
        verdict = b.verdict()
        assert verdict.rules() == expected
        assert verdict.stats["stale_writes_refused"] == (1 if outcome == "lost" else 0)


def _snapshot(b: Build, t: float, waiters: list[int], owners: list[list[int]]) -> None:
    b.op("observer", "snapshot", t, t + 0.01, "ok", key="m0",
         done={"value": {"owners": owners, "waiters": waiters}})  # fmt: skip


def test_grants_out_of_queue_order_are_caught() -> None:
    b = Build()
    b.op("w0c0", "acquire", 1.0, 5.0, "ok", key="m0", session=1, done={"token": 9})
    b.op("w1c0", "acquire", 1.1, 4.0, "ok", key="m0", session=2, done={"token": 8})
    _snapshot(b, 2.0, [1, 2], [[3, 7]])
    verdict = b.verdict()
    assert verdict.rules() == {"fifo"}
    assert "was served before" in verdict.violations[0].message


def test_fifo_skips_waiters_whose_session_ended_and_checks_the_owner() -> None:
    b = Build()
    b.op("w0c0", "acquire", 1.0, 5.0, "fail", key="m0", session=1)  # its session expired
    b.op("w1c0", "acquire", 1.1, 4.0, "ok", key="m0", session=2, done={"token": 8})
    _snapshot(b, 2.0, [1, 2], [[3, 7]])
    assert b.verdict().ok

    b = Build()
    b.op("w1c0", "acquire", 1.1, 4.0, "ok", key="m0", session=2, done={"token": 6})
    _snapshot(b, 2.0, [2], [[3, 7]])  # queued behind token 7, granted 6: tokens went back
    assert "fifo" in b.verdict().rules()


def test_lost_and_phantom_register_writes_are_caught() -> None:
    b = Build()
    b.op("w0c0", "create", 0.5, 0.6, "ok", key="reg-w0c0")
    b.op("w0c0", "update", 1.0, 1.1, "ok", key="reg-w0c0", value=1)
    b.op("w0c0", "update", 2.0, 2.1, "info", key="reg-w0c0", value=2)  # may or may not be
    b.op("observer", "read", 1.5, 1.6, "ok", key="reg-w0c0", done={"value": 1})
    b.op("observer", "read", 3.0, 3.1, "ok", key="reg-w0c0", done={"value": 2})
    assert b.verdict().ok
    # The old rules allow 1 again (the update to 2 was never acknowledged); a register
    # does not: once 2 was read, 2 was written, and nobody wrote 1 after it.
    b.op("observer", "read", 3.5, 3.6, "ok", key="reg-w0c0", done={"value": 1})
    assert b.verdict().rules() == {"linearizable:register"}

    b.op("observer", "read", 4.0, 4.1, "ok", key="reg-w0c0", done={"value": 0})
    b.op("observer", "read", 4.5, 4.6, "ok", key="reg-w0c0", done={"value": 7})
    b.op("observer", "read", 5.0, 5.1, "ok", key="reg-w0c0", done={"value": None})
    verdict = b.verdict()
    old_rules = [v.rule for v in verdict.violations if not v.rule.startswith("linearizable:")]
    assert old_rules == ["lost-write", "phantom-write", "lost-write"]


def test_a_server_that_goes_on_after_a_disk_fault_is_caught() -> None:
    b = Build()
    b.note("nemesis", "server-exit", 1.0, fault="disk-full", exit_code=1, stopped=True)
    assert b.verdict().ok
    b.note("nemesis", "server-exit", 2.0, fault="fsync-eio", exit_code=None, stopped=False)
    b.note("nemesis", "server-exit", 3.0, fault="disk-full", exit_code=0, stopped=True)
    b.note("nemesis", "restart-failed", 4.0, error="corrupt log")
    rules = [v.rule for v in b.verdict().violations]
    assert rules == ["disk-fault-acknowledged", "disk-fault-acknowledged", "restart-failed"]


def test_a_client_waiting_past_the_bound_or_idle_after_the_heal_is_caught() -> None:
    b = Build()  # bound 10 s
    b.hold("w0c0", 1, 1, 1.0, 1.5)
    b.hold("w1c0", 2, 2, 2.0, 2.5)
    b.op("w0c0", "acquire", 3.0, key="m0", session=1)  # never answered
    b.hold("w1c0", 2, 3, 30.0, 30.5)
    verdict = b.verdict(stop=40.0, heal=25.0)
    assert [v.rule for v in verdict.violations] == ["hang", "no-progress"]
    assert "w0c0" in verdict.violations[1].message

    b = Build()  # cut off by the stop shortly after it began: no hang
    b.hold("w0c0", 1, 1, 26.0, 26.5)
    b.op("w0c0", "acquire", 35.0, 43.0, "info", key="m0", session=1, done={"error": "stopped"})
    assert b.verdict(stop=40.0, heal=25.0).ok


def test_the_longest_stall_after_a_restart_is_measured() -> None:
    b = Build()
    b.hold("w0c0", 1, 1, 1.0, 1.5)
    b.note("nemesis", "restart", 2.0)
    b.hold("w0c0", 1, 2, 6.5, 7.0)
    verdict = b.verdict(stop=8.0)
    assert verdict.stats["longest_stall_after_restart"] == 4.5
    assert verdict.stats["restarts"] == 1


def test_a_wall_clock_jump_must_cost_nothing() -> None:
    b = Build()
    b.note("harness", "role", 0.0, worker=3, clock="wall")
    b.hold("w3c0", 1, 1, 1.0, 2.0)
    b.hold("w2c0", 2, 2, 3.0, 4.0, outcome="lost")  # another worker may lose
    assert b.verdict().ok
    b.note("w3c1", "session-lost", 5.0, session=4, error="SessionExpiredError()")
    assert b.verdict().rules() == {"wall-clock"}
    b.hold("w3c0", 1, 3, 6.0, 7.0, outcome="lost")
    assert [v.rule for v in b.verdict().violations] == ["wall-clock", "wall-clock"]


def _wall_clock_loss(window: float = 3.0) -> Build:
    """Worker 3's wall clock jumps, worker 4's monotonic one leaps; worker 3 loses a
    session and a lease at 10.0."""
    b = Build()
    b.note("harness", "params", 0.0, liveness_bound=10.0, window=window)
    b.note("harness", "role", 0.0, worker=3, clock="wall")
    b.note("harness", "role", 0.0, worker=4, clock="monotonic")
    b.hold("w3c0", 1, 1, 9.0, 10.0, outcome="lost")
    b.note("w3c0", "session-lost", 10.0, session=1, error="SessionExpiredError()")
    return b


def test_a_wall_clock_loss_a_true_clock_client_shares_is_the_machines() -> None:
    b = _wall_clock_loss()  # the control, worker 1, lost one too: the machine stalled
    b.note("w1c0", "session-lost", 12.5, session=7, error="SessionExpiredError()")
    assert b.verdict().ok, b.verdict().summary()
    b = _wall_clock_loss()  # a window away from the control's: the clock's
    b.note("w1c0", "session-lost", 13.5, session=7, error="SessionExpiredError()")
    assert b.verdict().rules() == {"wall-clock"}
    b = _wall_clock_loss()  # the faked monotonic clock's worker is no control
    b.note("w4c0", "session-lost", 10.0, session=8, error="SessionExpiredError()")
    assert b.verdict().rules() == {"wall-clock"}
    b = _wall_clock_loss()  # the control was paused then, until a window after resuming
    b.note("nemesis", "fault", 5.0, fault="sigstop-holder", worker=1, seconds=4.0)
    b.note("nemesis", "healed", 9.0, fault="sigstop", worker=1)
    b.note("w1c0", "session-lost", 11.5, session=7, error="SessionExpiredError()")
    assert b.verdict().rules() == {"wall-clock"}
    b.note("w2c0", "session-lost", 11.5, session=9, error="SessionExpiredError()")
    assert b.verdict().ok  # ... but worker 2 was not
    b = _wall_clock_loss(window=0.0)  # no window told: no control
    b.note("w1c0", "session-lost", 10.0, session=7, error="SessionExpiredError()")
    assert b.verdict().rules() == {"wall-clock"}


def test_a_client_loop_that_died_is_reported() -> None:
    b = Build()
    b.note("w0c0", "client-error", 1.0, error="OSError(22, 'Invalid argument')")
    assert b.verdict().rules() == {"client-error"}


def test_failover_times_are_measured_from_the_fault_to_the_first_grant_of_the_successor() -> None:
    b = Build()
    b.hold("w0c0", 1, 1, 1.0, 1.5)
    b.note("nemesis", "fault", 2.0, fault="kill-9-leader", member="t0")
    b.hold("w0c0", 1, 2, 2.05, 2.1)  # answered by the dead leader before it died
    b.note("nemesis", "elected", 4.5, fault="kill-9-leader", since=2.0, led=4.0)
    b.hold("w1c0", 2, 3, 5.0, 5.5)
    b.note("nemesis", "fault", 10.0, fault="kill-9-leader", member="t1")
    b.note("nemesis", "elected", 12.5, fault="kill-9-leader", since=10.0, led=12.0)
    b.hold("w1c0", 2, 4, 14.0, 14.5)
    b.note("nemesis", "fault", 20.0, fault="cut-leader-from-etcd", member="t2")
    b.note("nemesis", "elected", 22.5, fault="cut-leader-from-etcd", since=20.0, led=22.0)
    b.note("nemesis", "deposed", 23.0, fault="cut-leader-from-etcd", member="t2",
           since=20.0, stepped_down=21.5)  # fmt: skip
    b.note("nemesis", "fault", 30.0, fault="kill-9-standby", member="t0")  # no grant before
    verdict = b.verdict(stop=40.0)
    assert verdict.ok, verdict.summary()
    failover = verdict.stats["failover"]
    assert failover["kill-9-leader"] == {
        "count": 2,
        "failover": {"p50": 3.5, "p99": 4.0, "max": 4.0},
        "election": {"p50": 2.0, "p99": 2.0, "max": 2.0},
        "unmeasured": 0,
    }
    assert failover["cut-leader-from-etcd"]["unmeasured"] == 1
    assert failover["all"]["count"] == 3


def test_a_cluster_that_loses_a_server_a_leader_or_a_session_is_caught() -> None:
    b = Build()
    b.note("nemesis", "elected", 3.0, fault="kill-9-leader", since=1.0, led=2.5)
    b.hold("w0c0", 1, 1, 3.0, 3.5)
    own = "SessionExpiredError('session 1: t0 has not answered for its recovery window (8s)')"
    b.hold("w0c0", 1, 2, 4.0, 4.5, outcome="lost")
    b.note("w0c0", "session-lost", 4.5, session=1, error=own)  # its own clock: allowed
    assert b.verdict().ok
    b.note("nemesis", "deposed", 6.0, fault="sigstop-leader", member="t1", stepped_down=None)
    b.note("nemesis", "no-leader", 7.0, after="kill-9-all", waited=30.0)
    b.note("nemesis", "server-died", 8.0, member="t2", why="exit code 1: ...")
    b.note("w1c0", "session-lost", 9.0, session=2, error="SessionExpiredError('expired')")
    b.hold("w2c0", 3, 3, 10.0, 10.5, outcome="lost")  # its session lives on
    verdict = b.verdict()
    assert verdict.rules() == {"stepped-down", "no-leader", "server-died", "session-kept"}
    assert len([v for v in verdict.violations if v.rule == "session-kept"]) == 2


def test_a_sigstop_holders_kill_is_measured_apart_from_a_plain_kill_of_the_leader() -> None:
    """The fault suite's one 10.3 s failover: the leader killed while a worker was
    stopped in a body. Its clients held every key the others waited for, so the first
    grant came when the successor ended their sessions, a window (8 s) after it took
    over: the stopped holder's, not a failover's time. Measured as its own kind, it no
    longer counts as a kill -9 of the leader."""
    window = 8.0
    b = Build()
    b.note("nemesis", "fault", 2.0, fault="kill-9-leader", member="t0")
    b.note("nemesis", "elected", 4.5, fault="kill-9-leader", since=2.0, led=4.0)
    b.hold("w1c0", 2, 3, 4.4, 4.5)
    b.note("nemesis", "fault", 9.9, fault="sigstop-holder", worker=0, in_body=True)
    b.note("nemesis", "fault", 10.0, fault="kill-9-leader", member="t1")
    b.note("nemesis", "elected", 12.5, fault="sigstop-holder", since=10.0, led=12.3)
    b.hold("w1c0", 2, 4, 12.3 + window + 0.01, 20.5)  # once the stopped worker's sessions ended
    verdict = b.verdict(stop=40.0)
    failover = verdict.stats["failover"]
    assert failover["kill-9-leader"]["failover"] == {"p50": 2.4, "p99": 2.4, "max": 2.4}
    assert failover["sigstop-holder"]["failover"]["max"] > window


async def test_the_sigstop_holder_fault_notes_its_kill_under_its_own_kind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The nemesis side of the test above: the ``elected`` note of the kill that
    ``sigstop-holder`` makes names ``sigstop-holder`` (its fault note stays a kill)."""
    notes: list[tuple[str, dict[str, Any]]] = []

    class Stage:
        window = 0.0
        rng = random.Random(0)

        def note(self, kind: str, **fields: Any) -> None:
            notes.append((kind, fields))

        def fault(self, name: str, **fields: Any) -> float:
            notes.append(("fault", {"fault": name, **fields}))
            return 1.0

    class Target:
        def leader(self, excluding: list[str] | None = None, timeout: float = 0.0) -> str:
            return "t1" if excluding else "t0"

        def kill_server(self, name: str) -> None:
            notes.append(("killed", {"member": name}))

        def led_since(self, name: str, since: float) -> float:
            return since + 2.0

    async def caught(stage: object) -> int:
        return 0

    async def nothing(*args: object) -> None:
        return None

    monkeypatch.setattr(failover, "stop_in_body", caught)
    monkeypatch.setattr(failover, "restore", nothing)
    monkeypatch.setattr(failover, "sleep_until", nothing)
    monkeypatch.setattr(failover, "resume_worker", lambda stage, index: None)
    monkeypatch.setattr(failover, "as_replicated", lambda target: target)
    await failover.FAILOVER_FAULTS["sigstop-holder"](Stage(), Target())  # type: ignore[arg-type]
    faults = [fields["fault"] for kind, fields in notes if kind == "fault"]
    assert faults == ["sigstop-holder", "kill-9-leader"]
    elected = [fields for kind, fields in notes if kind == "elected"]
    assert [(e["fault"], e["deposed"], e["led"]) for e in elected] == [
        ("sigstop-holder", "t0", 3.0)
    ]


def test_failover_p99_is_the_nearest_rank_not_the_maximum_once_there_are_enough() -> None:
    assert percentiles([2.0, 3.0, 9.0]) == {"p50": 3.0, "p99": 9.0, "max": 9.0}
    # 200 failovers, two of them slow: the p99 leaves exactly those two above it.
    values = [2.0 + n / 100 for n in range(198)] + [10.0, 11.0]
    assert percentiles(values) == {"p50": 2.995, "p99": 3.97, "max": 11.0}
    assert percentiles([]) == {}


def test_the_report_shows_p99_and_a_dash_for_results_saved_before_it() -> None:
    now = {"failover": percentiles([2.0, 2.5]), "election": percentiles([1.5, 2.0])}
    before = {"failover": {"p50": 2.544, "max": 10.344}, "election": {"p50": 1.88, "max": 2.338}}
    lines = report._failover_lines(
        {"failover": {"kill-9-leader": {**now, "count": 2, "unmeasured": 0},
                      "all": {**before, "count": 32, "unmeasured": 1}}}
    )  # fmt: skip
    assert lines == [
        "* failover after kill-9-leader (2): p50 2.25 s, p99 2.5 s, max 2.5 s; "
        "election p50 1.75 s, p99 2 s, max 2 s",
        "* failover after all (32, 1 with no grant before the next fault): p50 2.544 s, "
        "max 10.344 s; election p50 1.88 s, max 2.338 s",
    ]
