"""A new cluster made from a backup: ``tenure restore FILE --cluster etcd://.../NAME``.

The restored state (:func:`tenure.server._durability.restore.restored_engine`: its
sessions ended, its fencing counter at the restore's wall clock) becomes the cluster's
first snapshot, at log index 0 and term 0, exactly as a leader's snapshot is kept
(its chunks, then its pointer: :mod:`tenure.server._cluster.store`). The first
member started with that URL loads it as any member loads a cluster's state, appends
from index 1, and makes the cluster's instance id (so clients of the old server
are told their sessions are gone). A name already in use (any key under it) is
refused: a restore never writes over a cluster's log.
"""

from __future__ import annotations

import msgpack
from aetcd.rpc import rpc_pb2

from tenure._core import Engine
from tenure._core.snapshot import dump
from tenure._etcd.client import EtcdClient
from tenure._etcd.requests import compare_create, prefix_end, put
from tenure.server._cluster.keys import ClusterKeys, encode
from tenure.server._cluster.store import ClusterStore
from tenure.server._config.cluster_settings import DEFAULT_MAX_ENTRY
from tenure.server._config.cluster_url import parse_cluster_url

__all__ = ["ClusterInUseError", "restore_cluster"]


class ClusterInUseError(Exception):
    """The cluster name holds a state already (a restore makes a new cluster only)."""


async def restore_cluster(url: str, engine: Engine, *, max_entry: int = DEFAULT_MAX_ENTRY) -> str:
    """Make ``engine`` (restored) the state of the new cluster ``url``; its name.

    Raises:
        ValueError: ``url`` is not a cluster URL (or the etcd extra is missing).
        ClusterInUseError: the name holds keys already.
        TenureError: etcd cannot be reached (the etcd client's errors).
    """
    parsed = parse_cluster_url(url)
    keys = ClusterKeys.of(parsed.prefix, parsed.name)
    data: bytes = msgpack.packb(dump(engine), use_bin_type=True)
    conn = EtcdClient(parsed.connection)
    try:
        await conn.authenticate()  # (with a user and password in the URL; else nothing)
        request = rpc_pb2.RangeRequest(
            key=keys.root, range_end=prefix_end(keys.root), count_only=True
        )
        found = await conn.range(request)
        if int(found.count):
            raise ClusterInUseError(
                f"cluster {parsed.name!r} holds {int(found.count)} keys in etcd already: "
                "restore into a new name"
            )
        pointer = await ClusterStore(conn, keys).write_chunks(0, 0, data, max_entry)
        # (one Txn: in use only if no member has started a log or a snapshot meanwhile)
        guard = [compare_create(keys.snapshot, 0), compare_create(keys.entry(1), 0)]
        reply = await conn.txn(guard, [put(keys.snapshot, encode(pointer))])
        # (a Txn the connection tried again after its first try was applied fails its
        # compare: the pointer then is ours)
        stored, _ = await ClusterStore(conn, keys).pointer()
        if not reply.succeeded and stored != pointer:
            raise ClusterInUseError(f"cluster {parsed.name!r} was started during the restore")
    finally:
        await conn.close()
    return parsed.name
