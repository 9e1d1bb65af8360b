"""One setting of ``tenure serve``: how it reads a flag, a variable or a config-file value.

:class:`Setting` is the row type of the table in
:mod:`tenure.server._config.settings`, and of each face's settings
(:mod:`tenure.server._config.face_settings`, lent through :mod:`tenure.server.plug`);
the checks here (:func:`in_range`, :func:`one_of`) are what the rows use. A value
that cannot be used raises ValueError (the caller names the flag, variable or file
key).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tenure.server._durability.storage import FsyncMode


def in_range(
    low: float | None = None, high: float | None = None, *, above: bool = False
) -> Callable[[float], None]:
    """A check that a number is ``>= low`` (``> low`` if ``above``) and ``<= high``."""

    def check(value: float) -> None:
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError("must be a finite number")
        if low is not None and (value <= low if above else value < low):
            raise ValueError(f"must be {'more than' if above else 'at least'} {low:g}")
        if high is not None and value > high:
            raise ValueError(f"must be at most {high:g}")

    return check


def _no_check(value: object) -> None:
    pass


@dataclass(frozen=True, slots=True)
class Setting:
    """One setting: ``kind`` is str, int, float, Path (optional unless it has a default) or
    FsyncMode; ``check`` raises ValueError for a value out of range. ``file_path``: a str
    setting that names a file or ``-`` (``--audit-log``): in the config file, a relative
    one is relative to the file's directory, as a Path setting's is."""

    name: str
    kind: type
    default: object
    metavar: str
    help: str
    check: Callable[[Any], None] = _no_check
    file_path: bool = False

    @property
    def flag(self) -> str:
        """``--data-dir`` for ``data_dir``."""
        return "--" + self.name.replace("_", "-")

    def from_text(self, text: str) -> object:
        """The value of a flag or environment variable (an empty path means none)."""
        value: object
        if self.kind is bool:
            words = {"true": True, "1": True, "yes": True, "on": True}
            words |= {"false": False, "0": False, "no": False, "off": False}
            if text.lower() not in words:
                raise ValueError("must be true or false (also 1/0, yes/no, on/off)")
            return words[text.lower()]
        if self.kind is int:
            try:
                value = int(text)
            except ValueError:
                raise ValueError("must be an integer") from None
        elif self.kind is float:
            try:
                value = float(text)
            except ValueError:
                raise ValueError("must be a number of seconds") from None
        elif self.kind is FsyncMode:
            try:
                value = FsyncMode(text.lower())
            except ValueError:
                raise ValueError("must be always, batch or off") from None
        elif self.kind is Path:
            if not text:
                if self.default is not None:
                    raise ValueError("must not be empty")
                return None
            value = Path(text)
        else:
            value = text
        self.check(value)
        return value

    def from_toml(self, value: object, base: Path) -> object:
        """The value of a config-file key; relative paths are relative to ``base``.

        Raises:
            ValueError: wrong type or out of range.
        """
        if self.kind is bool:
            if type(value) is not bool:
                raise ValueError(f"must be true or false, not {_toml_type(value)}")
            return value
        if self.kind is int:
            if type(value) is not int:
                raise ValueError(f"must be an integer, not {_toml_type(value)}")
            self.check(value)
            return value
        if self.kind is float:
            if type(value) not in (int, float):
                raise ValueError(f"must be a number of seconds, not {_toml_type(value)}")
            number = float(value)  # type: ignore[arg-type]
            self.check(number)
            return number
        if not isinstance(value, str):
            raise ValueError(f"must be a string, not {_toml_type(value)}")
        relative = value and not Path(value).expanduser().is_absolute()
        if relative and (self.kind is Path or (self.file_path and value != "-")):
            value = str(base / value)
        return self.from_text(value)


def _toml_type(value: object) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}
    for kind, name in names.items():
        if type(value) is kind:
            return name
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    return "a date or time"


def one_of(*choices: str) -> Callable[[str], None]:
    """A check that a text is one of ``choices``."""

    def check(value: str) -> None:
        if value not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}")

    return check
