"""A cell's part in a service of several cells: which requests it serves (protocol 12).

Each node of a service lives on one cell, as its directory says
(:class:`tenure.server._role.Places`; docs/cluster.md, "Cells"). A cell's leader:

* **creates a node** only once the directory places it here: CreateNode first claims
  the node's place (a put in etcd, only if absent), in a task, the connection's later
  frames served once it is answered (``Conn.answering``, as a standby's stale reads); a
  node placed on another cell is answered ``WRONG_CELL`` naming that cell, and a
  creation the engine then refuses (a quota, a bad setting) gives the place back;
* **answers a request for a node it does not hold** ``WRONG_CELL`` naming the cell the
  directory places it on (:func:`wrong_cell`), where it would have said ``NOT_FOUND``,
  so the client sends it there; a node placed nowhere is ``NOT_FOUND`` as ever;
* **gives a dropped node's place back** (:meth:`CellRequests.dropped`), in the
  background: a place left behind (etcd away) only sends that node's creation here.

Layer (CONTRIBUTING.md): this module may also import tenure._runtime.host.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine

from tenure._core import Command
from tenure._protocol import Request, State
from tenure._runtime.host import Host
from tenure.errors import ErrorCode, NotFoundError, TenureError, code_of
from tenure.server._net.auth import command_node
from tenure.server._net.gate import Conn
from tenure.server._role import Places

__all__ = ["CellRequests", "wrong_cell"]

log = logging.getLogger("tenure.server")

#: Fail ``request`` of ``conn`` with ``code`` and the reason (the face's own Failure).
Fail = Callable[[Conn, Request, ErrorCode, str], None]
#: Serve ``request`` of ``conn`` as the face would, its node's place claimed.
Serve = Callable[[Conn, Request], None]


def wrong_cell(
    places: Places | None, host: Host, command: Command[object], error: Exception
) -> Exception:
    """``error``, or, for a NotFoundError of a node this cell's state lacks and the
    directory places on another cell, the WrongCellError that sends it there."""
    if places is None or type(error) is not NotFoundError:
        return error
    node = command_node(command, {}) or getattr(command, "node", None)  # (ResumeSession's)
    if type(node) is not str or node in host.engine.nodes:
        return error  # (a semaphore or session not found: of a node this cell serves)
    return places.elsewhere(node) or error


class CellRequests:
    """A leader's creations of nodes and the places it gives back (module docstring)."""

    def __init__(self, host: Host, serve: Serve, fail: Fail) -> None:
        """``serve``: the face's own serving of a request, its place claimed; ``fail``:
        the face's Failure (counted there)."""
        self.host = host
        self.serve = serve
        self.fail = fail
        #: The claims and releases under way (kept until each ends).
        self.tasks: set[asyncio.Task[None]] = set()

    def create(self, conn: Conn, request: Request, places: Places, node: str) -> bool:
        """Whether ``request`` (``node``'s CreateNode) is answered here: at once
        ``WRONG_CELL`` if the directory places the node on another cell, or once its
        place is claimed for this cell (``conn``'s later frames after it). False: the
        node is this cell's state's already (the face serves it now: ALREADY_EXISTS),
        as ``create_node(exist_ok=True)`` at every start of a client finds it, with no
        etcd request."""
        if node in self.host.engine.nodes:
            return False
        wrong = places.elsewhere(node)
        if wrong is not None:
            self.fail(conn, request, ErrorCode.WRONG_CELL, str(wrong))
            return True
        conn.answering = self._task(self._create(conn, request, places, node))
        return True

    def dropped(self, places: Places, node: str) -> None:
        """``node`` was dropped here: give its place back, in the background."""
        self._task(self._release(places, node))

    def cancel(self) -> None:
        """Give up the claims under way (the server stops: their clients ask again)."""
        for task in list(self.tasks):
            task.cancel()

    def _task(self, work: Coroutine[object, object, None]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(work)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    async def _create(self, conn: Conn, request: Request, places: Places, node: str) -> None:
        try:
            try:
                wrong, placed = await places.claim(node)
            except TenureError as error:
                why = f"the service's directory did not answer: {error}"
                if not _gone(conn):
                    self.fail(conn, request, code_of(error), why)
                return
            if wrong is not None:
                if not _gone(conn):
                    self.fail(conn, request, ErrorCode.WRONG_CELL, str(wrong))
                return
            if not _gone(conn):
                self.serve(conn, request)
            if placed and node not in self.host.engine.nodes:
                await self._release(places, node)  # (refused, or never asked: not ours)
        finally:
            conn.answering = None

    async def _release(self, places: Places, node: str) -> None:
        try:
            await places.release(node)
        except TenureError as error:
            log.warning("giving back node %r's place in the directory: %s", node, error)


def _gone(conn: Conn) -> bool:
    """Whether ``conn`` can no longer be answered (closing, or its stream closed)."""
    return conn.closing or conn.codec.state is State.CLOSED or conn.transport.is_closing()
