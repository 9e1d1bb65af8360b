"""Whether this server leads: what a cluster tells the parts of a server that face clients.

A server that is not part of a cluster is :data:`STANDALONE`: it serves everything,
as it always did. ``tenure serve --cluster`` runs a :class:`~tenure.server.plug.Role`
of its own (:mod:`tenure.server._cluster`): while it is a standby the native face
answers the handshake saying so and where the leader is, and every request but
ClusterStatus ``Failure(NOT_LEADER)``; the faces of other lock services send their
clients on (:class:`~tenure.server.plug.Role` is what they see of it).
"""

from __future__ import annotations

from typing import Final, Protocol

from tenure._protocol.cluster import ClusterView
from tenure._protocol.messages import LEADER, STANDALONE, STANDBY

__all__ = ["LEADER", "STANDALONE", "STANDALONE_ROLE", "STANDBY", "Role"]


class Role(Protocol):
    """This server's part in its cluster, asked at every handshake (and by the faces)."""

    @property
    def name(self) -> str:
        """:data:`STANDALONE`, :data:`LEADER` or :data:`STANDBY` (Welcome.role's words)."""
        ...

    @property
    def leading(self) -> bool:
        """Whether requests are served here (standalone, or the leader)."""
        ...

    def leader(self, face: str = "native") -> str | None:
        """The leader's address for clients of ``face`` (``native``, ``http``, or a face
        of another lock service by its registry name): ``HOST:PORT`` as it advertises
        it; None when no leader is known (or it has no such face)."""
        ...

    def status(self) -> ClusterView | None:
        """The cluster as this server knows it now (None: not part of a cluster)."""
        ...


class _Standalone:
    """The role of a server that is not part of a cluster: it serves everything."""

    name = STANDALONE
    leading = True

    def leader(self, face: str = "native") -> str | None:
        """None: no other server exists."""
        return None

    def status(self) -> ClusterView | None:
        """None: not part of a cluster."""
        return None


#: The role of every server started without ``--cluster``.
STANDALONE_ROLE: Final[Role] = _Standalone()
