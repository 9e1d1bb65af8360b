"""Build tenure's compiled wheels, one per CPython, and check each in a fresh venv.

``scripts/wheels`` runs this. For each interpreter (``--python``, repeatable; by
default ``python3.11``, ``python3.12`` and ``python3.13``, each where it is found: on
PATH, or among pyenv's versions; a missing one is said):

1. the wheel, built by pip with ``TENURE_COMPILE=always`` (a wheel that could not be
   compiled fails rather than coming out pure) from an export of ``HEAD`` (``git
   archive``: a compiled build writes into the tree it builds, which must not be the
   checkout) in a temporary directory outside it (mypy would read this checkout's
   ``pyproject.toml`` from a directory below it: its strict settings, not the
   hook's), into ``dist/``;
2. a fresh venv with that wheel and the test suite's extras;
3. the check that the venv loads the compiled build: every module of the hook's list
   is an extension there, and ``tenure --version`` says ``compiled build``;
4. the unit tier (``pytest --unit-tier tests``, on two workers) run from this
   checkout's ``tests`` against the installed wheel (``--no-tests`` skips it).

It prints one line per interpreter and exits 1 unless every one found passed. The
venvs and the exports go to ``build/wheels/`` (git-ignored), the wheels to ``dist/``.
Needs network access to PyPI (the build's and the venvs' dependencies) and gcc.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tests.compiled import compiled_sources, module_name

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "build" / "wheels"
DIST = ROOT / "dist"
DEFAULT_PYTHONS = ("python3.11", "python3.12", "python3.13")

#: Run in each venv: every listed module must load as an extension, and no other.
CHECK = """
import importlib, importlib.machinery, pathlib, sys, tenure
suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
listed = sys.argv[1:]
pure = [n for n in listed if not importlib.import_module(n).__file__.endswith(suffixes)]
if pure:
    sys.exit("pure, not compiled: " + ", ".join(pure))
package = pathlib.Path(tenure.__file__).parent
found = {
    ".".join(("tenure", *path.relative_to(package).parts)).split(".cpython")[0]
    for path in package.rglob("*") if path.name.endswith(suffixes)
}
found = {name.removesuffix(".__init__") for name in found}
extra = sorted(found - set(listed))
if extra:
    sys.exit("compiled, but not in the list: " + ", ".join(extra))
"""


@dataclass
class Outcome:
    """What happened for one interpreter."""

    python: str
    version: str = ""
    wheel: str = ""
    verdict: str = "not run"
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        """Whether every step passed."""
        return self.verdict == "ok"


def _run(
    command: list[str], log: Path, *, cwd: Path | None = None, env: dict[str, str] | None = None
) -> None:
    """Run ``command``, its output appended to ``log``; raise saying where on failure."""
    with log.open("a") as out:
        out.write(f"$ {' '.join(command)}\n")
        out.flush()
        done = subprocess.run(
            command, stdout=out, stderr=subprocess.STDOUT, cwd=cwd, env=env or _environ()
        )
    if done.returncode != 0:
        raise RuntimeError(f"{Path(command[0]).name} {command[1:3]} failed (log: {log})")


def _export(into: Path) -> Path:
    """``HEAD``'s tracked files, extracted into ``into/tree``."""
    tree = into / "tree"
    tree.mkdir(parents=True)
    archive = into / "head.tar"
    subprocess.run(
        ["git", "archive", "--format=tar", "-o", str(archive), "HEAD"], cwd=ROOT, check=True
    )
    with tarfile.open(archive) as tar:
        tar.extractall(tree, filter="data")
    archive.unlink()
    return tree


def _one(python: str, tests: bool) -> Outcome:
    """Build, install, check and test with ``python`` (see the module docstring)."""
    outcome = Outcome(python)
    interpreter = _find(python)
    if interpreter is None:
        outcome.verdict = "not found"
        return outcome
    started = time.monotonic()
    version = subprocess.run(
        [interpreter, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    outcome.version = version
    work = WORK / f"py{version}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    log = work / "log.txt"
    try:
        built = work / "dist"
        with tempfile.TemporaryDirectory(prefix="tenure-wheel-") as outside:
            tree = _export(Path(outside))
            pip_wheel = [interpreter, "-m", "pip", "wheel", "--no-deps", "-w", str(built)]
            _run([*pip_wheel, str(tree)], log, env={**_environ(), "TENURE_COMPILE": "always"})
        (wheel,) = built.glob("tenure-*.whl")
        DIST.mkdir(exist_ok=True)
        shutil.copy2(wheel, DIST / wheel.name)
        outcome.wheel = wheel.name
        venv = work / "venv"
        _run([interpreter, "-m", "venv", str(venv)], log)
        vpy = str(venv / "bin" / "python")
        quiet = ["-q", "--disable-pip-version-check"]
        _run([vpy, "-m", "pip", "install", *quiet, f"{wheel}[test]"], log)
        # As scripts/bootstrap does: a test client whose metadata asks for Python 3.12+.
        _run(
            [
                vpy,
                "-m",
                "pip",
                "install",
                *quiet,
                "--ignore-requires-python",
                "dflockd-client==2.1.1",
            ],
            log,
        )
        names = [module_name(source) for source in compiled_sources()]
        _run([vpy, "-c", CHECK, *names], log, cwd=work)
        said = subprocess.run(
            [str(venv / "bin" / "tenure"), "--version"], capture_output=True, text=True, check=True
        ).stdout
        if "(compiled build)" not in said:
            raise RuntimeError(f"tenure --version says {said.strip()!r}")
        if tests:
            unit = [
                vpy,
                "-m",
                "pytest",
                "--unit-tier",
                "-n",
                "2",
                "-q",
                "-p",
                "no:cacheprovider",
                "tests",
            ]
            _run(unit, log, cwd=ROOT, env={**_environ(), "TENURE_EXPECT_COMPILED": "1"})
        outcome.verdict = "ok"
    except (RuntimeError, subprocess.CalledProcessError, ValueError) as error:
        outcome.verdict = str(error)
    outcome.seconds = time.monotonic() - started
    return outcome


def _find(python: str) -> str | None:
    """The interpreter ``python`` names: a path, a command that runs, or pyenv's newest
    version of that name (``python3.12`` -> ``$(pyenv root)/versions/3.12.*``)."""
    candidates = [shutil.which(python)]
    pyenv = shutil.which("pyenv")
    wanted = python.removeprefix("python")
    if pyenv is not None and wanted:
        root = subprocess.run([pyenv, "root"], capture_output=True, text=True).stdout.strip()
        versions = sorted(
            Path(root, "versions").glob(f"{wanted}.*"),
            key=lambda path: [int(part) for part in path.name.split(".") if part.isdigit()],
        )
        candidates += [str(path / "bin" / python) for path in reversed(versions)]
    for candidate in candidates:
        if candidate is None:
            continue
        ran = subprocess.run([candidate, "-c", "pass"], capture_output=True, env=_environ())
        if ran.returncode == 0:
            return candidate
    return None


def _environ() -> dict[str, str]:
    """This process's environment, without what would point a child at this checkout."""
    drop = {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME"}
    return {key: value for key, value in os.environ.items() if key not in drop}


def main() -> None:
    """Build and check each interpreter's wheel; exit 1 unless all found passed."""
    parser = argparse.ArgumentParser(prog="scripts/wheels", description=__doc__)
    parser.add_argument("--python", action="append", help="an interpreter (repeatable)")
    parser.add_argument("--no-tests", action="store_true", help="build and check only")
    args = parser.parse_args()
    outcomes = [_one(python, not args.no_tests) for python in args.python or DEFAULT_PYTHONS]
    for outcome in outcomes:
        print(
            f"{outcome.python:<12} {outcome.version:<5} {outcome.wheel or '-':<48} "
            f"{outcome.seconds:6.0f} s  {outcome.verdict}"
        )
    found = [outcome for outcome in outcomes if outcome.verdict != "not found"]
    sys.exit(0 if found and all(outcome.passed for outcome in found) else 1)


if __name__ == "__main__":
    main()
