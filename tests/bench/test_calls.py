"""bench.micro.calls counts a known chain of calls, and its folder hops, exactly.

The chain is this file's functions (folder ``bench`` of ``tests/``) calling one of
``tests/compiled.py`` (folder ``.``), with ``tests/`` standing for the package whose
folders are compared, as ``src/tenure`` does in the benchmark.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from bench.micro.calls import Recorder, folder_of, top_level

from tests.compiled import is_extension

TESTS = Path(__file__).resolve().parents[1]


def _inner() -> bool:
    return is_extension(None)  # (no call of its own)


def _outer() -> bool:
    return _inner() or len("") > 0


def test_calls_c_calls_and_hops_of_a_known_chain():
    recorder = Recorder(package=TESTS)
    sys.setprofile(recorder)
    try:
        _outer()
    finally:
        sys.setprofile(None)
    assert (recorder.calls, recorder.tenure_calls) == (3, 3)  # _outer, _inner, is_extension
    assert recorder.c_calls == 2  # len, and setprofile(None)
    assert recorder.hops == [(("bench", "_inner"), (".", "is_extension"))]
    assert recorder.commands == []  # (no host's execute)


def test_folders_and_top_level_packages():
    assert folder_of(str(TESTS / "bench" / "test_calls.py"), TESTS) == "bench"
    assert folder_of(str(TESTS / "compiled.py"), TESTS) == "."
    assert folder_of(pytest.__file__, TESTS) is None
    assert folder_of("<string>", TESTS) is None  # (a dataclass's generated __init__)
    within = (("server", "f"), ("server/_net", "g"))
    across = (("server/_net", "g"), ("_core", "h"))
    assert top_level([within, across]) == [across]
