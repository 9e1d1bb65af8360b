"""Run by a matrix venv's interpreter (``python -I``): import every module of the
installed ``tenure``, each in turn, and print what happened as one JSON document.

``{"build": ..., "file": ..., "modules": {name: null | [error type, missing module,
message]}}``: null where the import worked; else the exception's type, the module a
``ModuleNotFoundError`` names, and its message. The judging is the test's
(:mod:`tests.install.needs`); this program only reports, with the standard library
alone, whatever is installed beside it.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import pathlib
import sys


def every_module() -> list[str]:
    """Every module of the installed package, by dotted name, sorted (a package is its
    ``__init__``; a compiled module counts once, by its ``.py``)."""
    spec = importlib.util.find_spec("tenure")
    assert spec is not None, "tenure is not installed"
    assert spec.origin is not None, spec
    package = pathlib.Path(spec.origin).parent
    names = set()
    for path in package.rglob("*.py"):
        parts = path.relative_to(package.parent).with_suffix("").parts
        names.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return sorted(names)


def main() -> None:
    """Import each module; print the outcome of each."""
    outcome: dict[str, list[str] | None] = {}
    for name in every_module():
        try:
            importlib.import_module(name)
        except Exception as error:  # what a user's import would see
            missing = error.name if isinstance(error, ModuleNotFoundError) else None
            outcome[name] = [type(error).__name__, missing or "", str(error)]
        else:
            outcome[name] = None
    from tenure._build import build

    tenure = sys.modules["tenure"]
    print(json.dumps({"build": build(), "file": tenure.__file__, "modules": outcome}))


if __name__ == "__main__":
    main()
