"""What a client knows of a node between Txns: its settings, and the forced deletes in it.

One :class:`NodeView` per node this client has sessions on, shared by them. It
reads the node's settings once and then follows one watch on the range
``[n/<node>/cfg, n/<node>/gone0)``, which holds exactly two kinds of keys:

* ``cfg``: the settings. A put replaces the cached :class:`NodeConfig`; a delete
  means the node was dropped, and every local session of it finds out why
  (:meth:`NodeMember.node_changed`).
* ``gone/<name>``: put (on the deleter's lease, and deleted again right after) by
  the Txn that deletes a semaphore by force, at the same revision as the delete.
  A grant of ``name`` whose token is smaller was deleted by it: its holder is told
  at once (``lease_lost``), as on the engine.

The cache is a hint, never the truth: every acquire compares the settings' key's
mod_revision in its Txn, and a Txn that fails on it brings the settings back.
That is why one watch replaces a read of the settings per acquire and a watch of
each held semaphore's grants. When the watch may have missed events (a new
stream, compaction), the settings are read again and each local session checks
the grants it holds against etcd (:meth:`NodeMember.node_changed`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any, Protocol

from aetcd.rpc import rpc_pb2

from tenure._core.stored_config import config_from_stored
from tenure._core.values import NodeConfig
from tenure._etcd.client import EtcdClient
from tenure._etcd.requests import prefix_end
from tenure._etcd.streams import WatchHub
from tenure.backends.etcd._keys import Layout, decode
from tenure.errors import InvalidArgumentError, NotFoundError, ProtocolError, TenureError

__all__ = ["NodeMember", "NodeView", "NodeViews", "config_of", "read_config"]

log = logging.getLogger("tenure.etcd")
_DELETE = 1  # mvccpb.Event.DELETE


class NodeMember(Protocol):
    """A session of this client on the node: what the view tells it."""

    def node_changed(self, alive: bool) -> None:
        """Events may have been missed (``alive``: the node is there; check the grants),
        or the node went (not ``alive``: find out why)."""

    def forced_delete(self, name: str, revision: int | None) -> None:
        """``name`` was deleted by force at ``revision``: grants older than it are gone
        (None: deleted by this client, every grant of it is)."""


class NodeView:
    """One node's settings as last seen, kept current by a watch (module docstring).

    ``members`` lists this client's live sessions on the node.
    """

    def __init__(
        self,
        conn: EtcdClient,
        hub: WatchHub,
        layout: Layout,
        node: str,
        kv: Any,
        revision: int,
        members: Callable[[], Iterable[NodeMember]],
    ) -> None:
        self._conn = conn
        self._members = members
        self.node = node
        self.layout: Layout = layout
        #: The settings' key (every acquire compares it).
        self.config_key = layout.config(node)
        self.config = config_of(kv)
        #: The settings key's mod_revision (compared by acquires) and create_revision
        #: (the node's identity: dropped and made again is another node).
        self.config_rev = int(kv.mod_revision)
        self.node_rev = int(kv.create_revision)
        self.users = 0
        #: The node's semaphores as last counted, and the revision of that count.
        self.counted: tuple[int, int] | None = None
        start, end = self.layout.config(node), prefix_end(self.layout.gone(node))
        self._watcher = hub.watch(start, end, revision + 1)
        self._task = asyncio.create_task(self._follow())

    def update(self, kv: Any) -> None:
        """The settings as read by a Txn (a newer revision wins)."""
        if int(kv.create_revision) == self.node_rev and int(kv.mod_revision) > self.config_rev:
            self.config = config_of(kv)
            self.config_rev = int(kv.mod_revision)

    def semaphores_bound(self, revision: int) -> int | None:
        """At most how many semaphores the node has at ``revision``, without a read.

        Each semaphore made since the last count was made by a Txn of its own (no Txn
        makes two), so at most one per revision since: a count per acquire, which
        walks every key etcd still remembers in the node, is needed only near
        ``max_semaphores``.
        """
        if self.counted is None:
            return None
        count, at = self.counted
        return count + max(0, revision - at)

    async def _follow(self) -> None:
        cfg = self.layout.config(self.node)
        gone = self.layout.gone(self.node)
        watcher = self._watcher
        while True:
            await watcher.wait()
            events, reset = watcher.drain()
            for event in events:
                key = bytes(event.kv.key)
                try:
                    if key == cfg:
                        if event.type == _DELETE:
                            self._sessions_check(None)
                        else:
                            self.update(event.kv)
                    elif key.startswith(gone) and event.type != _DELETE:
                        name = self.layout.unescape(key[len(gone) :].decode())
                        self._forced_delete(name, int(event.kv.mod_revision))
                except Exception:  # a foreign value: the Txns' compares still hold
                    log.exception(
                        "etcd node view of %r: event of %r not understood", self.node, key
                    )
            if reset:
                await self._reread()

    async def _reread(self) -> None:
        with contextlib.suppress(TenureError):
            reply = await self._conn.range(rpc_pb2.RangeRequest(key=self.layout.config(self.node)))
            self._watcher.restart(int(reply.header.revision) + 1)
            if reply.kvs:
                self.update(reply.kvs[0])
            self._sessions_check(reply.kvs[0] if reply.kvs else None)

    def _sessions_check(self, config: Any) -> None:
        """Events may be missing (or the node went): each session checks what it holds."""
        alive = config is not None and int(config.create_revision) == self.node_rev
        for member in list(self._members()):
            member.node_changed(alive)

    def _forced_delete(self, name: str, revision: int | None) -> None:
        for member in list(self._members()):
            member.forced_delete(name, revision)

    def tell_deleted(self, name: str) -> None:
        """``name`` was deleted by force by a session of this client: its holders here hear
        it now, before the delete returns (as on the engine; others hear the marker)."""
        self._forced_delete(name, None)

    def close(self) -> None:
        """Stop following the node."""
        self._watcher.cancel()
        self._task.cancel()


class NodeViews:
    """This client's views of the nodes it has sessions on: one per node, made when its
    first session opens, closed when its last ends. ``members`` lists this client's
    live sessions on a node (each view asks it: the sessions it tells)."""

    def __init__(
        self,
        conn: EtcdClient,
        hub: WatchHub,
        layout: Layout,
        members: Callable[[str], Iterable[NodeMember]],
    ) -> None:
        self._conn, self._hub, self._layout, self._members = conn, hub, layout, members
        self._views: dict[str, NodeView] = {}

    async def take(self, node: str) -> NodeView:
        """The node's view, made (settings read, watch started) if it is new here; one
        more session uses it (:meth:`release` it when that session ends)."""
        view = self._views.get(node)
        if view is None:
            kv, revision = await read_config(self._conn, self._layout, node)
            view = self._views.get(node)  # made by another task meanwhile
            if view is None or view.node_rev != int(kv.create_revision):
                if view is not None:
                    view.close()
                view = self._views[node] = NodeView(
                    self._conn,
                    self._hub,
                    self._layout,
                    node,
                    kv,
                    revision,
                    partial(self._members, node),
                )
        view.users += 1
        return view

    def release(self, view: NodeView) -> None:
        """A session of the view's node ended: stop following it when none is left."""
        view.users -= 1
        if view.users <= 0 and self._views.get(view.node) is view:
            del self._views[view.node]
            view.close()

    def close(self) -> None:
        """Stop following every node (the client closes)."""
        for view in list(self._views.values()):
            view.close()
        self._views.clear()


def config_of(kv: Any) -> NodeConfig:
    """The node settings a key holds (ProtocolError if tenure did not write them)."""
    try:
        return config_from_stored(decode(kv.value))  # stored names: see _core.stored_config
    except (TypeError, ValueError, InvalidArgumentError) as error:
        raise ProtocolError(
            f"etcd key {bytes(kv.key)!r} is not tenure's node settings ({error!r})"
        ) from None


async def read_config(conn: EtcdClient, layout: Layout, node: str) -> tuple[Any, int]:
    """The node's settings key and the revision it was read at."""
    reply = await conn.range(rpc_pb2.RangeRequest(key=layout.config(node)))
    if not reply.kvs:
        raise NotFoundError(f"node {node!r} does not exist")
    return reply.kvs[0], int(reply.header.revision)
