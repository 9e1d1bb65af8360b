"""The npm steps the JavaScript tests share: both packages installed and built, once.

``tests/js_client/test_js_client.py`` and ``test_readme_blocks.py`` use the same
``node_modules`` and ``dist`` of ``clients/js`` and ``clients/js/effect``, and
pytest-xdist may run them at once on two workers. :func:`packages_ready` installs
(``npm ci``: the lock files' exact versions, from the registry) and builds
(``tsc --strict``) under an exclusive lock when either is out of date, then holds a
shared lock while the caller uses them, so that no ``npm ci`` (which deletes
``node_modules`` first) runs under another test's feet. ``node_modules`` is out of
date when it was not made by ``npm ci`` from the present ``package.json`` and
``package-lock.json`` (a stamp file says which); ``dist`` when a source is newer
than tsc's build info.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from tests.etcd.cluster import etcd_binary
from tests.servers import require

REPO: Final = Path(__file__).resolve().parents[2]
JS_DIR: Final = REPO / "clients" / "js"
#: The effect-distributed-lock backing, a package of its own over ``JS_DIR``'s.
EFFECT_DIR: Final = JS_DIR / "effect"
#: Both packages, in build order (the backing is built against the client).
PACKAGES: Final = (JS_DIR, EFFECT_DIR)
#: Bounds of the npm steps (a first ``npm ci`` fetches from the registry).
NPM_CI_S: Final = 300.0
NPM_TEST_S: Final = 480.0
#: The stamp ``npm ci`` leaves in ``node_modules``: the digest of the files it read.
STAMP: Final = ".tenure-npm-ci"
#: The lock both test files take (one per checkout: its path's digest names it).
LOCK: Final = Path(tempfile.gettempdir()) / (
    "tenure-npm-" + hashlib.sha256(str(JS_DIR).encode()).hexdigest()[:16] + ".lock"
)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.strip().lstrip("v>= ").split("-")[0].split("."))


def js_unavailable() -> str | None:
    """Why ``npm ci``/``npm test`` cannot run here, or None."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        return "node and npm are needed for clients/js (apt-get install nodejs npm)"
    want: str = json.loads((JS_DIR / "package.json").read_text())["engines"]["node"]
    have = subprocess.run([node, "--version"], capture_output=True, text=True, check=True).stdout
    if _version(have) < _version(want):
        return f"clients/js needs Node.js {want}; node here is {have.strip()}"
    return None


def env() -> dict[str, str]:
    """The JS tests' environment: this interpreter and this checkout's sources for
    ``tenure serve``."""
    path = os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")]))
    etcd = etcd_binary()  # the JS cluster test's etcd: the one the suite runs
    return {
        **os.environ,
        "TENURE_PYTHON": sys.executable,
        "PYTHONPATH": path,
        **({"TENURE_ETCD": etcd} if etcd else {}),
    }


def run(args: list[str], limit: float, cwd: Path = JS_DIR) -> subprocess.CompletedProcess[str]:
    """Run ``args`` in ``cwd`` with :func:`env`; it must exit 0 within ``limit`` s."""
    done = subprocess.run(
        args, cwd=cwd, env=env(), capture_output=True, text=True, timeout=limit, check=False
    )
    assert done.returncode == 0, f"{args} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done


def _digest(package: Path) -> str:
    files = (package / "package.json", package / "package-lock.json")
    return hashlib.sha256(b"".join(path.read_bytes() for path in files)).hexdigest()


def _installed(package: Path) -> bool:
    stamp = package / "node_modules" / STAMP
    return stamp.is_file() and stamp.read_text() == _digest(package)


def _built(package: Path) -> bool:
    info = package / "dist" / ".tsbuildinfo"
    if not info.is_file():
        return False
    sources = [*package.glob("src/*.ts"), *package.glob("test/*.ts"), package / "tsconfig.json"]
    return max(path.stat().st_mtime for path in sources) <= info.stat().st_mtime


def _stale_tests(package: Path) -> list[Path]:
    """Compiled tests whose source is gone (``node --test dist/test/*.test.js`` would
    run them)."""
    compiled = (package / "dist" / "test").glob("*.js")
    return [path for path in compiled if not (package / "test" / f"{path.stem}.ts").is_file()]


def _ready() -> bool:
    return all(_installed(p) and _built(p) and not _stale_tests(p) for p in PACKAGES)


def _prepare() -> None:
    for package in PACKAGES:
        if not _installed(package):
            (package / "node_modules" / STAMP).unlink(missing_ok=True)
            run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], NPM_CI_S, package)
            (package / "node_modules" / STAMP).write_text(_digest(package))
        for path in _stale_tests(package):
            path.unlink()
        run(["npm", "run", "build"], NPM_TEST_S, package)


@contextmanager
def packages_ready() -> Iterator[None]:
    """Both packages installed and built, and kept so while the block runs (the
    module docstring); skipped without node or npm (failed under ``CI=true``)."""
    require(js_unavailable(), "node or npm")
    with LOCK.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_SH)
        if not _ready():
            fcntl.flock(handle, fcntl.LOCK_UN)
            fcntl.flock(handle, fcntl.LOCK_EX)
            _prepare()
            fcntl.flock(handle, fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
