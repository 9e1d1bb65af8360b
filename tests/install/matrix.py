"""The install matrix's parts: one wheel and one wheelhouse per run, a venv per install.

Every install the docs name (:data:`INSTALLS`: ``pip install tenure``,
``'tenure[server]'``, ...) gets a fresh venv with that install only, made from the
**pure wheel** of this checkout (``TENURE_COMPILE=never``: built in seconds, and a
compiled one would be a minute and more of mypyc per run; the compiled build is
``scripts/start``'s, tested from a copy of the checkout: :mod:`tests.install.checkout`).

What is made once per test run, shared by its pytest-xdist workers (in the run's
temporary directory, above each worker's own; the first worker that needs a part
makes it under a file lock, the others wait for it):

* the wheel, built without build isolation (this venv has hatchling and the hook's
  dependencies: no download);
* the wheelhouse: the wheels of every dependency of every install here, of the
  ``compile`` and ``testing`` extras, and of the build's own requirements (what
  ``scripts/bootstrap`` installs into a copy of the checkout), resolved once against
  the package registries (pip's cache makes it quick after the test venv's install);
* each venv (``python -m venv --without-pip``, then this venv's pip installs into it
  from the wheelhouse alone: ``--no-index``), so no install touches the network.

A part whose making failed is made again by the next worker that asks; its error is
each asking test's failure (never a skip: a missing package must fail CI).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pytest

__all__ = [
    "ELSEWHERE",
    "INSTALLS",
    "ROOT",
    "Install",
    "Venv",
    "Wheelhouse",
    "extra_distributions",
    "extras_closure",
    "made_once",
    "program_env",
    "shared_dir",
]

ROOT: Final = Path(__file__).resolve().parents[2]
PYPROJECT: Final[dict[str, Any]] = tomllib.loads((ROOT / "pyproject.toml").read_text())
#: Bound of one pip run, in seconds (the wheelhouse's resolution goes to the registry).
PIP_WAIT: Final = 600.0
#: How long a worker waits for another worker's making of a shared part, in seconds.
SHARED_WAIT: Final = 900.0
#: What the checkout's own flows install beyond the installs' extras: ``scripts/start``
#: (``compile``) and the README's conformance kit command (``testing``).
CHECKOUT_EXTRAS: Final = ("compile", "testing")


def extras_closure(extras: tuple[str, ...] | frozenset[str]) -> frozenset[str]:
    """``extras`` with every extra they name in turn (``server`` names ``tenure[cli]``)."""
    table: dict[str, list[str]] = PYPROJECT["project"]["optional-dependencies"]
    found: set[str] = set()
    todo = list(extras)
    while todo:
        extra = todo.pop()
        if extra in found:
            continue
        found.add(extra)
        for requirement in table[extra]:
            inner = re.fullmatch(r"tenure\[([a-z0-9_,-]+)\]", requirement.split(";")[0].strip())
            if inner is not None:
                todo += inner[1].split(",")
    return frozenset(found)


def extra_distributions(extra: str) -> frozenset[str]:
    """The distributions ``extra`` pulls by name (through the extras it names)."""
    table: dict[str, list[str]] = PYPROJECT["project"]["optional-dependencies"]
    return frozenset(
        re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0]
        for named in extras_closure((extra,))
        for requirement in table[named]
        if not requirement.startswith("tenure[")
    )


@dataclass(frozen=True)
class Install:
    """One install the docs name: its id and the extras it asks for."""

    name: str
    extras: tuple[str, ...]

    @property
    def command(self) -> str:
        """The install as the docs write it."""
        if not self.extras:
            return "pip install tenure"
        return f"pip install 'tenure[{','.join(self.extras)}]'"

    @property
    def has(self) -> frozenset[str]:
        """Every extra it installs (those it names, and those they name)."""
        return extras_closure(self.extras)


#: The installs of tenure the docs name for the library, its command, its server and its
#: backends, by id (README.md, docs/operations.md, docs/cluster.md, docs/ydb.md,
#: docs/backends.md); the docs' other installs are tested where :data:`ELSEWHERE` says.
INSTALLS: Final = {
    install.name: install
    for install in (
        Install("tenure", ()),
        Install("cli", ("cli",)),
        Install("server", ("server",)),
        Install("server-ydb", ("server", "ydb")),
        Install("server-etcd", ("server", "etcd")),
        Install("etcd", ("etcd",)),
        Install("redis", ("redis",)),
        Install("postgres", ("postgres",)),
    )
}


#: The extras the docs name in installs of their own that the matrix leaves to other
#: tests, and where: each is one tool's client, tested with the tool.
ELSEWHERE: Final = {
    "testing": "tests/test_conformance_kit.py (a fresh venv of it runs the kit from "
    "outside the checkout) and tests/install/test_checkout.py (in it)",
    "tooz": "tests/contrib/test_tooz*.py (tooz's own suite, in the test venv)",
    "celery": "tests/contrib/test_celery*.py (real workers, in the test venv)",
    "limits": "tests/contrib/test_limits*.py (flask-limiter, in the test venv)",
    "otel": "tests/contrib/test_otel*.py (the SDK's exporters, in the test venv)",
    # (docs/operations.md names it as what a server install adds for --ydb-port.)
    "ydb": "the matrix's server-ydb: tenure[server] with it",
}


def shared_dir(factory: pytest.TempPathFactory) -> Path:
    """The run's directory for the matrix's shared parts: above the worker's own
    temporary directory under pytest-xdist (each worker's is ``popen-gwN`` in it)."""
    base = factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    path = root / "install-matrix"
    path.mkdir(exist_ok=True)
    return path


@contextlib.contextmanager
def _locked(lock: Path) -> Iterator[None]:
    """Hold the file lock ``lock`` (waited for at most :data:`SHARED_WAIT`)."""
    with lock.open("a") as file:
        deadline = time.monotonic() + SHARED_WAIT
        while True:
            try:
                fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise AssertionError(f"{lock} stayed locked for {SHARED_WAIT:.0f} s") from None
                time.sleep(0.2)  # (another worker makes the part: a bounded wait for it)
        try:
            yield
        finally:
            fcntl.flock(file, fcntl.LOCK_UN)


def made_once(target: Path, make: Callable[[Path], None]) -> Path:
    """``target``, made by ``make(target)`` once per run: by the first worker that asks,
    under a lock the others wait on. A failed making leaves no mark: the next asks again."""
    done = target.with_name(f"{target.name}.done")
    with _locked(target.with_name(f"{target.name}.lock")):
        if not done.exists():
            shutil.rmtree(target, ignore_errors=True)
            make(target)
            done.touch()
    return target


def program_env(**more: str) -> dict[str, str]:
    """The environment of a program run from a matrix venv: this one without what would
    point it at the checkout or this venv (``PYTHONPATH``, ``VIRTUAL_ENV``), pytest's
    and tenure's own variables (a ``TENURE_URL`` of the test run, say), and ``more``."""
    dropped = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in dropped and not name.startswith(("PYTEST_", "TENURE_", "COV_"))
    }
    return {**env, **more}


def _run(command: list[str | Path], what: str, **options: Any) -> str:
    """Run ``command`` (bounded by :data:`PIP_WAIT`); its output; fails saying ``what``."""
    done = subprocess.run(
        [str(part) for part in command],
        capture_output=True,
        text=True,
        timeout=PIP_WAIT,
        check=False,
        **options,
    )
    if done.returncode != 0:
        raise AssertionError(f"{what} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    said: str = done.stdout
    return said


def _pip(*args: str | Path) -> list[str | Path]:
    return [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args]


@dataclass(frozen=True)
class Wheelhouse:
    """The run's pure wheel of tenure, and the wheels of everything it may install."""

    wheel: Path
    house: Path

    @classmethod
    def made(cls, root: Path) -> Wheelhouse:
        """The run's wheel and wheelhouse under ``root`` (each made once per run)."""
        dist = made_once(root / "dist", _build_wheel)
        (wheel,) = dist.glob("tenure-*.whl")
        house = made_once(root / "house", lambda into: _build_house(into, wheel))
        return cls(wheel, house)

    def venv(self, root: Path, install: Install) -> Venv:
        """The venv of ``install`` under ``root`` (made once per run)."""

        def make(into: Path) -> None:
            _run([sys.executable, "-m", "venv", "--without-pip", into], f"a venv at {into}")
            spec = f"{self.wheel}[{','.join(install.extras)}]" if install.extras else self.wheel
            python = into / "bin" / "python"
            # --no-compile: the bytecode is written by the imports that need it.
            command = _pip("--python", python, "install", "--no-index", "--no-compile")
            _run([*command, "--find-links", self.house, spec], f"{install.command} into {into}")

        return Venv(made_once(root / f"venv-{install.name}", make))


def _build_wheel(into: Path) -> None:
    """The pure wheel of the checkout as it is (hatchling leaves out what git ignores:
    an in-place compiled build's extensions are not in it)."""
    into.mkdir(parents=True)
    command = _pip("wheel", "--no-deps", "--no-build-isolation", "-w", into, ROOT)
    _run(command, "the pure wheel's build", env={**os.environ, "TENURE_COMPILE": "never"})


def _build_house(into: Path, wheel: Path) -> None:
    """Every wheel the matrix installs, resolved once (the registry, through pip's cache)."""
    extras = sorted({extra for install in INSTALLS.values() for extra in install.extras})
    extras += CHECKOUT_EXTRAS
    # The build's own: what scripts/bootstrap's editable install asks of hatchling (the
    # hook's dependencies, and editables), as pip's build isolation would.
    asked = "from hatchling.build import get_requires_for_build_editable as asked\n"
    asked += "print('\\n'.join(asked()))"
    hatchling = _run([sys.executable, "-c", asked], "hatchling's build requirements", cwd=ROOT)
    build = [*PYPROJECT["build-system"]["requires"], *hatchling.splitlines()]
    into.mkdir(parents=True)
    command = _pip("wheel", "-w", into, f"{wheel}[{','.join(extras)}]", *build)
    _run(command, "the wheelhouse (pip wheel of every install's dependencies)")


@dataclass(frozen=True)
class Venv:
    """One matrix venv: its programs run with :func:`program_env`, bounded."""

    root: Path

    def bin(self, name: str) -> Path:
        """The program ``name`` of its ``bin``."""
        return self.root / "bin" / name

    @property
    def python(self) -> Path:
        """Its interpreter."""
        return self.bin("python")

    def run(
        self,
        program: str,
        *args: str | Path,
        cwd: Path,
        timeout: float = 60.0,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run its ``program`` (``python``, ``tenure``...) with ``args`` from ``cwd``."""
        return subprocess.run(
            [str(self.bin(program)), *(str(arg) for arg in args)],
            cwd=cwd,
            env=program_env(**(env or {})),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
