"""The etcd client's channel (``tenure/_etcd/client.py``) on the run's etcd member:
a call fails over past an endpoint that does not answer, and gives up after
``connect_timeout`` naming every endpoint."""

from __future__ import annotations

import uuid

import pytest
from aetcd.rpc import rpc_pb2

from tenure._etcd.client import EtcdClient, EtcdClientOptions
from tenure._etcd.requests import get, put
from tenure.errors import UnavailableError
from tests.etcd.cluster import EtcdCluster
from tests.ports import free_port


async def test_a_call_fails_over_to_the_endpoint_that_answers(etcd_member: EtcdCluster) -> None:
    dead = f"127.0.0.1:{free_port()}"  # nothing listens there
    (alive,) = etcd_member.endpoints
    client = EtcdClient(EtcdClientOptions(endpoints=(dead, alive), connect_timeout=10.0))
    try:
        key = f"/etcd-client-test/{uuid.uuid4().hex}".encode()
        reply = await client.txn([], [put(key, b"v"), get(key)])
        assert reply.succeeded
        assert reply.responses[1].response_range.kvs[0].value == b"v"
        assert (client.endpoint, client.generation) == (alive, 1)
        ranged = await client.range(rpc_pb2.RangeRequest(key=key))
        assert ranged.kvs[0].value == b"v"
        assert client.generation == 1  # no failover while the endpoint answers
    finally:
        await client.close()


async def test_no_endpoint_answering_is_unavailable_naming_them() -> None:
    endpoints = (f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}")
    client = EtcdClient(
        EtcdClientOptions(endpoints=endpoints, connect_timeout=0.5, request_timeout=0.2)
    )
    try:
        with pytest.raises(UnavailableError, match="etcd unreachable") as raised:
            await client.range(rpc_pb2.RangeRequest(key=b"/k"))
        assert all(endpoint in str(raised.value) for endpoint in endpoints)
        assert client.generation >= 1
    finally:
        await client.close()
