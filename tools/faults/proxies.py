"""A worker's fault proxies: one :class:`~tests.netproxy.NetProxy` per address of the target.

A worker of a proxied scenario reaches the backend only through its group: for
``tenure serve`` one proxy, for a cluster one per member (its URL lists them
all, so its client fails over from one to the next through them). A network
fault applied to the group applies to every proxy of it, so a "partition" cuts
the worker off from the whole cluster, as a partition of its host would;
:meth:`ProxyGroup.busiest` picks the one member link a fault may cut alone.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from tests.netproxy import NetProxy

from tools.faults.target import Address


class ProxyGroup:
    """Fault proxies to ``addresses``, faulted together (see the module docstring)."""

    def __init__(self, addresses: Sequence[Address]) -> None:
        self.proxies = [NetProxy(host, port) for host, port in addresses]
        self._delay = 0.0

    def __len__(self) -> int:
        return len(self.proxies)

    async def start(self) -> None:
        """Start listening, every proxy on a port the OS picks."""
        for proxy in self.proxies:
            await proxy.start()

    async def aclose(self) -> None:
        """Close every proxy (each resets its connections; bounded)."""
        for proxy in self.proxies:
            await proxy.aclose()

    @property
    def addresses(self) -> list[Address]:
        """Where the worker connects, in the order of the target's addresses given."""
        return [(proxy.host, proxy.port) for proxy in self.proxies]

    @property
    def delay(self) -> float:
        """Seconds each chunk waits in every proxy of the group (settable)."""
        return self._delay

    @delay.setter
    def delay(self, seconds: float) -> None:
        self._delay = seconds
        for proxy in self.proxies:
            proxy.delay = seconds

    def drop(self) -> None:
        """See :meth:`NetProxy.drop`, on every proxy."""
        for proxy in self.proxies:
            proxy.drop()

    def stall(self) -> None:
        """See :meth:`NetProxy.stall`, on every proxy."""
        for proxy in self.proxies:
            proxy.stall()

    def resume(self) -> None:
        """See :meth:`NetProxy.resume`, on every proxy."""
        for proxy in self.proxies:
            proxy.resume()

    def refuse(self, on: bool = True) -> None:
        """See :meth:`NetProxy.refuse`, on every proxy."""
        for proxy in self.proxies:
            proxy.refuse(on)

    def lose_downstream(self, on: bool = True) -> None:
        """See :meth:`NetProxy.lose_downstream`, on every proxy."""
        for proxy in self.proxies:
            proxy.lose_downstream(on)

    def busiest(self, rng: random.Random) -> NetProxy:
        """The proxy with the most open connections: the member the worker uses now.

        Ties (a worker between connections) are broken by ``rng``.
        """
        most = max(proxy.connections for proxy in self.proxies)
        return rng.choice([proxy for proxy in self.proxies if proxy.connections == most])
