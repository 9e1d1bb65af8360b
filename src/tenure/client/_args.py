"""Checks of user arguments that the client converts before the backend sees them."""

from __future__ import annotations

from typing import TypeAlias

from tenure.errors import InvalidArgumentError

#: What data parameters accept: any bytes-like object (stored as immutable bytes).
Data: TypeAlias = bytes | bytearray | memoryview


def as_data(data: object, what: str = "data") -> bytes:
    """Opaque user data as immutable bytes; anything but a bytes-like object is refused.

    (Not ``bytes(data)``: that turns an int into that many zero bytes and a str into
    a TypeError, instead of the InvalidArgumentError every other bad argument gets.)
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise InvalidArgumentError(f"{what} must be bytes, got {type(data).__name__}")
    return bytes(data)
