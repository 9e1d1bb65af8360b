"""``dataclass`` for the modules that mypyc compiles (the compiled build, issue 26).

To mypy (and so to mypyc, which compiles what mypy sees) this is
``dataclasses.dataclass`` itself. At run time it is that decorator with one
difference: on a class that mypyc compiled (a native class), ``slots=True`` is
dropped. A native class already keeps its fields in fixed slots of its own, with
no ``__dict__``; ``slots=True`` would make ``dataclasses`` rebuild the class, which a
native class does not allow ("attribute '__dict__' of 'type' objects is not
writable" at import). The pure build passes every option through, so its classes are
exactly what ``dataclasses.dataclass`` made before.

This module itself stays pure Python: mypyc takes an ``if TYPE_CHECKING:`` branch
for always taken.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

__all__ = ["dataclass"]

if TYPE_CHECKING:
    from dataclasses import dataclass as dataclass
else:

    def dataclass(cls: type | None = None, /, **options: Any) -> Any:
        """``dataclasses.dataclass``, minus ``slots=True`` on a mypyc native class."""

        def wrap(cls: type) -> type:
            # mypyc gives each native class this attribute (its fields, for pickling).
            if options.get("slots") and "__mypyc_attrs__" in cls.__dict__:
                return dataclasses.dataclass(cls, **{**options, "slots": False})
            return dataclasses.dataclass(cls, **options)

        wrapper: Callable[[type], type] = wrap
        return wrapper if cls is None else wrapper(cls)
