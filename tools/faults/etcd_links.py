"""The links of each ``tenure serve --cluster`` server to etcd, through fault proxies.

A server of the ``tenure-cluster`` target reaches etcd only through its own
:class:`~tools.faults.proxies.ProxyGroup` (one :class:`~tests.netproxy.NetProxy` per
etcd member; its ``--cluster`` URL lists the proxies), so that one server can be cut
off from etcd while the others and the clients are not: a partition of the leader's
host from the etcd cluster, the fault that the lease discipline of a leader is for.

The proxies are asyncio objects, but the target is driven from threads (the
harness calls :class:`~tools.faults.target.Target` methods with
``asyncio.to_thread``), and the traffic of three servers' keepalives, watches and
appends must not wait behind the harness's own loop. So they run on an event loop
of their own, in a thread of their own (:class:`EtcdLinks`); every call from
outside goes through that loop and is bounded.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Final, TypeVar

from tools.faults.proxies import ProxyGroup
from tools.faults.target import Address

T = TypeVar("T")

#: Bound of one call into the proxies' loop (start, close, a fault), in seconds.
CALL_WAIT: Final = 30.0


class EtcdLinks:
    """A :class:`ProxyGroup` to etcd per server name, on a loop of their own (module doc)."""

    def __init__(self, etcd: Sequence[Address], names: Sequence[str]) -> None:
        self._etcd = list(etcd)
        self._names = list(names)
        self._groups: dict[str, ProxyGroup] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="etcd-links", daemon=True
        )
        self._started = False

    def start(self) -> None:
        """Start the loop and every proxy (each listens on a port the OS picks)."""
        if self._started:
            return
        self._started = True
        self._thread.start()
        self._call(self._start_groups())

    async def _start_groups(self) -> None:
        for name in self._names:
            self._groups[name] = group = ProxyGroup(self._etcd)
            await group.start()

    def addresses(self, name: str) -> list[Address]:
        """Where server ``name`` reaches etcd (its proxies, in the etcd members' order)."""
        return self._groups[name].addresses

    def cut(self, name: str, cut: bool = True) -> None:
        """Stall (``cut``) or resume every link of server ``name`` to etcd.

        A stall forwards nothing either way and loses nothing: etcd hears no renewal
        of the server's lease, the server hears no answer, and what was held goes
        through in order once resumed (:meth:`~tests.netproxy.NetProxy.stall`).
        """
        group = self._groups[name]
        self._do(group.stall if cut else group.resume)

    def heal(self) -> None:
        """Resume every server's links (the safety net after a run's faults)."""
        for group in self._groups.values():
            self._do(group.resume)

    def close(self) -> None:
        """Close every proxy and stop the loop (bounded; idempotent)."""
        if not self._started or self._loop.is_closed():
            return
        try:
            self._call(self._close_groups())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=CALL_WAIT)
            if not self._thread.is_alive():
                self._loop.close()

    async def _close_groups(self) -> None:
        for group in self._groups.values():
            await group.aclose()

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=CALL_WAIT)

    def _do(self, action: Callable[[], None]) -> None:
        # NetProxy's faults set asyncio events: only its loop's thread may touch them.
        async def run() -> None:
            action()

        self._call(run())
