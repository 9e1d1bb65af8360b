"""Held to published verdicts: porcupine's own test data (vendored in
``tests/lincheck/data/porcupine``, with its licence) gets porcupine's verdict, each
Jepsen etcd history with the ``register`` model and each kv history with ``kv``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final

import pytest

from tenure.testing import lincheck

DATA: Final = Path(__file__).parent / "data" / "porcupine"
VERDICTS: Final[dict[str, bool]] = json.loads((DATA / "verdicts.json").read_text())["linearizable"]
#: A bound against a hang, below the test's own (pytest-timeout's 120 s): the check
#: then says "unknown" with its statistics. Not a speed check: the slowest history
#: takes about 0.2 s here, and bench/micro/lincheck.py's "porcupine" table times them
#: all. (10 s failed this test once beside a CI run under a CPU hog, at low priority.)
EACH_SECONDS: Final = 100.0


def test_every_vendored_history_has_a_published_verdict() -> None:
    files = sorted(str(path.relative_to(DATA)) for path in DATA.glob("*/*") if path.is_file())
    assert files == sorted(VERDICTS)
    assert len([name for name in VERDICTS if name.startswith("jepsen/")]) == 102
    assert len([name for name in VERDICTS if name.startswith("kv/")]) == 6


@pytest.mark.parametrize("name", sorted(VERDICTS))
def test_the_verdict_is_porcupines(name: str) -> None:
    format, model = (
        ("jepsen-log", "register") if name.startswith("jepsen/") else ("porcupine-kv", "kv")
    )
    history = lincheck.read_history(DATA / name, format)
    result = lincheck.check(history, model, timeout=EACH_SECONDS)
    expected = lincheck.LINEARIZABLE if VERDICTS[name] else lincheck.NOT_LINEARIZABLE
    assert result.verdict == expected, result.explain()
    if not VERDICTS[name]:
        # a violation comes with its witness: where the search got furthest
        bad = result.failed()
        assert bad is not None
        assert bad.blocked is not None
        assert "could not linearize" in result.explain()


def test_a_jepsen_history_is_read_as_porcupine_reads_it() -> None:
    # etcd_000: processes 0-4 and later ones; timed-out writes and cases are unknown
    history = lincheck.read_history(DATA / "jepsen" / "etcd_000.log", "jepsen-log")
    kinds = {op.f for op in history.operations}
    assert kinds == {"read", "write", "cas"}
    first = history.operations[0]
    assert (first.process, first.f, first.input, first.outcome) == (0, "read", None, "ok")
    assert any(op.outcome == lincheck.INFO for op in history.operations)
    cas = next(op for op in history.operations if op.f == "cas")
    assert isinstance(cas.input, list)
    assert len(cas.input) == 2
