"""The checks of the public API's arguments: one place, before any backend sees them.

Every public method of the client (and so of the sync client, which calls it)
checks its arguments here first. So the same bad argument raises the same
:class:`~tenure.errors.InvalidArgumentError`, naming the argument as the caller
wrote it (``count``, ``limit``, ``timeout``, ``data``, ``recovery_window``...), on
every backend. Without it, ``memory://`` would hear of it from the engine and
``tenure://`` from the wire codec, each in its own words (and the codec refuses
some values, a negative count, before the server could name them).

The rules are the engine's own (:mod:`tenure._core.values`), called with the
argument's name; the engine checks again, for clients that are not this one.
Limits that depend on a node's settings (``max_data_size``...) are the engine's
alone: they are LimitExceededError, not a bad argument.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TypeAlias

from tenure._core.values import (
    MAX_RECOVERY_WINDOW,
    MAX_SET_NAMES,
    NodeConfig,
    check_count,
    check_description,
    check_duration,
    check_name,
    check_timeout,
)
from tenure.backends import Capability, SessionTicket
from tenure.errors import InvalidArgumentError

#: The most seconds a read may be stale (as a ``tenure://`` URL's ``max_staleness``).
MAX_STALENESS = 3600.0

#: What data parameters accept: any bytes-like object (stored as immutable bytes).
Data: TypeAlias = bytes | bytearray | memoryview

__all__ = [
    "Data",
    "as_data",
    "capabilities",
    "count",
    "description",
    "flag",
    "node_changes",
    "node_config",
    "names",
    "node_name",
    "recovery_window",
    "semaphore_name",
    "ticket",
    "timeout",
]


def as_data(data: object, what: str = "data") -> bytes:
    """Opaque user data as immutable bytes; anything but a bytes-like object is refused.

    (Not ``bytes(data)``: that turns an int into that many zero bytes and a str into
    a TypeError, instead of the InvalidArgumentError every other bad argument gets.)
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise InvalidArgumentError(f"{what} must be bytes, got {type(data).__name__}")
    return bytes(data)


def node_name(name: object) -> str:
    """The name of a node (``name``, or ``node`` of ``session()``): "node name must be..."."""
    return check_name("node", name)


def semaphore_name(name: object) -> str:
    """The ``name`` of a semaphore, mutex or election: "semaphore name must be..."."""
    return check_name("semaphore", name)


def names(value: object) -> list[str]:
    """The names of an all-or-none acquire: an iterable (not one str) of 1 to
    MAX_SET_NAMES distinct names (each checked by the caller)."""
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise InvalidArgumentError(f"names must be a list of names, got {value!r:.80}")
    listed = list(value)
    if not 1 <= len(listed) <= MAX_SET_NAMES:
        raise InvalidArgumentError(f"names must be 1 to {MAX_SET_NAMES} names, got {len(listed)}")
    if len(set(map(str, listed))) != len(listed):
        raise InvalidArgumentError(f"names must be distinct, got {listed!r:.80}")
    return listed


def count(value: object, what: str = "count") -> int:
    """A token count in [1, 2**64-1]; ``what="limit"`` for a semaphore's limit."""
    return check_count(value, what=what)


def timeout(value: object) -> float | None:
    """An acquire's ``timeout``: None waits forever, 0 only tries, else finite seconds."""
    return check_timeout(value)


def max_staleness(value: object) -> float | None:
    """A read's ``max_staleness``: None (the client's own), or 0 to 3600 seconds."""
    if value is None:
        return None
    return check_duration("max_staleness", value, allow_zero=True, maximum=MAX_STALENESS)


def recovery_window(value: object) -> float | None:
    """A session's ``recovery_window``: None (the node's default) or seconds, at most a day."""
    if value is None:
        return None
    return check_duration("recovery_window", value, maximum=MAX_RECOVERY_WINDOW)


def description(value: object) -> str:
    """A session's ``description``: a str of at most 1024 UTF-8 bytes."""
    return check_description(value)


def ticket(value: object, node: str) -> SessionTicket | None:
    """A ``resume=`` argument: None, a :class:`SessionTicket` or its ``to_str()``, of ``node``."""
    if value is None:
        return None
    if isinstance(value, str):
        value = SessionTicket.from_str(value)
    if not isinstance(value, SessionTicket):
        raise InvalidArgumentError(
            f"resume must be a SessionTicket or its to_str(), got {type(value).__name__}"
        )
    if value.node != node:
        raise InvalidArgumentError(
            f"the ticket is of a session of node {value.node!r}, not of {node!r}"
        )
    return value


def flag(what: str, value: object) -> bool:
    """A yes/no argument (``force``, ``ephemeral``, ``owners``...): True or False only.

    (Not truthiness: ``force="no"`` is true, and the wire carries only booleans.)
    """
    if not isinstance(value, bool):
        raise InvalidArgumentError(f"{what} must be True or False, got {value!r}")
    return value


def node_config(config: object, settings: Mapping[str, object]) -> NodeConfig:
    """``create_node``'s ``config`` (a NodeConfig or None) with ``settings`` applied, checked."""
    if config is None:
        config = NodeConfig()
    elif not isinstance(config, NodeConfig):
        raise InvalidArgumentError(f"config must be a NodeConfig, got {type(config).__name__}")
    return config.replace(**settings)


def node_changes(changes: Mapping[str, object]) -> dict[str, object]:
    """``alter_node``'s settings, each checked (unknown names too) by NodeConfig's rules."""
    NodeConfig().replace(**changes)
    return dict(changes)


def capabilities(require: object) -> frozenset[Capability]:
    """``connect``'s ``require``: capabilities (tenure.Capability), never their names."""
    if isinstance(require, str | bytes) or not isinstance(require, Iterable):
        raise InvalidArgumentError(f"require must be Capability values, got {require!r}")
    items = list(require)
    bad = [repr(item) for item in items if not isinstance(item, Capability)]
    if bad:
        raise InvalidArgumentError(f"require must be Capability values, got {', '.join(bad)}")
    return frozenset(items)
