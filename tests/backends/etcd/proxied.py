"""A session whose client reaches etcd through a proxy, beside one that reaches it directly.

The etcd:// tests of lost answers and partitions share this setup: the proxy
(:class:`tests.netproxy.NetProxy`) breaks the first client's traffic on demand, and
the other client, straight to the shared member, sees what etcd holds meanwhile. The
member itself is never stopped: other tests share it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

import tenure
from tests.etcd.cluster import EtcdCluster
from tests.netproxy import NetProxy

__all__ = ["Proxied", "proxied_session"]


@dataclass(frozen=True)
class Proxied:
    """What :func:`proxied_session` opened (every session is on the node ``n``)."""

    proxy: NetProxy
    client: tenure.Client  # through the proxy: connect and request timeouts of 1 s
    session: tenure.Session  # of ``client``, with a recovery window of 30 s
    other_client: tenure.Client  # straight to etcd
    other: tenure.Session  # of ``other_client``


@contextlib.asynccontextmanager
async def proxied_session(etcd_member: EtcdCluster, etcd_url: str) -> AsyncIterator[Proxied]:
    """Node ``n`` and the two sessions (module docstring), closed on the way out."""
    endpoint = etcd_member.endpoints[0]
    host, port = endpoint.rsplit(":", 1)
    async with NetProxy(host, int(port)) as proxy:
        through = etcd_url.replace(endpoint, f"127.0.0.1:{proxy.port}")
        async with (
            tenure.connect(through, connect_timeout=1, request_timeout=1) as client,
            tenure.connect(etcd_url) as other_client,
        ):
            await client.create_node("n")
            other = await other_client.session("n")
            session = await client.session("n", recovery_window=30)
            yield Proxied(proxy, client, session, other_client, other)
