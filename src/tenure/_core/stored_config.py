"""NodeConfig in stored data and on the wire, under the setting names those formats keep.

A persisted or wire format never changes with a rename: a journal, a snapshot or a
store's node record written by an older tenure must read back, and an older peer must
understand what a newer one sends. So a setting renamed in the API
(:data:`~tenure._core.values.RENAMED_SETTINGS`: ``session_timeout`` is now
``recovery_window``) keeps its old name there, and each format translates at its
boundary with these functions: the snapshot, the journal and the wire (AlterNode's
changes), etcd's JSON settings, PostgreSQL's jsonb. (The wire's NodeConfig and
Redis's settings hash are positional or use short keys, so no name is stored.)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Final

from tenure._core.values import RENAMED_SETTINGS, NodeConfig

__all__ = [
    "LEFT_OUT_UNSET",
    "STORED_NAMES",
    "config_from_stored",
    "config_to_stored",
    "current_names",
    "stored_names",
]

#: Today's name of each renamed setting -> the name stored data and the wire keep.
STORED_NAMES: Final = {new: old for old, new in RENAMED_SETTINGS.items()}


def stored_names(changes: Mapping[str, object]) -> dict[str, object]:
    """Settings (or changes of some) with each renamed one under its stored name.

    Both names of one setting at once are left as they are (see current_names).
    """
    return _renamed(changes, STORED_NAMES)


def current_names(stored: Mapping[str, object]) -> dict[str, object]:
    """Stored settings (or changes) with each renamed one under today's name.

    Today's name is taken as well (a peer written from today's docs may send it). Both
    names of one setting at once are left as they are, for NodeConfig to refuse
    (InvalidArgumentError from ``replace``, TypeError from the constructor): which
    one was meant cannot be known.
    """
    return _renamed(stored, RENAMED_SETTINGS)


#: Settings a record leaves out while they are None (their default): newer than the
#: readers that read these records with ``NodeConfig(**stored)``, which refuse a name
#: they do not know, so a node that does not set one stays readable by an older
#: client of the same store (one that sets it is refused there, as it must be).
LEFT_OUT_UNSET: Final = ("max_hold", "long_hold")


def config_to_stored(config: NodeConfig) -> dict[str, object]:
    """Every setting of ``config`` by its stored name (what the stores' records hold),
    but those of :data:`LEFT_OUT_UNSET` that are not set."""
    stored = stored_names(dataclasses.asdict(config))
    for name in LEFT_OUT_UNSET:
        if stored.get(name, 0) is None:
            del stored[name]
    return stored


def config_from_stored(stored: Mapping[str, object]) -> NodeConfig:
    """The NodeConfig a stored record holds (not validated: callers decide).

    Raises:
        TypeError: a name that is no setting (or both names of a renamed one), as
            ``NodeConfig(**stored)`` would.
    """
    return NodeConfig(**current_names(stored))  # type: ignore[arg-type]


def _renamed(items: Mapping[str, object], names: Mapping[str, str]) -> dict[str, object]:
    """``items`` with each key of ``names`` as its value there, in the same order
    (records keep the order they always had); both names of one setting left alone."""
    keep = {name for name, other in names.items() if name in items and other in items}
    return {
        (names[name] if name in names and name not in keep else name): value
        for name, value in items.items()
    }
