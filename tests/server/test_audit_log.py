"""The audit log's parts in this process (tenure.server._audit, issue 50): rotation, the
bounded queue, a file that cannot be written, its settings, and what a line names.

What a real ``tenure serve`` writes is tests/server/test_audit_served.py's.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tenure._core import AlterNode, CreateNode, DescribeSemaphore, KillSession, SetNodeAnnex
from tenure.errors import ErrorCode
from tenure.server._audit import MAX_TEXT, REFUSALS_SHARE, SENDER_SHARE, AuditLog
from tenure.server._config.serve_config import ConfigError, ServeConfig, add_arguments, resolve
from tenure.server._net.audit_acts import act_of, what_of
from tenure.server._net.throttle import TELL_EVERY, Throttle


def _numbers(path: Path) -> list[int]:
    return [json.loads(line)["what"]["n"] for line in path.read_text().splitlines()]


def _fill(log: AuditLog, count: int) -> None:
    for n in range(count):
        log.record("node_create", token="ops", address="10.0.0.1", outcome="ok", n=n)
    log.close()


def test_a_line_is_the_contract_s_six_fields(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    log = AuditLog(str(path), clock=lambda: "2026-11-26T11:30:00.123Z")
    assert log.on
    log.record("kill_session", token=None, address=None, outcome="ok", node="n", session_id=7)
    log.close()
    [line] = [json.loads(text) for text in path.read_text().splitlines()]
    assert line == {
        "time": "2026-11-26T11:30:00.123Z",
        "act": "kill_session",
        "token": None,
        "address": None,
        "outcome": "ok",
        "what": {"node": "n", "session_id": 7},
    }


def test_the_time_is_utc_to_the_millisecond(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    _fill(AuditLog(str(path)), 1)
    stamp = json.loads(path.read_text())["time"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", stamp), stamp


def test_rotation_keeps_n_files_each_at_most_the_size_the_newest_lines_kept(
    tmp_path: Path,
) -> None:
    path = tmp_path / "audit.jsonl"
    log = AuditLog(str(path), max_bytes=400, keep=2, queue_size=1000, clock=lambda: "T")
    _fill(log, 40)
    files = [path.with_name("audit.jsonl.2"), path.with_name("audit.jsonl.1"), path]
    assert not path.with_name("audit.jsonl.3").exists()
    for file in files:
        assert 0 < file.stat().st_size <= 400
    kept = [n for file in files for n in _numbers(file)]
    assert kept == list(range(40 - len(kept), 40))  # oldest file first, none lost between
    assert log.written == 40
    assert log.dropped == 0


def test_keep_zero_begins_the_file_afresh_and_max_bytes_zero_never_rotates(
    tmp_path: Path,
) -> None:
    fresh = tmp_path / "fresh.jsonl"
    _fill(AuditLog(str(fresh), max_bytes=400, keep=0, queue_size=1000), 40)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh.jsonl"]
    assert _numbers(fresh)[-1] == 39
    assert fresh.stat().st_size <= 400
    whole = tmp_path / "whole.jsonl"
    _fill(AuditLog(str(whole), max_bytes=0, keep=3, queue_size=1000), 40)
    assert _numbers(whole) == list(range(40))
    assert not whole.with_name("whole.jsonl.1").exists()


def stuck(path: Path, queue_size: int) -> AuditLog:
    """An audit log whose thread is stuck opening the FIFO ``path`` (nobody reads it),
    holding one line it took: what is recorded next stays queued, or is dropped."""
    os.mkfifo(path)
    log = AuditLog(str(path), queue_size=queue_size)
    log.record("node_create", token="ops", address="10.0.0.1", outcome="ok", node="first")
    deadline = time.monotonic() + 30
    while not log._queue.empty():  # (taken by the thread, which then blocks opening)
        assert time.monotonic() < deadline, "the writer thread never took the line"
        time.sleep(0.001)
    return log


def written_lines(log: AuditLog, fifo: Path) -> list[dict[str, Any]]:
    """Close ``log`` while reading its FIFO: the lines it wrote."""
    reading = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        log.close()  # the thread writes what it holds, then stops
        got = b""
        while chunk := os.read(reading, 1 << 20):
            got += chunk
    finally:
        os.close(reading)
    return [json.loads(line) for line in got.splitlines()]


def test_a_full_queue_drops_the_line_and_counts_it_never_waiting(tmp_path: Path) -> None:
    fifo = tmp_path / "audit.fifo"
    log = stuck(fifo, queue_size=3)
    for n in range(10):
        log.record("node_create", token="ops", address="10.0.0.9", outcome="ok", n=n)
    assert log.dropped == 7  # 3 queued
    lines = written_lines(log, fifo)
    assert len(lines) == 1 + 3 == log.written
    assert [line["what"]["n"] for line in lines[1:]] == [0, 1, 2]


def test_refusals_cannot_crowd_out_the_acts_that_succeeded(tmp_path: Path) -> None:
    """Issue 58, D4: a flood of a read-only token's refusals dropped 58 % of an admin's
    lines. Refusals fill at most half the queue, each sender's at most a sixteenth."""
    fifo = tmp_path / "audit.fifo"
    log = stuck(fifo, queue_size=64)
    for _ in range(1000):  # a read-only token's refusals: a sixteenth of the queue
        log.record("denied", token="reader", address="10.0.0.2", outcome="permission_denied")
    sent = 1000
    for n in range(1000):  # then an unauthenticated flood from twenty-one addresses
        for other in range(21):
            log.record("auth_failed", token=None, address=f"10.1.0.{other}", outcome="blocked")
        sent += 21
        if n % 100 == 0:
            log.record("node_create", token="admin", address="10.0.0.1", outcome="ok", n=n)
            sent += 1
    lines = written_lines(log, fifo)
    assert log.written == len(lines)
    assert log.dropped == sent + 1 - len(lines)  # every drop counted
    admin = [line["what"]["n"] for line in lines if line["token"] == "admin"]
    assert admin == list(range(0, 1000, 100)), "every one of the admin's lines"
    refusals = [line for line in lines if line["outcome"] != "ok"]
    assert len(refusals) == 64 * REFUSALS_SHARE
    by_sender = Counter(line["token"] or line["address"] for line in refusals)
    assert by_sender["reader"] == 64 * SENDER_SHARE
    assert max(by_sender.values()) == 64 * SENDER_SHARE


def test_a_file_that_cannot_be_written_drops_its_lines_and_says_so_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "gone" / "audit.jsonl"  # its directory does not exist
    with caplog.at_level(logging.ERROR, logger="tenure.server"):
        _fill(AuditLog(str(path), queue_size=100), 5)
    said = [r for r in caplog.records if getattr(r, "event", None) == "audit_log_failed"]
    assert len(said) == 1
    log = AuditLog(str(path), queue_size=100)
    _fill(log, 3)
    assert log.dropped == 3
    assert log.written == 0


def test_off_records_nothing_and_long_texts_are_cut(tmp_path: Path) -> None:
    off = AuditLog()
    off.record("node_drop", token="ops", address="a", outcome="ok", node="n")
    assert not off.on
    assert off.dropped == 0
    path = tmp_path / "audit.jsonl"
    log = AuditLog(str(path))
    log.record("node_create", token="ops", address="a", outcome="ok", node="n" * 5000)
    log.close()
    assert len(json.loads(path.read_text())["what"]["node"]) == MAX_TEXT + 3


def test_failed_logins_name_a_token_only_if_the_auth_file_has_it() -> None:
    told: list[tuple[str, str | None, str, int]] = []
    throttle = Throttle(2, 30.0, names=frozenset({"ops"}))
    throttle.audit = lambda *seen: told.append(seen)
    throttle.failed("10.0.0.1", 0.0, "ops")
    throttle.failed("10.0.0.1", 1.0, "my-s3cret-typed-as-a-user")
    assert not throttle.check("10.0.0.1", 2.0)  # blocked now
    assert told == [
        ("10.0.0.1", "ops", "authentication", 1),
        ("10.0.0.1", None, "authentication", 1),  # never the text of an unknown name
        ("10.0.0.1", None, "blocked", 1),
    ]


def test_attempts_refused_while_blocked_are_counted_and_told_once_an_interval() -> None:
    """Issue 58, D3: a line per refused attempt of a blocked address rotated the trail
    away (26,139 lines in 10 s from one client); now a count per TELL_EVERY."""
    told: list[tuple[str, str | None, str, int]] = []
    throttle = Throttle(1, 100.0)
    throttle.audit = lambda *seen: told.append(seen)
    throttle.failed("10.0.0.1", 0.0)  # blocked until 100
    attempts = [0.5 + i * 0.001 for i in range(30_000)]  # 30,000 in 30 s
    for now in attempts:
        assert not throttle.check("10.0.0.1", now)
    blocked = [seen for seen in told if seen[2] == "blocked"]
    # The first at once, then one line per TELL_EVERY seconds, each with its count.
    assert len(blocked) == 1 + int((attempts[-1] - attempts[0]) // TELL_EVERY)
    assert blocked[0][3] == 1
    assert throttle.check("10.0.0.1", 100.0)  # the block is over: the rest told now
    blocked = [seen for seen in told if seen[2] == "blocked"]
    assert sum(seen[3] for seen in blocked) == len(attempts) == throttle.refused_total
    assert len(blocked) <= 5


def test_what_a_line_names_never_the_data_a_command_carries() -> None:
    annex = SetNodeAnnex("jobs", "face", b"an-annex-s3cret")
    assert act_of(annex, None, None) == "node_annex"
    assert what_of(annex, {}, None) == {"command": "SetNodeAnnex", "node": "jobs", "key": "face"}
    alter = AlterNode("jobs", {"max_sessions": 5})
    assert what_of(alter, {}, None)["changes"] == {"max_sessions": 5}
    assert act_of(KillSession("jobs", 4), ErrorCode.NOT_FOUND, None) == "kill_session"
    describe = DescribeSemaphore(1, "sem")
    assert act_of(describe, None, None) is None  # an answered read: not an act
    assert act_of(describe, ErrorCode.PERMISSION_DENIED, None) == "denied"
    assert act_of(describe, ErrorCode.LIMIT_EXCEEDED, "watches") == "quota_refused"
    assert act_of(describe, ErrorCode.LIMIT_EXCEEDED, None) is None  # not a quota's
    assert act_of(CreateNode("n"), ErrorCode.LIMIT_EXCEEDED, "nodes") == "quota_refused"


def _resolve(tmp_path: Path, *flags: str, environ: dict[str, str] | None = None) -> ServeConfig:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return resolve(parser.parse_args(list(flags)), environ or {})


def test_its_settings_from_flags_variables_and_the_config_file(tmp_path: Path) -> None:
    config = tmp_path / "conf" / "tenure.toml"
    config.parent.mkdir()
    config.write_text('audit_log = "audit.jsonl"\naudit_log_keep = 7\n')
    read = _resolve(
        tmp_path,
        "--config",
        str(config),
        "--audit-log-queue",
        "9",
        environ={"TENURE_AUDIT_LOG_MAX_BYTES": "4096"},
    )
    assert read.audit_log == str(config.parent / "audit.jsonl")
    assert (read.audit_log_keep, read.audit_log_queue, read.audit_log_max_bytes) == (7, 9, 4096)
    assert (read.sources["audit_log_queue"], read.sources["audit_log_max_bytes"]) == ("flag", "env")
    config.write_text('audit_log = "-"\n')
    assert _resolve(tmp_path, "--config", str(config)).audit_log == "-"
    with pytest.raises(ConfigError, match=r"--audit-log=.*does not exist"):
        _resolve(tmp_path, "--audit-log", str(tmp_path / "missing" / "audit.jsonl"))
    with pytest.raises(ConfigError, match=r"--audit-log=.*is a directory"):
        _resolve(tmp_path, "--audit-log", str(tmp_path))
    with pytest.raises(ConfigError, match="--audit-log-queue='0'"):
        _resolve(tmp_path, "--audit-log-queue", "0")
    with pytest.raises(ConfigError, match="--audit-log-keep='-1'"):
        _resolve(tmp_path, "--audit-log-keep", "-1")
