"""Semaphore administration on etcd: create, update, delete, describe, watch (a semaphore,
a prefix); claims are :class:`~tenure.backends.etcd._claims.Claims`'s.

A persistent semaphore is its record ``rec`` (limit and data, no lease, and the id
of the put that wrote it, ``w``: :mod:`._landed`); an ephemeral one has no record
and exists while it has requests. Creating compares
that neither exists; deleting compares the record's create_revision (and, unless
forced, that the queue is empty) and deletes the semaphore's range (all but the
placeholders of lock_all requests being made, :mod:`._set`), so every request and
grant goes in the same revision: owners see their grant keys
deleted (``lease_lost``, told by the ``gone/<name>`` marker the forced delete puts
and removes again; see :mod:`tenure.backends.etcd._node`), waiters their requests
(``NotFoundError``).
"""

from __future__ import annotations

from tenure._core.claims import ClaimRecord
from tenure._core.values import SemaphoreDescription, check_count, check_data
from tenure._etcd.client import EtcdClient
from tenure._etcd.requests import (
    compare_create,
    compare_empty,
    compare_mod,
    delete,
    delete_range,
    prefix_end,
    put,
)
from tenure._etcd.streams import WatchHub
from tenure.backends._capability import Capability
from tenure.backends._prefix import PrefixStream
from tenure.backends.etcd._claims import Claims
from tenure.backends.etcd._hints import Hints
from tenure.backends.etcd._keys import encode
from tenure.backends.etcd._landed import landed, put_id
from tenure.backends.etcd._node import NodeView
from tenure.backends.etcd._prefix_watch import EtcdPrefixWatch, PrefixWatchHome
from tenure.backends.etcd._session_keys import SessionKeys
from tenure.backends.etcd._txns import TxnSender
from tenure.backends.etcd._types import Armed
from tenure.backends.etcd._watch import EtcdWatch
from tenure.backends.etcd._who import identified
from tenure.errors import (
    AlreadyExistsError,
    LimitExceededError,
    NotFoundError,
    PreconditionFailedError,
)

__all__ = ["Admin"]


#: Why etcd:// hands no hold off (docs/backends.md, etcd's capabilities).
_NO_HANDOFF = (
    "a semaphore's queue is its request keys in create_revision order, each key named "
    "by its session; a hold moved to another session's key would queue behind the "
    "waiters, and admission would grant them its tokens"
)


class Admin:
    """One session's administration of semaphores (module docstring): its
    :class:`~tenure.backends._store.Administering` and
    :class:`~tenure.backends._store.Watching`.

    Given the session's keys and Txns, the client's channel to etcd, its one watch
    stream, its hints (a deleted semaphore's forgotten) and its view of the node (which
    tells this client's holders of a forced delete); ``armed`` is the session's set of
    armed watches, ``claims`` its claims. Once bound, the session (a prefix watch's
    arming ends with it).
    """

    def __init__(
        self,
        keys: SessionKeys,
        sender: TxnSender,
        conn: EtcdClient,
        hub: WatchHub,
        hints: Hints,
        view: NodeView,
        armed: set[Armed],
        claims: Claims,
    ) -> None:
        self._keys = keys
        self._layout, self._node = keys.layout, keys.node
        self._sender, self._conn, self._hub, self._hints = sender, conn, hub, hints
        self._view, self._armed, self._claims = view, armed, claims
        self._session: PrefixWatchHome

    def bind(self, session: PrefixWatchHome) -> None:
        """The session administered (made after its parts: :meth:`EtcdStore.bind`)."""
        self._session = session

    def unsupported_reason(self, capability: Capability) -> str | None:
        """Why etcd:// sessions lack ``capability``, where this store can say (the ability
        look-up adds it to its refusal)."""
        return _NO_HANDOFF if capability is Capability.HANDOFF else None

    async def create_semaphore(self, name: str, limit: int, data: bytes) -> None:
        """See :class:`tenure.backends._writes.CreateWrite`."""
        config = await self._sender.config()
        limit = check_count(limit, what="limit")
        data = check_data("semaphore data", data, config.max_data_size)
        if await self._sender.count_semaphores() >= config.max_semaphores:
            raise LimitExceededError(
                f"max_semaphores ({config.max_semaphores}) reached on node {self._node!r}"
            )
        record = self._layout.record(self._node, name)
        made = put_id()
        reply = await self._sender.txn(
            # An ephemeral semaphore of that name exists while it has requests.
            [
                compare_create(record, 0),
                compare_empty(self._layout.queue(self._node, name)),
            ],
            [put(record, encode({"limit": limit, "data": data, "w": made}))],
            [],
        )
        if reply.succeeded:
            return
        # Made by this call if the record's first version is its put (:mod:`._landed`).
        state = await self._sender.read(name)
        if not state.record or not await landed(self._conn, record, made, state.record - 1):
            raise AlreadyExistsError(f"semaphore {name!r} already exists")

    async def update_semaphore(self, name: str, data: bytes) -> None:
        """See :class:`tenure.backends._writes.UpdateWrite`."""
        await self._put_data(name, data, None)

    async def swap_semaphore_data(self, name: str, expected: bytes, data: bytes) -> bool:
        """See :class:`tenure.backends._writes.SwapWrite`: one Txn
        that puts the record only if its mod_revision is the one whose data was read."""
        return await self._put_data(name, data, expected)

    async def _put_data(self, name: str, data: bytes, expected: bytes | None) -> bool:
        """Put ``data`` in the semaphore's record, if its data is ``expected`` now (None:
        whatever it is); whether it did.

        The Txn compares the record's mod_revision with the one read: the data
        compared (a swap) is the data replaced, and the put is the first change after
        that read. When the compare failed, the record's history says whether the put
        was applied anyway (its Txn sent again after a lost answer: :mod:`._landed`);
        if not, the record changed since it was read: it is read again (and a swap's
        data compared as it is now).
        """
        config = await self._sender.config()
        data = check_data("semaphore data", data, config.max_data_size)
        made = put_id()
        while True:
            state = await self._sender.read(name)
            if not state.exists:
                raise NotFoundError(f"semaphore {name!r} does not exist")
            if not state.record:
                raise PreconditionFailedError(
                    f"semaphore {name!r} is ephemeral: etcd:// keeps no data for it"
                )
            if expected is not None and state.data != expected:
                return False
            record = self._layout.record(self._node, name)
            value = encode({"limit": state.limit, "data": data, "w": made})
            reply = await self._sender.txn(
                [compare_mod(record, state.record_mod)], [put(record, value)], []
            )
            if reply.succeeded or await landed(self._conn, record, made, state.record_mod):
                return True

    async def claim(
        self, name: str, claim_id: str, at_least: float, at_most: float, data: bytes
    ) -> ClaimRecord:
        """See :meth:`Claims.claim` (two leases, one Txn)."""
        return await self._claims.claim(name, claim_id, at_least, at_most, data)

    async def delete_semaphore(self, name: str, force: bool) -> None:
        """See :class:`tenure.backends._writes.DeleteWrite`."""
        while True:
            state = await self._sender.read(name)
            if not state.exists:
                raise NotFoundError(f"semaphore {name!r} does not exist")
            owners, waiters = len(state.owners()), len(state.waiters())
            if (owners or waiters) and not force:
                raise PreconditionFailedError(
                    f"semaphore {name!r} has {owners} owner(s) and {waiters} waiter(s); "
                    "use force=True"
                )
            record = self._layout.record(self._node, name)
            compares = [compare_create(record, state.record)]
            if not force:
                compares.append(compare_empty(self._layout.queue(self._node, name)))
            prefix = self._keys.prefix(name)
            # Every key but the placeholders (``p/``, :mod:`._set`): a placeholder goes
            # only with its session or by its own lock_all, which counts on it.
            ops = [
                delete_range(prefix, prefix + b"p/"),
                delete_range(prefix + b"q/", prefix_end(prefix)),
                delete(self._layout.claim(self._node, name)),  # (a claim's semaphore: it ends)
            ]
            marker = self._layout.gone_marker(self._node, name)
            if force:  # holders elsewhere learn it from the marker, at the delete's revision
                ops.append(put(marker, b"", self._keys.lease_id))
            reply = await self._sender.txn(compares, ops, [])
            if reply.succeeded:
                self._hints.forget(self._node, name)
                # Our client's holders hear it before this returns, as on the engine
                # (others from their node's view of the marker).
                self._view.tell_deleted(name)
                if force:  # the marker has been seen by every watch of it: it may go
                    await self._sender.txn(
                        [compare_mod(marker, int(reply.header.revision))], [delete(marker)], []
                    )
                return

    async def describe_semaphore(
        self, name: str, *, owners: bool, waiters: bool
    ) -> SemaphoreDescription:
        """See :meth:`tenure.backends._base.CoreSession.describe_semaphore`."""
        state = await self._sender.read(name)
        if not state.exists:
            raise NotFoundError(f"semaphore {name!r} does not exist")
        return await identified(
            self._conn,
            self._layout,
            self._node,
            state.describe(owners=owners, waiters=waiters),
        )

    async def watch_semaphore(
        self, name: str, *, data: bool, owners: bool, waiters: bool
    ) -> EtcdWatch:
        """See :meth:`tenure.backends._base.CoreSession.watch_semaphore`."""
        await self._check_watch_room()
        watch = EtcdWatch(
            self._keys,
            self._sender,
            self._conn,
            self._hub,
            self._armed,
            name,
            data=data,
            owners=owners,
            waiters=waiters,
        )
        await watch.start()
        return watch

    async def watch_prefix(
        self, prefix: str, *, data: bool, owners: bool, waiters: bool
    ) -> PrefixStream:
        """See :meth:`tenure.backends._base.PrefixWatch.watch_prefix` (:mod:`._prefix_watch`):
        etcd tells every change under it, whatever aspects are watched."""
        await self._check_watch_room()
        watch = EtcdPrefixWatch(self._session, self._keys, self._hub, self._armed, prefix)
        await watch.arm()
        return watch.stream()

    async def _check_watch_room(self) -> None:
        """LimitExceededError at max_watches_per_session (single and prefix watches)."""
        config = await self._sender.config()
        if len(self._armed) >= config.max_watches_per_session:
            raise LimitExceededError(
                f"max_watches_per_session ({config.max_watches_per_session}) reached"
            )
