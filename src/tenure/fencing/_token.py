"""What every guard checks of its input: the fencing token, the resource's name."""

from __future__ import annotations

from typing import Final

from tenure.errors import InvalidArgumentError, LimitExceededError

__all__ = ["MAX_RESOURCE_BYTES", "MAX_TOKEN", "check_limit", "check_resource", "check_token"]

#: The largest fencing token: tokens are unsigned 64-bit integers on every backend.
MAX_TOKEN: Final = 2**64 - 1
#: Default bound of a resource's name, in UTF-8 bytes (a guard's ``max_resource_bytes``):
#: PostgreSQL's primary-key index refuses entries of more than about 2700 bytes.
MAX_RESOURCE_BYTES: Final = 1024


def check_token(token: object) -> int:
    """``token`` if it is a fencing token (an int in [1, 2**64-1]); else InvalidArgumentError.

    A bool is refused although it is an int: ``True`` is never a lock's token.
    """
    if type(token) is not int or not 1 <= token <= MAX_TOKEN:
        raise InvalidArgumentError(
            f"token must be an integer in [1, 2**64-1] (a grant's fencing token), got {token!r}"
        )
    return token


def check_resource(resource: object, limit: int) -> str:
    """``resource`` if it names a resource: a non-empty str without NUL, of at most ``limit`` bytes.

    Too long is a LimitExceededError naming ``max_resource_bytes``; anything else
    wrong an InvalidArgumentError.
    """
    if not isinstance(resource, str) or not resource:
        raise InvalidArgumentError(f"resource must be a non-empty str, got {resource!r}")
    if "\0" in resource:
        raise InvalidArgumentError(f"resource must not contain NUL characters, got {resource!r}")
    try:
        size = len(resource.encode("utf-8"))
    except UnicodeEncodeError:  # a lone surrogate: no database or file name can hold it
        raise InvalidArgumentError(f"resource must be valid Unicode, got {resource!r}") from None
    if size > limit:
        raise LimitExceededError(
            f"resource is {size} bytes (UTF-8); max_resource_bytes is {limit}: {resource[:40]!r}..."
        )
    return resource


def check_limit(value: object, name: str, low: int, high: int) -> int:
    """A guard's configured limit ``name``: an int in [low, high]; else InvalidArgumentError."""
    if type(value) is not int or not low <= value <= high:
        raise InvalidArgumentError(f"{name} must be an integer in [{low}, {high}], got {value!r}")
    return value
