"""lincheck never says "linearizable" (exit 0), nor "not linearizable" (exit 1), of a
history it did not check (issue 58, D8): NaN, infinite or out-of-range times, JSON
nested too deeply, integers too long to read and bytes that are not UTF-8 are bad
input (exit 2, naming the line), and an error of the checker itself is exit 2 too.

Before, 702 of 3,000 fuzzed broken histories with one or two NaN times exited 0 (a
NaN compares false with every time: operations that were not concurrent looked so),
and a deep value, a huge integer time or bad UTF-8 in a merged file crashed with a
traceback, exit 1."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Final

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tenure.testing import lincheck
from tenure.testing.lincheck.__main__ import main
from tests.lincheck.histories import generate

#: A read of a value never written: what makes each history below not linearizable.
NEVER_WRITTEN: Final = 424242


def broken_history(seed: int) -> list[dict[str, Any]]:
    """A register history that is not linearizable, every event timed (10 apart)."""
    events = generate("register", 40, 4, seed, info=0.0)
    events += [
        {"process": 99, "type": "invoke", "f": "read", "value": None},
        {"process": 99, "type": "ok", "f": "read", "value": NEVER_WRITTEN},
    ]
    return [{**event, "time": 10 * index} for index, event in enumerate(events)]


#: Times no clock gives: each makes the history bad input.
BAD_TIMES: Final = st.sampled_from(
    [math.nan, math.inf, -math.inf, 2**63, -(2**63), 10**30, 1e300, -1e300]
)


def write_lines(path: Path, events: list[dict[str, Any]]) -> str:
    # (json.dumps writes NaN and Infinity as Python's literals, which are not JSON)
    path.write_text("".join(json.dumps(event) + "\n" for event in events))
    return str(path)


def test_the_history_is_not_linearizable_with_good_times(tmp_path: Path) -> None:
    # The control: what the fuzz below corrupts is caught when its times are good.
    assert main(["--model", "register", write_lines(tmp_path / "h", broken_history(1))]) == 1


@settings(
    max_examples=150,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    seed=st.integers(0, 50),
    spots=st.lists(st.integers(0, 85), min_size=1, max_size=2, unique=True),
    times=st.lists(BAD_TIMES, min_size=2, max_size=2),
    merged=st.booleans(),
)
def test_a_broken_history_with_bad_times_is_never_called_linearizable(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    seed: int,
    spots: list[int],
    times: list[float | int],
    merged: bool,
) -> None:
    events = broken_history(seed)
    lines = {spot % len(events) for spot in spots}
    for line, time in zip(sorted(lines), times, strict=False):
        events[line] = {**events[line], "time": time}
    if merged:  # two files, as a HistoryWriter per process writes them
        files = [
            write_lines(tmp_path / "a", [e for e in events if e["process"] % 2 == 0]),
            write_lines(tmp_path / "b", [e for e in events if e["process"] % 2 == 1]),
        ]
    else:
        files = [write_lines(tmp_path / "h", events)]
    status = main(["--model", "register", *files])
    err = capsys.readouterr().err
    assert status == 2, err
    assert "'time'" in err or "not JSON" in err, err
    assert "internal error" not in err, err


def test_bad_numbers_are_named_with_their_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = {"process": 0, "type": "invoke", "f": "read", "value": None, "time": 1}
    for time, said in (
        ("NaN", "not JSON (NaN is not a JSON number)"),
        ("-Infinity", "not JSON (-Infinity is not a JSON number)"),
        (str(2**70), "'time' out of range (71 bits: at most 2**63 in size)"),
        ("1e400", "'time' is a finite number, not inf"),  # (JSON's own: read as inf)
        ("1" * 5000, "not JSON (Exceeds the limit"),
    ):
        path = tmp_path / "h.jsonl"
        path.write_text(
            json.dumps(first)
            + "\n"
            + f'{{"process": 0, "type": "ok", "f": "read", "value": 1, "time": {time}}}\n'
        )
        assert main(["--model", "register", str(path)]) == 2
        assert f"h.jsonl:2: {said}" in capsys.readouterr().err


def test_deep_values_long_integers_and_bad_bytes_are_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deep = tmp_path / "deep.jsonl"
    deep.write_text(
        '{"process": 0, "type": "invoke", "f": "write", "value": ' + "[" * 100_000 + "\n"
    )
    assert main(["--model", "register", str(deep)]) == 2
    assert "deep.jsonl:1: not JSON this reader can take (nested too deeply)" in (
        capsys.readouterr().err
    )
    for merged in (False, True):
        bad = tmp_path / "bad.jsonl"
        good = write_lines(tmp_path / "good.jsonl", broken_history(2)[:2])
        bad.write_bytes(
            b'{"process": 7, "type": "invoke", "f": "read", "value": "\xff", "time": 3}\n'
        )
        files = [good, str(bad)] if merged else [str(bad)]
        assert main(["--model", "register", *files]) == 2
        assert "bad.jsonl: not UTF-8 text" in capsys.readouterr().err


def test_an_error_of_the_checker_itself_is_exit_2_never_a_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import tenure.testing.lincheck.__main__ as command

    def crash(*args: object, **kwargs: object) -> lincheck.CheckResult:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(command, "check", crash)
    path = write_lines(tmp_path / "h", broken_history(3))
    assert main(["--model", "register", path]) == 2
    assert "internal error, no verdict: RecursionError" in capsys.readouterr().err
