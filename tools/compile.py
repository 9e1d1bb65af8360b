"""Compile tenure's hot path with mypyc, in place, for this checkout's venv.

``scripts/compile`` runs this: each module listed under
``[tool.hatch.build.targets.wheel.hooks.custom] include`` in ``pyproject.toml`` (the
list the compiled wheel is built from, so the two cannot drift) becomes a C
extension beside its source (``engine.cpython-311-x86_64-linux-gnu.so`` next to
``engine.py``), plus one shared library of mypyc's runtime at the top of ``src/``
(``<hash>__mypyc.cpython-*.so``). Python imports an extension module before a
``.py`` of the same name, so once they exist every import of the checkout (an
editable install) loads the compiled build; ``--clean`` removes them and the pure
build is back. Both are git-ignored.

The C sources and objects go to ``build/mypyc/`` (kept: setuptools then rebuilds
only what changed, which is much faster when one module is edited). A build is
skipped when the extensions are newer than every listed source and than
``pyproject.toml`` (``--force`` builds anyway); ``--check`` says whether the compiled
build is present and current, with no build.

A build is two steps, which ``--stage`` and ``--install`` run apart: the extensions
are built in ``build/mypyc/lib/`` (touching nothing that imports), then copied into
``src/``. ``scripts/test`` stages the build while the pure build's unit tier runs on
the other core, and installs it after.

Run: ``python -m tools.compile [--clean | --check | --force | --stage | --install]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
BUILD = ROOT / "build" / "mypyc"
#: The file name ending of an extension module for this interpreter.
EXT_SUFFIX: str = sysconfig.get_config_var("EXT_SUFFIX")


def _hook_config() -> dict[str, list[str]]:
    with (ROOT / "pyproject.toml").open("rb") as f:
        project = tomllib.load(f)
    hook: dict[str, list[str]] = project["tool"]["hatch"]["build"]["targets"]["wheel"]["hooks"][
        "custom"
    ]
    return hook


def sources() -> list[Path]:
    """The modules to compile: the hook's ``include``, explicit paths (no patterns)."""
    return [ROOT / rel for rel in _hook_config()["include"]]


def artifacts() -> list[Path]:
    """The compiled build's files in ``src/``: one extension per source, and the shared one."""
    found = [source.with_suffix(EXT_SUFFIX) for source in sources()]
    found = [path for path in found if path.exists()]
    return found + sorted(SRC.glob(f"*__mypyc{EXT_SUFFIX}"))


def clean() -> None:
    """Remove every compiled extension from ``src/`` (the pure build is what imports)."""
    removed = 0
    for pattern in (f"*{EXT_SUFFIX}", "*.so"):
        for path in SRC.rglob(pattern):
            path.unlink()
            removed += 1
    print(f"removed {removed} compiled files from src/ (the pure build imports)")


def current() -> bool:
    """Whether every listed module has an extension newer than it and than pyproject.toml."""
    shared = sorted(SRC.glob(f"*__mypyc{EXT_SUFFIX}"))
    if not shared:
        return False
    newest_input = max(p.stat().st_mtime for p in [*sources(), ROOT / "pyproject.toml"])
    for source in sources():
        ext = source.with_suffix(EXT_SUFFIX)
        if not ext.exists() or ext.stat().st_mtime < newest_input:
            return False
    return True


#: The setup script run in ``build/mypyc`` (no pyproject.toml there: setuptools would
#: read ours and reject its PEP 639 ``license``, as hatch-mypyc works around too).
SETUP = """
import sys
from setuptools import setup
from mypyc.build import mypycify

setup(
    name="tenure-mypyc",
    ext_modules=mypycify(sys.argv[3:], opt_level="3", target_dir="c"),
    script_args=["build_ext", "--build-lib", sys.argv[1], "--build-temp", sys.argv[2], "-j", "2"],
)
"""


#: Where a build's extensions wait to be installed, laid out as ``src/``.
LIB = BUILD / "lib"


def stage() -> None:
    """Compile the listed modules into :data:`LIB` (``src/`` is not touched)."""
    BUILD.mkdir(parents=True, exist_ok=True)
    (BUILD / "setup.py").write_text(textwrap.dedent(SETUP))
    shutil.rmtree(LIB, ignore_errors=True)
    mypy_args = _hook_config().get("mypy-args", [])
    files = [str(source) for source in sources()]
    # The same mypy flags as the wheel's hook (which cannot read pyproject.toml: it
    # hides it from setuptools), so the dev build and the wheel compile alike.
    cmd = [sys.executable, "setup.py", str(LIB), str(BUILD / "tmp"), *mypy_args, *files]
    subprocess.run(cmd, cwd=BUILD, check=True, env=dict(os.environ, PYTHONPATH=str(SRC)))
    print(f"compiled {len(files)} modules into {LIB.relative_to(ROOT)}")


def install() -> None:
    """Copy the staged extensions beside their sources (the compiled build imports).

    Refused when a listed module has no staged extension, or one older than its
    source or pyproject.toml: a stage of other sources is not this checkout's build.
    """
    newest_input = max(p.stat().st_mtime for p in [*sources(), ROOT / "pyproject.toml"])
    for source in sources():
        staged = LIB / source.with_suffix(EXT_SUFFIX).relative_to(SRC)
        if not staged.exists() or staged.stat().st_mtime < newest_input:
            raise SystemExit(f"no current staged build of {source.relative_to(ROOT)}: stage first")
    clean()
    copied = 0
    for ext in LIB.rglob(f"*{EXT_SUFFIX}"):
        shutil.copy2(ext, SRC / ext.relative_to(LIB))
        copied += 1
    print(f"installed {copied} extensions in src/")


def build() -> None:
    """Compile the listed modules and copy the extensions beside their sources."""
    stage()
    install()


def main() -> None:
    """Build, clean or check, as the flags say."""
    parser = argparse.ArgumentParser(prog="python -m tools.compile", description=__doc__)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--clean", action="store_true", help="remove the compiled build")
    group.add_argument("--check", action="store_true", help="exit 1 unless it is current")
    group.add_argument("--force", action="store_true", help="build even when current")
    group.add_argument("--stage", action="store_true", help="build into build/mypyc/lib only")
    group.add_argument("--install", action="store_true", help="copy a staged build into src/")
    args = parser.parse_args()
    if args.clean:
        clean()
    elif args.stage:
        stage()
    elif args.install:
        install()
    elif args.check:
        ok = current()
        print("the compiled build is current" if ok else "the compiled build is missing or stale")
        raise SystemExit(0 if ok else 1)
    elif args.force or not current():
        build()
    else:
        print("the compiled build is current (--force builds anyway)")


if __name__ == "__main__":
    main()
