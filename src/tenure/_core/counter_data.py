"""A counter's data, and a latch's: a signed 64-bit integer, written as ``str(int)`` does.

The counter ``name`` (:class:`tenure.Counter`) is a persistent semaphore of limit 1,
held by nobody, whose data is its value in decimal (empty: never written, so 0); a
latch (:class:`tenure.Latch`) keeps its count left exactly so. This module is the
format's one home: the recipes write with :func:`value_data` and read with
:func:`counter_value`, and :mod:`tenure._core.kinds` tells a counter by
:func:`read_value` (a store keeps nothing that tells a counter from a latch).
"""

from __future__ import annotations

from typing import Final

from tenure.errors import PreconditionFailedError

__all__ = ["MAX_VALUE", "MIN_VALUE", "counter_value", "read_decimal", "read_value", "value_data"]

#: A counter's values: signed 64-bit integers, as Redis's INCRBY and most stores keep.
MIN_VALUE: Final = -(2**63)
MAX_VALUE: Final = 2**63 - 1


def value_data(value: int) -> bytes:
    """The data that holds ``value``."""
    return str(value).encode()


def read_decimal(data: bytes, *, signed: bool) -> int | None:
    """The integer ``data`` writes as ``str(int)`` does, else None (``+3``, ``03``,
    `` 3``, ``3_0``, ``-0`` and non-ASCII digits are not how a recipe writes a number)."""
    if not data or len(data) > 20:
        return None
    digits = data[1:] if signed and data.startswith(b"-") else data
    if not digits.isdigit() or (digits.startswith(b"0") and digits != b"0") or data == b"-0":
        return None  # (bytes.isdigit is ASCII-only)
    return int(data)


def read_value(data: bytes) -> int | None:
    """The value non-empty ``data`` holds, or None if it is no counter's value."""
    value = read_decimal(data, signed=True)
    return value if value is not None and MIN_VALUE <= value <= MAX_VALUE else None


def counter_value(name: str, data: bytes) -> int:
    """The value the data of semaphore ``name`` holds (empty: 0); PreconditionFailedError
    for data that is not a value."""
    if data == b"":
        return 0
    value = read_value(data)
    if value is None:
        raise PreconditionFailedError(
            f"semaphore {name!r} holds data that is not a counter's value: {data[:40]!r}"
        )
    return value
