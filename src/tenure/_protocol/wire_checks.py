"""Why a value does not fit the wire: the cold path of :mod:`tenure._protocol.wire`. [compiled]

msgspec decides whether a value fits, in C; when it refuses one, the field's
``check`` (in the schema's words, with the field's path) says why, from the value
as plain msgpack (:func:`plain`). These are the pieces that explanation is made of.
"""

from __future__ import annotations

import math
from typing import Final, Protocol

import msgspec

__all__ = [
    "MAX_UINT",
    "MIN_INT",
    "Checked",
    "WireError",
    "check_bin",
    "check_bool",
    "check_float",
    "check_str",
    "check_uint",
    "describe",
    "explain",
    "plain",
]

#: The largest msgpack integer (uint 64); MAX_COUNT is exactly this.
MAX_UINT: Final = 2**64 - 1
#: The smallest msgpack integer (int 64).
MIN_INT: Final = -(2**63)


class WireError(ValueError):
    """A value does not fit its field. ``path`` names the field, outermost first."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.path: list[str] = []

    def within(self, segment: str) -> None:
        """Record that the failing value sits inside ``segment`` (called on the way out)."""
        self.path.insert(0, segment)

    @property
    def where(self) -> str:
        """The path as text: ``Reply.value(DescribeResult).description.owners[0].token``."""
        text = ""
        for segment in self.path:
            joined = not text or segment.startswith(("[", "("))
            text += segment if joined else "." + segment
        return text

    def __str__(self) -> str:
        return f"{self.where}: {self.reason}" if self.path else self.reason


def describe(value: object) -> str:
    """A short description of a value for error messages, in msgpack's terms."""
    names = {type(None): "nil", bytes: "bin", list: "array", dict: "map", tuple: "array"}
    kind = names.get(type(value), type(value).__name__)
    if value is None or isinstance(value, list | dict | tuple):
        return kind
    text = repr(value)
    return f"{kind} {text if len(text) <= 40 else text[:37] + '...'}"


class Checked(Protocol):
    """A wire field, as far as explaining goes: it can check a plain value."""

    def check(self, raw: object) -> None:
        """Raise WireError if ``raw`` does not fit, naming where and why."""


def check_uint(value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise WireError(f"expected an unsigned integer, got {describe(value)}")
    if not 0 <= value <= MAX_UINT:
        raise WireError(f"{value} is outside 0..2**64-1")


def check_float(value: object) -> None:
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise WireError(f"expected a number, got {describe(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise WireError(f"expected a finite number, got {value!r}")


def check_bool(value: object) -> None:
    if not isinstance(value, bool):
        raise WireError(f"expected a bool, got {describe(value)}")


def check_str(value: object) -> None:
    if not isinstance(value, str):
        raise WireError(f"expected a str, got {describe(value)}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise WireError("str is not valid UTF-8 (it holds a lone surrogate)") from None


def check_bin(value: object) -> None:
    if not isinstance(value, bytes):
        raise WireError(f"expected bin (bytes), got {describe(value)}")


def plain(value: object) -> object:
    """A Struct (with what it holds) as plain msgpack values: what a peer would decode."""
    if isinstance(value, msgspec.Struct):
        items = [plain(item) for item in msgspec.structs.astuple(value)]
        tag = value.__struct_config__.tag
        return items if tag is None else [tag, *items]
    if isinstance(value, tuple | list):
        return [plain(item) for item in value]
    if isinstance(value, msgspec.Raw):
        return msgspec.msgpack.decode(value)
    return value


def explain(field: Checked, raw: object, refusal: Exception) -> WireError:
    """Why msgspec refused ``raw`` as ``field`` (``refusal``), with the field's path.

    ``field.check`` says it in the schema's words; should it find nothing wrong, the
    explanation is msgspec's own (its path is in array positions: ``$[2][1]``).
    """
    try:
        field.check(raw)
    except WireError as error:
        return error
    return WireError(str(refusal) or type(refusal).__name__)
