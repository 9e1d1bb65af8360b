"""Which build of tenure this interpreter loads: the compiled one or the pure one.

The compiled build has the request path's hot modules as C extensions (mypyc; the
list is in ``pyproject.toml``, the wheel hook's ``include``): ``pip install`` builds it
wherever a C compiler is, ``scripts/compile`` in a checkout. Elsewhere the same
modules load as Python, about half as fast. ``tenure --version`` and ``tenure serve``'s
``listening`` line say which one runs, so that a slow server can be told from a pure
install at a glance.

Asked of the import system (where each module *would* load from), so asking imports
none of them.

Layer (CONTRIBUTING.md): this module may import tenure.errors.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
from typing import Final, Literal

__all__ = ["SAMPLED", "Build", "build"]

#: One compiled module of each part of the hot path: the engine, the native codec,
#: the client's connection. Each is in the wheel hook's list (a test checks it).
SAMPLED: Final = ("tenure._core.engine", "tenure._protocol.wire", "tenure.backends._link")

Build = Literal["compiled", "pure", "mixed"]


def build() -> Build:
    """``compiled`` (every sampled module is an extension), ``pure`` (none is), or
    ``mixed`` (a broken install: some extensions missing or stale)."""
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    compiled = 0
    for name in SAMPLED:
        spec = importlib.util.find_spec(name)
        origin = spec.origin if spec is not None else None
        compiled += origin is not None and origin.endswith(suffixes)
    if compiled == len(SAMPLED):
        return "compiled"
    return "pure" if compiled == 0 else "mixed"
