"""tests/netproxy.py in front of an etcd member: gRPC (HTTP/2) is just TCP to it.

What a backend's partition tests rely on: through the proxy a client works; when
the proxy partitions it, its calls fail with UNAVAILABLE (at once when the network
refuses it, within seconds by gRPC keepalive when packets just vanish); when the
proxy heals, the same channel works again.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import pytest
from aetcd.rpc import rpc_pb2

from tests.etcd.client import KEEPALIVE_OPTIONS, EtcdClient, etcd_client
from tests.etcd.cluster import EtcdCluster
from tests.netproxy import NetProxy

#: Bound of the calls that must fail; far longer than keepalive needs (~6 s at most).
PATIENCE = 20.0


@pytest.fixture
async def proxy(etcd_member: EtcdCluster) -> AsyncIterator[NetProxy]:
    """A proxy in front of the shared member's client port."""
    async with NetProxy("127.0.0.1", etcd_member.members[0].client_port) as proxy:
        yield proxy


async def healed(client: EtcdClient, key: bytes) -> bytes:
    """Read ``key`` once the channel has reconnected (waiting for it, bounded).

    A call made just as the proxy heals may still go out on the old connection,
    which gRPC's keepalive is closing ("Stream removed ... ping timeout"): that one
    UNAVAILABLE is the old connection's end, and the next call takes the new one.
    """
    deadline = asyncio.get_running_loop().time() + PATIENCE
    while True:
        left = deadline - asyncio.get_running_loop().time()
        try:
            reply = await client.kv.Range(
                rpc_pb2.RangeRequest(key=key), timeout=max(0.1, left), wait_for_ready=True
            )
        except grpc.aio.AioRpcError as error:
            if error.code() != grpc.StatusCode.UNAVAILABLE or left <= 0.1:
                raise
            await asyncio.sleep(0.1)
            continue
        return bytes(reply.kvs[0].value)


async def test_a_refused_client_sees_unavailable_and_works_again_when_healed(
    proxy: NetProxy,
) -> None:
    async with etcd_client(f"127.0.0.1:{proxy.port}") as client:
        await client.put(b"/proxy/refused", b"before")
        assert await client.get(b"/proxy/refused") == b"before"
        assert proxy.connections == 1  # one HTTP/2 connection carries every call
        proxy.refuse()
        proxy.drop()
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await client.get(b"/proxy/refused", deadline=PATIENCE)
        assert failed.value.code() == grpc.StatusCode.UNAVAILABLE
        proxy.refuse(False)
        assert await healed(client, b"/proxy/refused") == b"before"
        await client.put(b"/proxy/refused", b"after")
        assert await client.get(b"/proxy/refused") == b"after"


async def test_a_stalled_client_sees_unavailable_by_keepalive_and_works_again(
    proxy: NetProxy,
) -> None:
    async with etcd_client(f"127.0.0.1:{proxy.port}", options=KEEPALIVE_OPTIONS) as client:
        await client.put(b"/proxy/stalled", b"before")
        proxy.stall()  # a partition: nothing passes, nothing is refused
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await client.get(b"/proxy/stalled", deadline=PATIENCE)
        # Not DEADLINE_EXCEEDED: the connection was found dead before the deadline.
        assert failed.value.code() == grpc.StatusCode.UNAVAILABLE
        proxy.resume()
        assert await healed(client, b"/proxy/stalled") == b"before"
        async with asyncio.timeout(PATIENCE):
            await client.put(b"/proxy/stalled", b"after")
        assert await client.get(b"/proxy/stalled") == b"after"
