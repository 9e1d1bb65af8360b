"""Semaphore administration on etcd: create, update, delete, describe, watch.

A persistent semaphore is its record ``rec`` (limit and data, no lease); an
ephemeral one has no record and exists while it has requests. Creating compares
that neither exists; deleting compares the record's create_revision (and, unless
forced, that the queue is empty) and deletes the semaphore's whole range, so
every request and grant goes in the same revision: owners see their grant keys
deleted (``lease_lost``, told by the ``gone/<name>`` marker the forced delete puts
and removes again; see :mod:`tenure.backends.etcd._node`), waiters their requests
(``NotFoundError``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tenure._core.values import SemaphoreDescription, check_count, check_data
from tenure.backends.etcd._keys import (
    compare_create,
    compare_empty,
    compare_mod,
    delete,
    delete_prefix,
    encode,
    put,
)
from tenure.backends.etcd._watch import EtcdWatch
from tenure.backends.etcd._who import identified
from tenure.errors import (
    AlreadyExistsError,
    LimitExceededError,
    NotFoundError,
    PreconditionFailedError,
)

if TYPE_CHECKING:
    from tenure.backends.etcd._session import EtcdSession

__all__ = [
    "create_semaphore",
    "delete_semaphore",
    "describe_semaphore",
    "update_semaphore",
    "watch_semaphore",
]


async def create_semaphore(s: EtcdSession, name: str, limit: int, data: bytes) -> None:
    """See :meth:`tenure.backends._base.BackendSession.create_semaphore`."""
    s.check_alive()
    config = await s.config()
    limit = check_count(limit, what="limit")
    data = check_data("semaphore data", data, config.max_data_size)
    if await s.count_semaphores() >= config.max_semaphores:
        raise LimitExceededError(
            f"max_semaphores ({config.max_semaphores}) reached on node {s.node!r}"
        )
    record = s.layout.record(s.node, name)
    reply = await s.txn(
        # An ephemeral semaphore of that name exists while it has requests.
        [compare_create(record, 0), compare_empty(s.layout.queue(s.node, name))],
        [put(record, encode({"limit": limit, "data": data}))],
        [],
    )
    if not reply.succeeded:
        raise AlreadyExistsError(f"semaphore {name!r} already exists")


async def update_semaphore(s: EtcdSession, name: str, data: bytes) -> None:
    """See :meth:`tenure.backends._base.BackendSession.update_semaphore`."""
    s.check_alive()
    config = await s.config()
    data = check_data("semaphore data", data, config.max_data_size)
    while True:
        state = await s.read(name)
        if not state.exists:
            raise NotFoundError(f"semaphore {name!r} does not exist")
        if not state.record:
            raise PreconditionFailedError(
                f"semaphore {name!r} is ephemeral: etcd:// keeps no data for it"
            )
        record = s.layout.record(s.node, name)
        value = encode({"limit": state.limit, "data": data})
        reply = await s.txn([compare_create(record, state.record)], [put(record, value)], [])
        if reply.succeeded:
            return


async def delete_semaphore(s: EtcdSession, name: str, force: bool) -> None:
    """See :meth:`tenure.backends._base.BackendSession.delete_semaphore`."""
    s.check_alive()
    while True:
        state = await s.read(name)
        if not state.exists:
            raise NotFoundError(f"semaphore {name!r} does not exist")
        owners, waiters = len(state.owners()), len(state.waiters())
        if (owners or waiters) and not force:
            raise PreconditionFailedError(
                f"semaphore {name!r} has {owners} owner(s) and {waiters} waiter(s); use force=True"
            )
        record = s.layout.record(s.node, name)
        compares = [compare_create(record, state.record)]
        if not force:
            compares.append(compare_empty(s.layout.queue(s.node, name)))
        prefix = s.layout.semaphore(s.node, name)
        ops = [delete_prefix(prefix)]
        marker = s.layout.gone_marker(s.node, name)
        if force:  # holders elsewhere learn it from the marker, at the delete's revision
            ops.append(put(marker, b"", s.lease_id))
        reply = await s.txn(compares, ops, [])
        if reply.succeeded:
            s.backend.records.pop((s.node, name), None)
            # Our client's holders hear it before this returns, as on the engine
            # (others from their node's view of the marker).
            for session in list(s.backend.sessions.values()):
                if session.node == s.node:
                    session.grants_gone(name)
            if force:  # the marker has been seen by every watch of it: it may go
                await s.txn([compare_mod(marker, int(reply.header.revision))], [delete(marker)], [])
            return


async def describe_semaphore(
    s: EtcdSession, name: str, *, owners: bool, waiters: bool
) -> SemaphoreDescription:
    """See :meth:`tenure.backends._base.BackendSession.describe_semaphore`."""
    s.check_alive()
    state = await s.read(name)
    if not state.exists:
        raise NotFoundError(f"semaphore {name!r} does not exist")
    return await identified(
        s.conn, s.layout, s.node, state.describe(owners=owners, waiters=waiters)
    )


async def watch_semaphore(
    s: EtcdSession, name: str, *, data: bool, owners: bool, waiters: bool
) -> EtcdWatch:
    """See :meth:`tenure.backends._base.BackendSession.watch_semaphore`."""
    s.check_alive()
    config = await s.config()
    if s.watches >= config.max_watches_per_session:
        raise LimitExceededError(
            f"max_watches_per_session ({config.max_watches_per_session}) reached"
        )
    watch = EtcdWatch(s, name, data=data, owners=owners, waiters=waiters)
    await watch.start()
    return watch
