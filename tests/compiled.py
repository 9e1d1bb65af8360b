"""Which build of tenure this run imports: the compiled one (mypyc) or the pure one.

``scripts/compile`` compiles the modules that ``pyproject.toml`` lists under
``[tool.hatch.build.targets.wheel.hooks.custom]``; an extension beside a ``.py`` is what
Python imports. A test whose expectation differs between the builds (a compiled
class checks its fields' types when made) asks :func:`compiled_build`.
"""

from __future__ import annotations

import importlib.machinery
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def compiled_sources() -> list[Path]:
    """The ``.py`` files the compiled build compiles (the wheel hook's ``include``)."""
    with (ROOT / "pyproject.toml").open("rb") as f:
        project = tomllib.load(f)
    hook = project["tool"]["hatch"]["build"]["targets"]["wheel"]["hooks"]["custom"]
    return [ROOT / path for path in hook["include"]]


def module_name(source: Path) -> str:
    """``src/tenure/_core/engine.py`` -> ``tenure._core.engine`` (a package: its name)."""
    parts = list(source.relative_to(ROOT / "src").with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_extension(file: str | None) -> bool:
    """Whether a module's ``__file__`` is a C extension (what mypyc builds)."""
    return file is not None and file.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))


def compiled_build() -> bool:
    """Whether this run imports the compiled engine (``tenure._core.engine``)."""
    import tenure._core.engine

    return is_extension(tenure._core.engine.__file__)
