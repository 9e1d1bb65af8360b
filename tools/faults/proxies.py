"""A worker's fault proxies: one :class:`~tests.netproxy.NetProxy` per address of the target.

A worker of a proxied scenario reaches the backend only through its group: for
``tenure serve`` one proxy, for a cluster one per member (its URL lists them
all, so its client fails over from one to the next through them). A network
fault applied to the group applies to every proxy of it, so a "partition" cuts
the worker off from the whole cluster, as a partition of its host would;
:meth:`ProxyGroup.busiest` picks the one member link a fault may cut alone.

Each proxy of a group is a :class:`TiedProxy`: other proxies may be tied to it
(:meth:`TiedProxy.tie`), which every fault of it reaches too, as if one link carried
them all: the YDB face's proxy, which the SDK's discovery leads every worker to
(:mod:`tools.faults.lin_ydb`), is tied to each worker's link to that server.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from tests.netproxy import NetProxy

from tools.faults.target import Address


class TiedProxy(NetProxy):
    """A :class:`NetProxy` whose faults also reach the proxies tied to it (module
    docstring). Only the faults: a tied proxy is started and closed by its owner."""

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.tied: list[NetProxy] = []
        self._delay = 0.0
        super().__init__(upstream_host, upstream_port)

    def tie(self, proxy: NetProxy) -> None:
        """Fault ``proxy`` with this one from now on."""
        self.tied.append(proxy)

    @property
    def delay(self) -> float:
        """See :class:`NetProxy` (settable; set on the tied proxies too)."""
        return self._delay

    @delay.setter
    def delay(self, seconds: float) -> None:
        self._delay = seconds
        for proxy in self.tied:
            proxy.delay = seconds

    def drop(self) -> None:
        """See :meth:`NetProxy.drop`."""
        super().drop()
        for proxy in self.tied:
            proxy.drop()

    def stall(self) -> None:
        """See :meth:`NetProxy.stall`."""
        super().stall()
        for proxy in self.tied:
            proxy.stall()

    def resume(self) -> None:
        """See :meth:`NetProxy.resume`."""
        super().resume()
        for proxy in self.tied:
            proxy.resume()

    def lose_downstream(self, on: bool = True) -> None:
        """See :meth:`NetProxy.lose_downstream`."""
        super().lose_downstream(on)
        for proxy in self.tied:
            proxy.lose_downstream(on)

    def refuse(self, on: bool = True) -> None:
        """See :meth:`NetProxy.refuse`."""
        super().refuse(on)
        for proxy in self.tied:
            proxy.refuse(on)


class ProxyGroup:
    """Fault proxies to ``addresses``, faulted together (see the module docstring)."""

    def __init__(self, addresses: Sequence[Address]) -> None:
        self.proxies = [TiedProxy(host, port) for host, port in addresses]
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
