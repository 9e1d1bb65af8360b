"""Commands on nodes: create, describe, alter, drop, and a node's annex."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from tenure._core.commands.base import Command
from tenure._core.values import (
    NodeConfig,
    NodeDescription,
)


@dataclass(frozen=True, slots=True)
class CreateNode(Command[None]):
    """Create a node; AlreadyExistsError if it exists."""

    name: str
    config: NodeConfig = field(default_factory=NodeConfig)


@dataclass(frozen=True, slots=True)
class DescribeNode(Command[NodeDescription]):
    """Describe a node; NotFoundError if missing."""

    name: str


@dataclass(frozen=True, slots=True)
class AlterNode(Command[NodeDescription]):
    """Change some settings of a node; returns the new description."""

    name: str
    changes: Mapping[str, object]


@dataclass(frozen=True, slots=True)
class DropNode(Command[None]):
    """Drop a node; PreconditionFailedError if it has sessions, unless ``force``."""

    name: str
    force: bool = False


@dataclass(frozen=True, slots=True)
class SetNodeAnnex(Command[None]):
    """Keep ``value`` with node ``name`` under ``key``; ``value == b""`` removes the key.

    The annex is opaque to the engine: bytes a face (or any native client)
    stores with a node and reads back, kept in snapshots and the journal and
    dropped with the node. Limits: MAX_ANNEX_KEY_BYTES per key, MAX_ANNEX_BYTES per
    value, MAX_ANNEX_KEYS per node (tenure._core.values). NotFoundError if the node
    is missing.
    """

    name: str
    key: str
    value: bytes


@dataclass(frozen=True, slots=True)
class GetNodeAnnex(Command[bytes]):
    """The bytes node ``name`` keeps under ``key`` (``b""``: unset); NotFoundError if missing."""

    name: str
    key: str
