"""The wheel's build hook: the hot path compiled with mypyc where a C compiler is.

``pip install tenure`` (or ``.``) builds the wheel through this hook (hatchling's
``custom`` hook, configured under ``[tool.hatch.build.targets.wheel.hooks.custom]`` in
``pyproject.toml``, whose ``include`` lists the modules). It is hatch-mypyc's hook with
one decision in front, by ``TENURE_COMPILE``:

* ``auto`` (the default): compile when a C compiler and Python's headers are found;
  otherwise build the pure wheel, and say why (``pip install -v`` shows it; at run
  time ``tenure --version`` and ``tenure serve``'s first lines say which build runs);
* ``always``: compile, and fail the build when it cannot (a wheel for release);
* ``never``: the pure wheel.

A failed compile with a compiler present fails the build rather than falling back:
that is a bug to see, not a machine without a compiler; its error ends with one line
saying so and naming ``TENURE_COMPILE=never`` (the pure build), which pip shows
under the compiler's output. An editable install (``pip install -e``, what
``scripts/bootstrap`` makes) is never compiled: a checkout is compiled in place by
``scripts/compile``.

pip shows a build's output only with ``-v``, and a compile takes one to two minutes
of silence: the line that says what is compiled, and how to skip it, is also written
to the controlling terminal when there is one and stderr is not it (what pip's
default verbosity lets through: nothing else of the build reaches the person).
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import sysconfig
from pathlib import Path
from typing import Any

# Hatchling loads this file also to ask for its dependencies, before they are
# installed: the ImportError tells it to skip the hook then.
from hatch_mypyc.plugin import MypycBuildHook

#: The variable, and the values it takes (the first is the default).
CHOICE_ENV = "TENURE_COMPILE"
CHOICES = ("auto", "always", "never")


def missing_for_compile() -> str | None:
    """What this interpreter lacks to compile an extension (None: nothing).

    The compiler is the one setuptools would run: ``CC`` from the environment, else
    the one Python was built with.
    """
    compiler = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    program = shlex.split(compiler)[0] if compiler.strip() else "cc"
    if shutil.which(program) is None:
        return f"no C compiler ({program!r} is not on PATH)"
    include = sysconfig.get_paths().get("include")
    if include is None or not (Path(include) / "Python.h").is_file():
        return f"no Python headers (Python.h is not in {include}: the python3-dev package)"
    return None


def choice() -> str:
    """``TENURE_COMPILE``'s value, checked."""
    value = os.environ.get(CHOICE_ENV, CHOICES[0]).strip().lower() or CHOICES[0]
    if value not in CHOICES:
        raise ValueError(f"{CHOICE_ENV}={value!r}: expected one of {', '.join(CHOICES)}")
    return value


class CompileWhereACompilerIs(MypycBuildHook):  # type: ignore[misc]
    """hatch-mypyc's hook, run only when the module docstring's decision says so."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        """Compile the listed modules into the wheel, or leave it pure (and say why)."""
        if self.target_name != "wheel":
            return
        wanted = choice()
        if version == "editable":
            self._say("an editable install is not compiled (scripts/compile builds a checkout)")
            return
        if wanted == "never":
            self._say(f"{CHOICE_ENV}=never: the pure build")
            return
        missing = missing_for_compile()
        if missing is not None:
            if wanted == "always":
                raise RuntimeError(f"{CHOICE_ENV}=always, but {missing}")
            self._say(
                f"building the pure wheel: {missing}. It runs about half as fast as the "
                "compiled one; install a C compiler and the Python headers, then "
                'reinstall (docs/operations.md, "Installing")'
            )
            return
        # (From the raw config: hatch-mypyc builds its include filter only if its
        # config_include was not read before; read first, every module is compiled.)
        count = len(self.config.get("include", []))
        self._say(
            f"compiling {count} modules with mypyc, one to two minutes "
            f"({CHOICE_ENV}=never: the pure build, at once)",
            terminal=True,
        )
        try:
            super().initialize(version, build_data)
        except Exception as error:  # hatch-mypyc's: mypyc's or the compiler's output
            raise RuntimeError(f"{error}\n{compile_failed(wanted)}") from None

    def _say(self, message: str, *, terminal: bool = False) -> None:
        """Tell the person installing (pip shows a build's output with ``-v``); with
        ``terminal``, on the controlling terminal too (module docstring)."""
        print(f"tenure: {message}", file=sys.stderr, flush=True)
        if terminal:
            tell_the_terminal(f"tenure: {message}")


def compile_failed(wanted: str) -> str:
    """The last line of a failed compile's error: what failed and the way out."""
    way_out = (
        f"{CHOICE_ENV}=never installs the pure build (about half as fast)"
        if wanted == "auto"
        else f"{CHOICE_ENV}=always asked for it; {CHOICE_ENV}=never builds the pure one"
    )
    return (
        "tenure: the compiled build failed with a C compiler present (the output above "
        f"says why; a bug to report): {way_out}, e.g. {CHOICE_ENV}=never pip install tenure"
    )


def tell_the_terminal(line: str) -> None:
    """Write ``line`` to the controlling terminal, where stderr is not one (pip keeps a
    build's stderr to itself at its default verbosity); nothing without a terminal."""
    if sys.stderr.isatty():
        return  # already said there
    try:
        with open("/dev/tty", "w", encoding="utf-8") as tty:
            tty.write(f"\n{line}\n")  # (after pip's "Building wheel ..." line)
    except OSError:  # no controlling terminal (CI, a service): stderr had it
        pass


def get_build_hook() -> type[MypycBuildHook]:
    """The hook class (hatchling asks for it by this name)."""
    return CompileWhereACompilerIs
