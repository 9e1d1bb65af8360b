"""``python -m tenure.testing.lincheck``: its exit statuses, its witness, bad input
named by line, merged files, ``--json``, ``--watches``, ``--html`` (run in this
process: ``main`` is what the module runs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tenure.testing.lincheck.__main__ import main

DATA = Path(__file__).parent / "data" / "porcupine"


def write(path: Path, *events: dict[str, Any]) -> str:
    path.write_text("".join(json.dumps(event) + "\n" for event in events))
    return str(path)


def op(process: int, kind: str, f: str, value: Any, time: int | None = None) -> dict[str, Any]:
    event = {"process": process, "type": kind, "f": f, "value": value}
    if time is not None:
        event["time"] = time
    return event


def test_porcupines_histories_get_its_verdicts(capsys: pytest.CaptureFixture[str]) -> None:
    good = str(DATA / "jepsen" / "etcd_002.log")
    bad = str(DATA / "jepsen" / "etcd_000.log")
    assert main(["--format", "jepsen-log", "--model", "register", good]) == 0
    assert main(["--format", "jepsen-log", "--model", "register", bad]) == 1
    out = capsys.readouterr().out
    assert out.startswith("linearizable: ")
    assert "not linearizable: " in out
    assert "could not linearize" in out
    kv = str(DATA / "kv" / "c10-bad.txt")
    assert main(["--format", "porcupine-kv", "--model", "kv", kv]) == 1


def test_a_bound_passed_is_unknown_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    history = str(DATA / "jepsen" / "etcd_002.log")  # 0.5 s of search
    assert (
        main(["--format", "jepsen-log", "--model", "register", "--timeout", "1e-9", history]) == 2
    )
    assert capsys.readouterr().out.startswith("unknown: ")


def test_bad_input_names_its_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "h.jsonl"
    path.write_text(json.dumps(op(0, "invoke", "read", None)) + "\n{not json\n")
    assert main(["--model", "register", str(path)]) == 2
    assert f"lincheck: {path}:2: not JSON" in capsys.readouterr().err
    write(path, op(0, "invoke", "read", None), op(0, "ok", "write", 1))
    assert main(["--model", "register", str(path)]) == 2
    assert "h.jsonl:2: completes 'write', but process 0 invoked 'read' (line 1)" in (
        capsys.readouterr().err
    )
    write(path, op(0, "invoke", "push", 1))
    assert main(["--model", "register", str(path)]) == 2
    assert "line 1: model register has no operation 'push'" in capsys.readouterr().err
    assert main(["--model", "register", str(tmp_path / "missing.jsonl")]) == 2
    assert "missing.jsonl: No such file or directory" in capsys.readouterr().err
    assert main(["--model", "semaphore", write(path, op(0, "invoke", "acquire", 1))]) == 2
    assert "needs the limit" in capsys.readouterr().err


def test_a_semaphores_limit_from_the_command_line(tmp_path: Path) -> None:
    path = write(
        tmp_path / "s.jsonl",
        op(0, "invoke", "acquire", 1),
        op(0, "ok", "acquire", 1),
        op(1, "invoke", "acquire", 1),
        op(1, "ok", "acquire", 2),
    )
    assert main(["--model", "semaphore", "--limit", "2", path]) == 0
    assert main(["--model", "semaphore", "--limit", "1", path]) == 1


def test_files_of_several_processes_are_merged_by_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    one = write(tmp_path / "p0.jsonl", op(0, "invoke", "write", 1, 10), op(0, "ok", "write", 1, 20))
    two = write(
        tmp_path / "p1.jsonl", op(1, "invoke", "read", None, 30), op(1, "ok", "read", 1, 40)
    )
    assert main(["--model", "register", "--json", one, two]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["verdict"], data["checked_operations"], data["keys"]) == ("linearizable", 2, 1)
    stale = write(
        tmp_path / "p2.jsonl", op(2, "invoke", "read", None, 50), op(2, "ok", "read", None, 60)
    )
    assert main(["--model", "register", one, two, stale]) == 1


def test_watches_and_a_timeline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    history = write(
        tmp_path / "h.jsonl", op(0, "invoke", "write", 1, 10), op(0, "ok", "write", 1, 20)
    )
    watches = tmp_path / "w.jsonl"
    armed = {"watcher": "w", "event": "armed", "time": 0}
    watches.write_text(
        "\n".join(
            json.dumps(line)
            for line in (
                armed,
                {"watcher": "w", "event": "saw", "value": None, "time": 5},
                {"watcher": "w", "event": "saw", "value": 1, "time": 25},
                {"watcher": "w", "event": "ended", "final": True, "time": 30},
            )
        )
    )
    page = tmp_path / "t.html"
    assert (
        main(["--model", "register", "--watches", str(watches), "--html", str(page), history]) == 0
    )
    assert "watches: 1 watcher(s), 2 item(s) seen" in capsys.readouterr().out
    assert page.read_text().lstrip().lower().startswith("<!doctype html>")
    watches.write_text(
        json.dumps(armed)
        + "\n"
        + json.dumps({"watcher": "w", "event": "ended", "final": True, "time": 30})
    )
    assert main(["--model", "register", "--watches", str(watches), history]) == 1
    assert "watched to the end and saw nothing" in capsys.readouterr().out


def test_the_models_are_listed(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--models"]) == 0
    out = capsys.readouterr().out
    for name in ("register:", "kv:", "counter:", "mutex:", "semaphore:", "membership:"):
        assert name in out
    assert "  lost: value: the token" in out


def test_no_model_or_no_file_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["x.jsonl"]) == 2
    assert "a --model and at least one FILE are needed" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        main(["--model", "nonsense", "x.jsonl"])
    assert exited.value.code == 2
