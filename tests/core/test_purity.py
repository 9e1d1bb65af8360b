"""The engine is sans-I/O: importing it loads no I/O, thread or clock module, and
no module in ``tenure._core`` reads a clock or a random source.

The import check runs in a fresh interpreter. The parent package ``tenure`` is
replaced by an empty stand-in so that only ``tenure._core`` (and what it imports)
is measured: ``tenure/__init__.py`` legitimately imports the asyncio client.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tenure.errors

PACKAGE_DIR = Path(tenure.errors.__file__).resolve().parents[1]  # (errors/__init__.py)
CORE_DIR = PACKAGE_DIR / "_core"

FORBIDDEN_MODULES = (
    "asyncio",
    "socket",
    "selectors",
    "threading",
    "time",
    "random",
    "ssl",
    "subprocess",
)

# Runs in a child interpreter started with -I -S (no site, no user paths).
# A bare interpreter already has some modules loaded (``time`` among them), so the
# forbidden ones are first taken out of sys.modules: importing any of them again
# puts it back, and the diff against the baseline then shows it.
_PROBE = """
import json, sys, types
package_dir, forbidden = sys.argv[1], sys.argv[2].split(",")
# The compiled build's shared library (mypyc's runtime) sits beside the package.
sys.path.append(package_dir.rsplit("/", 1)[0])
preloaded = sorted(name for name in forbidden if name in sys.modules)
for name in forbidden:
    sys.modules.pop(name, None)
baseline = set(sys.modules)
stand_in = types.ModuleType("tenure")
stand_in.__path__ = [package_dir]
sys.modules["tenure"] = stand_in
import tenure._core, tenure._core.invariants
engine = tenure._core.Engine()
loaded = sorted(set(sys.modules) - baseline)
print(json.dumps({"preloaded": preloaded, "loaded": loaded}))
"""


def _probe(package_dir: Path) -> dict[str, list[str]]:
    completed = subprocess.run(
        [sys.executable, "-I", "-S", "-c", _PROBE, str(package_dir), ",".join(FORBIDDEN_MODULES)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert completed.returncode == 0, completed.stderr
    result: dict[str, list[str]] = json.loads(completed.stdout)
    return result


def _forbidden_loaded(package_dir: Path) -> list[str]:
    loaded = _probe(package_dir)["loaded"]
    return sorted(
        name
        for name in loaded
        if any(name == bad or name.startswith(bad + ".") for bad in FORBIDDEN_MODULES)
    )


def test_importing_the_core_loads_no_io_thread_or_clock_module():
    probe = _probe(PACKAGE_DIR)
    # The probe really imported the engine from this source tree ...
    assert "tenure._core.engine" in probe["loaded"]
    assert "tenure._core.invariants" in probe["loaded"]
    # ... and the client package was not dragged in.
    assert not any(name.startswith("tenure.client") for name in probe["loaded"])
    assert _forbidden_loaded(PACKAGE_DIR) == []


def _copy_with_injected_import(tmp_path: Path, statement: str) -> Path:
    copy = tmp_path / "tenure"
    # Without the compiled build's extensions: the edited .py is what must load.
    shutil.copytree(PACKAGE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    target = copy / "_core" / "deadlines.py"
    source = target.read_text(encoding="utf-8")
    marker = "from __future__ import annotations\n"
    assert marker in source
    target.write_text(source.replace(marker, marker + statement + "\n", 1), encoding="utf-8")
    return copy


@pytest.mark.parametrize(
    ("statement", "expected"),
    [
        ("import asyncio", "asyncio"),
        ("import time", "time"),  # loaded at interpreter start-up, still caught
        ("import random", "random"),
        ("from threading import Lock", "threading"),
        ("import socket", "socket"),
    ],
)
def test_the_import_probe_catches_an_injected_import(tmp_path, statement, expected):
    copy = _copy_with_injected_import(tmp_path, statement)
    assert expected in _forbidden_loaded(copy)


# -- static check: nothing in the core reads a clock or a random source ---------------


def _dotted(node: ast.expr) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def clock_or_random_uses(source: str) -> list[str]:
    """Every use of time.*, random.*, datetime now/today, or an import of a forbidden
    module, in ``source``; empty if there is none."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [
                f"import {a.name}" for a in node.names if a.name.split(".")[0] in FORBIDDEN_MODULES
            ]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level == 0 and module.split(".")[0] in FORBIDDEN_MODULES:
                found.append(f"from {module} import ...")
            if module == "datetime" and any(a.name in {"datetime", "date"} for a in node.names):
                found.append("from datetime import datetime/date")
        elif isinstance(node, ast.Attribute):
            dotted = _dotted(node)
            if dotted is None:
                continue
            clock_read = dotted.endswith((".now", ".utcnow", ".today")) and "date" in dotted
            if dotted.split(".")[0] in {"time", "random"} or clock_read:
                found.append(dotted)
    return found


def _core_sources() -> list[Path]:
    sources = sorted(CORE_DIR.rglob("*.py"))  # the handlers subpackage too
    assert len(sources) >= 8, sources  # the engine's modules are really there
    return sources


@pytest.mark.parametrize("path", _core_sources(), ids=lambda p: p.relative_to(CORE_DIR).as_posix())
def test_core_module_reads_no_clock_or_random_source(path):
    assert clock_or_random_uses(path.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize(
    "snippet",
    [
        "import time\nx = time.monotonic()",
        "import time as t\n",
        "from time import monotonic",
        "import random\nrandom.random()",
        "import datetime\nd = datetime.datetime.now()",
        "from datetime import datetime\nd = datetime.now()",
        "import datetime\nd = datetime.date.today()",
        "from datetime import date",
        "import asyncio",
        "import threading",
    ],
)
def test_static_check_catches_clock_and_random_uses(snippet):
    assert clock_or_random_uses(snippet) != []


def test_static_check_accepts_pure_code():
    snippet = "import math\nimport heapq\ndef f(now: float) -> float:\n    return now + 1.0\n"
    assert clock_or_random_uses(snippet) == []
