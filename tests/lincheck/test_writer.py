"""Recording a history as it happens (``HistoryWriter``) and reading several processes'
files back as one (``read_histories``)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from tenure.testing import lincheck


def test_two_processes_files_merge_into_one_history(tmp_path: Path) -> None:
    ticks = itertools.count(100, 10)
    clock = lambda: next(ticks)  # noqa: E731 (one clock for both writers)
    one = lincheck.HistoryWriter(tmp_path / "p0.jsonl", header={"limit": 2}, clock=clock)
    two = lincheck.HistoryWriter(tmp_path / "p1.jsonl", clock=clock)
    with one, two:
        one.invoke(0, "acquire", 1, key="s")  # 100
        two.invoke(1, "acquire", 1, key="s")  # 110
        one.ok(0, "acquire", 1, key="s")  # 120
        two.ok(1, "acquire", 2, key="s")  # 130
        one.invoke(0, "lost", 1, key="s", time=115)  # learnt late: it began at 115
        one.ok(0, "lost", 1, key="s")  # 140
    one.invoke(0, "release", 1)  # closed: dropped
    history = lincheck.read_histories([tmp_path / "p0.jsonl", tmp_path / "p1.jsonl"])
    assert history.header == {"limit": 2}
    assert [(op.process, op.f, op.call, op.ret) for op in history.operations] == [
        (0, "acquire", 100.0, 120.0),
        (1, "acquire", 110.0, 130.0),
        (0, "lost", 115.0, 140.0),
    ]
    assert lincheck.check(history, "semaphore").ok
    # a header is written once, when the file is new
    with lincheck.HistoryWriter(tmp_path / "p0.jsonl", header={"limit": 9}, clock=clock):
        pass
    assert (tmp_path / "p0.jsonl").read_text().count('"limit"') == 1


def test_a_line_cut_short_by_a_kill_is_only_skipped_at_the_end(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    with lincheck.HistoryWriter(path, clock=iter(range(1, 100)).__next__) as writer:
        writer.invoke(0, "write", 1)
        writer.ok(0, "write", 1)
        writer.invoke(0, "write", 2)
    with path.open("a") as file:
        file.write('{"process": 0, "type": "ok", "f": "wr')  # killed mid-line
    [write, pending] = lincheck.read_histories([path]).operations
    assert (write.outcome, pending.outcome) == ("ok", "info")
    path.write_text('{"process": 0, "ty\n' + path.read_text())
    with pytest.raises(lincheck.HistoryError, match=r"p.jsonl:1: not JSON"):
        lincheck.read_histories([path])


def test_merged_files_need_times(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text('{"process": 0, "type": "invoke", "f": "read", "value": null}\n')
    with pytest.raises(lincheck.HistoryError, match="merged files need every event's 'time'"):
        lincheck.read_histories([path])
