"""A cluster member stopped at the moment it wins an election ends cleanly.

Issue 57: while tests killed leaders and then stopped the cluster, a member exited
with ``AssertionError`` (``assert lease is not None`` in ``_leader_term``): a standby
that had just been elected (its leader killed) was told to stop while its standby's
server stepped down, resigned its lease, and still went on to lead without one.
Which of the two comes first is the scheduler's choice, so the test makes the stop
come exactly there: a member in this process, over the run's etcd, whose wait for the
election is followed by the stop signal's own call (``member.stop``, what SIGTERM runs)
as soon as it is won.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import uuid

import pytest

from tenure._etcd.client import EtcdClient
from tenure.server._cluster import advertised
from tenure.server._cluster.keys import ClusterKeys
from tenure.server._cluster.lease import MemberLease
from tenure.server._cluster.member import ClusterMember
from tenure.server._cluster.store import ClusterStore
from tenure.server._config.cluster_url import parse_cluster_url
from tenure.server._config.serve_config import ServeConfig, add_arguments, resolve
from tenure.server._faces import settings
from tenure.server._reception import listening_sockets
from tests.etcd.cluster import EtcdCluster
from tests.ports import free_port

#: How long the member may take to join, win and stop (etcd on loopback: well under).
WAIT = 60.0


def _config(*flags: str) -> ServeConfig:
    parser = argparse.ArgumentParser()
    add_arguments(parser, settings())
    return resolve(parser.parse_args(list(flags)), {}, settings())


async def test_a_member_stopped_as_it_is_elected_resigns_and_exits_0(
    etcd_member: EtcdCluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tenure.cluster")
    name = f"stop{uuid.uuid4().hex[:10]}"
    config = _config(
        "--port",
        str(free_port()),
        "--cluster",
        f"etcd://{','.join(etcd_member.endpoints)}/{name}",
        "--cluster-lease-ttl",
        "2",
        "--fsync",
        "off",
    )
    sockets = listening_sockets(config)
    member = ClusterMember(config, parse_cluster_url(config.cluster), None)
    elections: list[bool] = []
    until_elected = member._until_elected

    async def stopped_once_elected(lease: MemberLease, term: int) -> bool:
        won = await until_elected(lease, term)
        elections.append(won)
        if won:
            member.stop()  # the SIGTERM handler's call, at the worst moment
        return won

    member._until_elected = stopped_once_elected  # type: ignore[method-assign]
    try:
        port = int(sockets.native[0].getsockname()[1])
        code = await asyncio.wait_for(member.run(sockets, advertised(config, port)), WAIT)
    finally:
        sockets.close()
    assert elections == [True]  # (the stop did come as the election was won)
    assert code == 0
    assert member.lease is None  # resigned: no candidate of this member is left ahead
    events = [getattr(record, "event", None) for record in caplog.records]
    assert "cluster_joining" in events  # (the log was captured)
    assert "cluster_leading" not in events  # it never led
    url = parse_cluster_url(config.cluster)
    conn = EtcdClient(url.connection)
    try:
        leader, _ = await ClusterStore(conn, ClusterKeys.of(url.prefix, url.name)).leader()
    finally:
        await conn.close()
    assert leader is None  # its candidacy went with its lease: nobody waits on it
