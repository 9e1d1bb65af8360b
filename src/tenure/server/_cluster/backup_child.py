"""A cluster's backup, taken by a process of its own from etcd (``tenure backup`` of a cluster).

A single server forks a child that walks its copy-on-write engine; a cluster's leader
cannot fork (gRPC's threads: :mod:`tenure.server._cluster.journal`), and walking its
engine on its event loop paused every client for about 175 ms per 100,000 holds. So
the leader starts this module as a new process (``python -m``: a fork that execs at
once, which gRPC's threads allow) and relays what it writes. The process reads the
cluster's state as a standby does when it starts (:meth:`Follower.load`: the newest
snapshot and every log entry after it, at one etcd revision), and writes a backup's
preamble and snapshot to its standard output: the leader's loop pays for none of it.

The state is the cluster's as etcd had it at that revision: every grant acknowledged
before the backup was asked for is in it (the leader answers only once its entry is
in etcd), and the highest token in the header is that state's.

What it is told comes on standard input, one JSON map: ``cluster`` (the ``--cluster``
URL, whose etcd credentials stay off the command line), ``version`` (the server's),
``max_nodes``. Exit code 0: the whole backup was written, and its last line on
standard error is a JSON map with its ``last_token``; 1: it failed, the reason on
standard error (the leader logs it; the client gets no digest, so no file).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any, BinaryIO

import msgpack

from tenure._core.snapshot import dump
from tenure._etcd.client import EtcdClient
from tenure._etcd.streams import WatchHub
from tenure.server._cluster.follower import Follower
from tenure.server._cluster.keys import ClusterKeys
from tenure.server._cluster.store import ClusterStore
from tenure.server._config.cluster_url import parse_cluster_url
from tenure.server._durability.backup import BackupHeader, preamble
from tenure.server._durability.journal import collector_paused

__all__ = ["main", "write_backup"]


async def write_backup(asked: dict[str, Any], out: BinaryIO) -> int:
    """Read the cluster ``asked`` names from etcd and write its backup to ``out``
    (module docstring); the highest token in it."""
    url = parse_cluster_url(str(asked["cluster"]))
    conn = EtcdClient(url.connection)
    try:
        await conn.authenticate()  # (with a user and password in the URL; else nothing)
        store = ClusterStore(conn, ClusterKeys.of(url.prefix, url.name))
        follower = Follower(store, WatchHub(conn), max_nodes=int(asked.get("max_nodes", 10_000)))
        await follower.load()
        engine = follower.engine
        header = BackupHeader(
            created_at=time.time(),
            instance_id=(await store.instance_id()).hex(),
            version=str(asked.get("version", "")),
            role="leader",
            last_token=engine.last_token,
        )
        with collector_paused():
            data: bytes = msgpack.packb(dump(engine), use_bin_type=True)
    finally:
        await conn.close()
    out.write(preamble(header))
    out.write(data)
    out.flush()
    return header.last_token


def main() -> int:
    """The process's entry (module docstring): its exit code."""
    try:
        asked = json.loads(sys.stdin.read())
        last_token = asyncio.run(write_backup(asked, sys.stdout.buffer))
    except Exception as error:  # (the leader logs it; nothing half-made is trusted)
        print(f"the cluster's backup failed: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    print(json.dumps({"last_token": last_token}), file=sys.stderr)  # (the leader logs it)
    return 0


if __name__ == "__main__":
    sys.exit(main())
