"""Whether this server leads: what a cluster tells the parts of a server that face clients.

A server that is not part of a cluster is :data:`STANDALONE`: it serves everything,
as it always did. ``tenure serve --cluster`` runs a :class:`~tenure.server.plug.Role`
of its own (:mod:`tenure.server._cluster`): while it is a standby the native face
answers the handshake saying so and where the leader is, and every request but
ClusterStatus ``Failure(NOT_LEADER)``, but a read that allows some staleness, which
it answers from its own state once its :attr:`Role.freshness` confirms it fresh
enough (:mod:`tenure.server._net.stale_reads`); the faces of other lock services
send their clients on (:class:`~tenure.server.plug.Role` is what they see of it).
"""

from __future__ import annotations

from typing import Final, Protocol

from tenure._protocol.cluster import ClusterView
from tenure._protocol.messages import LEADER, STANDALONE, STANDBY
from tenure.errors import WrongCellError

__all__ = ["LEADER", "STANDALONE", "STANDALONE_ROLE", "STANDBY", "Fresh", "Places", "Role"]


class Fresh(Protocol):
    """How fresh a standby's state is, confirmed on demand
    (:class:`tenure.server._cluster.freshness.Freshness`)."""

    @property
    def applied(self) -> int:
        """The index of the last log entry the state holds."""
        ...

    def holds(self, max_staleness: float, min_index: int = 0) -> bool:
        """Whether :meth:`within` would return at once (confirmed recently enough, and
        ``min_index`` applied)."""
        ...

    async def within(self, max_staleness: float, min_index: int = 0, *, timeout: float) -> int:
        """Until the state holds everything committed ``max_staleness`` seconds ago or
        later, and the entry ``min_index``; the index applied then.

        Raises:
            UnavailableError: not confirmed within ``timeout`` seconds.
        """
        ...


class Places(Protocol):
    """Which cell of the service serves each node (docs/cluster.md, "Cells"): the
    directory as this member knows it
    (:class:`tenure.server._cluster.directory.ServiceDirectory`)."""

    @property
    def cell(self) -> str:
        """This member's cell."""
        ...

    def elsewhere(self, node: str) -> WrongCellError | None:
        """The error that sends ``node``'s requests to the other cell that serves it
        (None: this cell serves it, or no cell does)."""
        ...

    def cell_of(self, node: str) -> str | None:
        """The cell the directory places ``node`` on (None: none yet)."""
        ...

    def leader_of(self, cell: str) -> str | None:
        """The main address of ``cell``'s leader, as its members' records say (None:
        none known)."""
        ...

    async def claim(self, node: str) -> tuple[WrongCellError | None, bool]:
        """Place ``node`` on this cell unless a cell serves it already: the error that
        sends it elsewhere (None: this cell's), and whether this claim placed it.

        Raises:
            UnavailableError: the directory could not be reached.
        """
        ...

    async def release(self, node: str) -> None:
        """Remove ``node``'s place if it is this cell's (dropped, or never created).

        Raises:
            UnavailableError: the directory could not be reached.
        """
        ...


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

    @property
    def freshness(self) -> Fresh | None:
        """A standby's freshness, for the reads it answers (None: it answers none, or
        it is no standby)."""
        ...

    @property
    def places(self) -> Places | None:
        """Which cell serves each node of the service (None: not part of a cluster)."""
        ...


class _Standalone:
    """The role of a server that is not part of a cluster: it serves everything."""

    name = STANDALONE
    leading = True
    freshness = None
    places = None

    def leader(self, face: str = "native") -> str | None:
        """None: no other server exists."""
        return None

    def status(self) -> ClusterView | None:
        """None: not part of a cluster."""
        return None


#: The role of every server started without ``--cluster``.
STANDALONE_ROLE: Final[Role] = _Standalone()
