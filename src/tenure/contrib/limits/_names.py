"""What a storage URL says, which semaphore keeps each of limits' keys, and the
arguments of a call, checked before anything is sent.

``tenure://host:port[,host:port...]?node=limits&token=...`` (``tenures://`` for TLS,
``async+`` before either for the async storage): ``node`` is the storage's node,
every other option is the tenure URL's own (``docs/backends.md``), handed on as is.

A key of limits (``LIMITER/127.0.0.1/10/1/minute``) is kept in the semaphore named
the storage's ``key_prefix`` followed by the key, when that is a name tenure takes
(no control character, at most ``MAX_NAME_BYTES`` UTF-8 bytes) and the key does not
start with ``#``; any other key in ``PREFIX#`` and the SHA-256 of the key, in hex.
No key written as it is starts with ``#``, so two keys never share a semaphore.

An error that quotes the URL shows it as tenure's backends do, its secrets (``token=``,
a password) as ``***`` (:func:`tenure.backends.shown_url`).
"""

from __future__ import annotations

import hashlib
import math
import unicodedata
from typing import Final
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from tenure.backends import shown_url
from tenure.errors import InvalidArgumentError

#: The node the storage uses when the URL names none (created if missing).
DEFAULT_NODE: Final = "limits"
#: What every semaphore name of the storage starts with, by default.
DEFAULT_PREFIX: Final = "limits/"
#: The longest a call of the storage waits for the server, by default, in seconds.
DEFAULT_TIMEOUT: Final = 5.0
#: The longest semaphore name tenure takes, in UTF-8 bytes.
MAX_NAME_BYTES: Final = 1024
#: The URL schemes of the storages (``async+`` before them: the async storage).
SCHEMES: Final = ("tenure", "tenures")


def tenure_url(uri: str) -> tuple[str, str | None]:
    """The tenure URL in the storage's ``uri`` (without ``async+`` and ``node``), and
    the node it names (None: none)."""
    if not isinstance(uri, str):
        raise InvalidArgumentError(f"the storage URL must be a string, got {shown_url(uri)}")
    try:
        parts = urlsplit(uri.removeprefix("async+"))
    except ValueError as error:  # e.g. tenure://[bad: "Invalid IPv6 URL"
        raise InvalidArgumentError(f"malformed storage URL {shown_url(uri)}: {error}") from None
    if parts.scheme not in SCHEMES:
        raise InvalidArgumentError(
            "a tenure storage URL is tenure://host:port or tenures://host:port, "
            f"got {shown_url(uri)}"
        )
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    nodes = [value for key, value in pairs if key == "node"]
    if len(nodes) > 1:
        raise InvalidArgumentError(f"the storage URL names node twice: {shown_url(uri)}")
    rest = urlencode([(key, value) for key, value in pairs if key != "node"])
    return urlunsplit(parts._replace(query=rest)), nodes[0] if nodes else None


def check_node(node: object) -> str:
    """A node name tenure takes."""
    if not isinstance(node, str) or not _nameable(node):
        raise InvalidArgumentError(
            f"node must be a non-empty name without control characters, got {node!r}"
        )
    return node


def check_prefix(prefix: object) -> str:
    """A key prefix: printable, short enough to leave room for a key's hash."""
    if not isinstance(prefix, str) or (prefix and not _nameable(prefix + "#" + "0" * 64)):
        raise InvalidArgumentError(
            f"key_prefix must be a string without control characters, of at most "
            f"{MAX_NAME_BYTES - 65} UTF-8 bytes, got {prefix!r}"
        )
    return prefix


def _nameable(name: str) -> bool:
    if not name:
        return False
    if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        return False
    return not any(unicodedata.category(ch) in ("Cc", "Cs") for ch in name)


def name_of(prefix: str, key: str) -> str:
    """The semaphore that keeps ``key`` (see the module docstring)."""
    if key and not key.startswith("#") and _nameable(prefix + key):
        return prefix + key
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{prefix}#{digest}"


def check_seconds(what: str, value: object, *, optional: bool = False) -> float | None:
    """A positive, finite number of seconds (None too, if ``optional``)."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgumentError(f"{what} must be a number of seconds, got {value!r}")
    if not (math.isfinite(value) and value > 0):
        raise InvalidArgumentError(f"{what} must be positive and finite, got {value!r}")
    return float(value)


def check_call(key: object, *, expiry: object = 1, limit: object = 0, amount: object = 0) -> str:
    """A call's key (a string), ``expiry`` (seconds), ``limit`` and ``amount`` (counts)."""
    if not isinstance(key, str):
        raise InvalidArgumentError(f"key must be a string, got {key!r}")
    check_seconds("expiry", expiry)
    for what, count in (("limit", limit), ("amount", amount)):
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise InvalidArgumentError(f"{what} must be a whole number, 0 or more, got {count!r}")
    return key
