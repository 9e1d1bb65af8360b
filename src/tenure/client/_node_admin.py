"""What a client does with nodes, no session needed: make, describe, alter and drop
them; and what operators read of them and do (listings, ``kill_session``).

:class:`NodeAdmin` is the base of :class:`~tenure.client.Client`: its backend, its
URL, whether it is still open, and these methods, which are the client's
(``client.create_node(...)``). Every argument is checked (:mod:`tenure.client._args`)
before anything is sent, and a closed client refuses every call with
ClientClosedError (:meth:`NodeAdmin._check_open`), whose message names the URL
with its token hidden (:func:`redacted`).
"""

from __future__ import annotations

from tenure._core.values import (
    NodeConfig,
    NodeDescription,
    SemaphoreSummary,
    SessionSummary,
    renamed_settings,
)
from tenure.backends import Backend, StaleReading, masked_url
from tenure.client import _args, _forks, _listing
from tenure.errors import AlreadyExistsError, ClientClosedError, InvalidArgumentError

__all__ = ["NodeAdmin", "redacted"]


class NodeAdmin:
    """A client's backend, whether it is open, its nodes and the operators' calls
    (module docstring)."""

    def __init__(self, backend: Backend, url: str) -> None:
        self.backend = backend
        self.url = url
        self._closed = False
        #: The process that opened it: in a child made by fork, it is closed.
        self._pid = _forks.pid

    @property
    def closed(self) -> bool:
        """Whether :meth:`aclose` was called (or this is a child made by fork since the
        client opened: there it is closed, see ForkedClientError)."""
        return self._closed or self._pid != _forks.pid

    def _reader(self, max_staleness: object = None) -> Backend:
        """The backend a read goes to: with ``max_staleness`` (seconds, 0 to 3600), one
        whose replicas may answer it that stale (a cluster's standbys: docs/cluster.md,
        "Reads from standbys"), where the backend has any; else the backend itself.

        Raises:
            InvalidArgumentError: ``max_staleness`` is not None nor 0 to 3600 seconds.
        """
        seconds = _args.max_staleness(max_staleness)
        backend = self.backend
        if seconds is None or not isinstance(backend, StaleReading):
            return backend
        return backend.reading(seconds)

    def _check_open(self) -> None:
        """Raise ClientClosedError once the client is closed; ForkedClientError in a
        child made by fork since it opened."""
        if self._pid != _forks.pid:
            raise _forks.forked_error(f"the client of {redacted(self.url)}", self._pid)
        if self._closed:
            raise ClientClosedError(f"the client is closed ({redacted(self.url)})")

    # -- nodes ----------------------------------------------------------------------

    async def create_node(
        self,
        name: str,
        config: NodeConfig | None = None,
        *,
        exist_ok: bool = False,
        **settings: object,
    ) -> None:
        """Create a node, from ``config`` and/or individual settings (see NodeConfig).

        ``session_timeout=`` is the old name of ``recovery_window=``: still taken,
        with a DeprecationWarning.

        Raises:
            AlreadyExistsError: the node exists, unless ``exist_ok`` (then nothing
                changes: an existing node keeps its settings; see alter_node).
        """
        name = _args.node_name(name)
        settings = renamed_settings(settings, stacklevel=2)  # warns at the caller
        config = _args.node_config(config, settings)
        exist_ok = _args.flag("exist_ok", exist_ok)
        self._check_open()
        try:
            await self.backend.create_node(name, config)
        except AlreadyExistsError:
            if not exist_ok:
                raise

    async def describe_node(
        self, name: str, *, max_staleness: float | None = None
    ) -> NodeDescription:
        """A node's settings and how many sessions and semaphores it has (``max_staleness``:
        as much staleness allowed, :meth:`_reader`)."""
        name = _args.node_name(name)
        self._check_open()
        return await self._reader(max_staleness).describe_node(name)

    async def alter_node(self, name: str, **changes: object) -> NodeDescription:
        """Change some of a node's settings; returns the new description.

        ``session_timeout=`` is the old name of ``recovery_window=``: still taken,
        with a DeprecationWarning.
        """
        name = _args.node_name(name)
        changes = _args.node_changes(renamed_settings(changes, stacklevel=2))
        self._check_open()
        return await self.backend.alter_node(name, changes)

    async def drop_node(self, name: str, *, force: bool = False) -> None:
        """Drop a node. With live sessions it fails unless ``force`` (they are then lost)."""
        name = _args.node_name(name)
        force = _args.flag("force", force)
        self._check_open()
        await self.backend.drop_node(name, force)

    # -- listing, for operators --------------------------------------------------------

    async def list_nodes(self, *, max_staleness: float | None = None) -> list[str]:
        """Every node's name, sorted (a token limited to some nodes sees those;
        ``max_staleness``: as much staleness allowed, :meth:`_reader`)."""
        self._check_open()
        return await _listing.all_nodes(self._reader(max_staleness))

    async def list_semaphores(
        self, node: str, prefix: str = "", *, max_staleness: float | None = None
    ) -> list[SemaphoreSummary]:
        """The node's semaphores whose names start with ``prefix``, by name
        (``max_staleness``: as much staleness allowed, :meth:`_reader`).

        Raises:
            NotFoundError: the node does not exist.
        """
        self._check_open()
        return await _listing.all_semaphores(self._reader(max_staleness), node, prefix)

    async def list_sessions(
        self, node: str, *, max_staleness: float | None = None
    ) -> list[SessionSummary]:
        """The node's live sessions, by id: who runs each, since when, what it holds
        (``max_staleness``: as much staleness allowed, :meth:`_reader`).

        Raises:
            NotFoundError: the node does not exist.
        """
        self._check_open()
        return await _listing.all_sessions(self._reader(max_staleness), node)

    async def kill_session(self, node: str, session_id: int) -> None:
        """End a live session of ``node`` as if its recovery window had passed.

        Its holds are released (the node's lock-delay applies, as on an expiry), its
        waits withdrawn, and its client's session is lost with SessionExpiredError
        saying an operator ended it.

        Raises:
            NotFoundError: no such node, or no such live session in it.
            PermissionDeniedError: the client's token is read-only.
        """
        self._check_open()
        if type(session_id) is not int or session_id < 0:
            raise InvalidArgumentError(f"session_id must be a session's id, got {session_id!r}")
        await self.backend.kill_session(node, session_id)


def redacted(url: str) -> str:
    """``url`` with its secrets hidden (reprs end up in logs): the backends' one rule,
    :func:`tenure.backends.masked_url` (``token=``, ``password=``, ``secret=``, a
    password before ``@``)."""
    return masked_url(url)
