"""The codec is sans-I/O, like the engine: importing it loads no I/O, thread or clock
module, and no module of ``tenure._protocol`` reads a clock or a random source.

The probe runs in a fresh interpreter with the same stand-in parent package as
tests/core/test_purity.py. msgspec (the codec) is imported *before* the baseline is
taken: it imports ``datetime`` (for its datetime types), which imports ``time``, and
that is msgspec's business. What is measured is what ``tenure._protocol`` adds; the
static check below makes sure our own modules never touch ``time`` either.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

import tenure.errors
from tests.core.test_purity import FORBIDDEN_MODULES, clock_or_random_uses

PACKAGE_DIR = Path(tenure.errors.__file__).resolve().parents[1]  # (errors/__init__.py)
PROTOCOL_DIR = PACKAGE_DIR / "_protocol"
SITE_PACKAGES = Path(msgspec.__file__).resolve().parent.parent

_PROBE = """
import json, sys, types
package_dir, site_packages, forbidden = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
# The compiled build's shared library (mypyc's runtime) sits beside the package.
sys.path.append(package_dir.rsplit("/", 1)[0])
sys.path.append(site_packages)
for name in forbidden:
    sys.modules.pop(name, None)
import msgspec
baseline = set(sys.modules)
stand_in = types.ModuleType("tenure")
stand_in.__path__ = [package_dir]
sys.modules["tenure"] = stand_in
import tenure._protocol
pair = tenure._protocol.ClientConnection(), tenure._protocol.ServerConnection()
pair[1].receive_data(pair[0].send(tenure._protocol.Hello()))
assert pair[1].next_event() == tenure._protocol.Hello()
import tenure.compat.dflockd.codec as wire  # the dflockd line codec: pure as well
reader = wire.LineReader()
reader.feed(wire.frame("l", "k", "5"))
assert wire.parse(reader.next_frame()) == wire.Acquire("k", 5, 1, None, False)
print(json.dumps(sorted(set(sys.modules) - baseline)))
"""


def _loaded(package_dir: Path) -> list[str]:
    completed = subprocess.run(
        [
            sys.executable,
            "-I",
            "-S",
            "-c",
            _PROBE,
            str(package_dir),
            str(SITE_PACKAGES),
            ",".join(FORBIDDEN_MODULES),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert completed.returncode == 0, completed.stderr
    loaded: list[str] = json.loads(completed.stdout)
    return loaded


def _forbidden(loaded: list[str]) -> list[str]:
    return sorted(
        name
        for name in loaded
        if any(name == bad or name.startswith(bad + ".") for bad in FORBIDDEN_MODULES)
    )


def test_importing_the_codec_loads_no_io_thread_or_clock_module():
    loaded = _loaded(PACKAGE_DIR)
    assert "tenure._protocol.connection" in loaded  # really imported from this tree
    assert "tenure.compat.dflockd.codec" in loaded
    assert not any(name.startswith(("tenure.client", "tenure.backends")) for name in loaded)
    assert _forbidden(loaded) == []


@pytest.mark.parametrize(
    ("statement", "expected"),
    [("import asyncio", "asyncio"), ("import socket", "socket"), ("import threading", "threading")],
)
def test_the_probe_catches_an_injected_import(tmp_path, statement, expected):
    copy = tmp_path / "tenure"
    # Without the compiled build's extensions: the edited .py is what must load.
    shutil.copytree(PACKAGE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    target = copy / "_protocol" / "frames.py"
    marker = "from __future__ import annotations\n"
    source = target.read_text(encoding="utf-8")
    assert marker in source
    target.write_text(source.replace(marker, marker + statement + "\n", 1), encoding="utf-8")
    assert expected in _forbidden(_loaded(copy))


def _sources() -> list[Path]:
    sources = sorted(PROTOCOL_DIR.glob("*.py"))
    assert len(sources) >= 6, sources
    return sources


@pytest.mark.parametrize("path", _sources(), ids=lambda p: p.name)
def test_codec_module_reads_no_clock_or_random_source(path):
    assert clock_or_random_uses(path.read_text(encoding="utf-8")) == []
