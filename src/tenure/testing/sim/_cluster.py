"""A cluster of tenure servers over the simulated etcd: members crashed, paused, cut off.

:class:`SimCluster` runs :data:`SIZE` members of ``tenure serve --cluster`` (hosts
``t0``, ``t1``...), each :class:`~tenure.server._cluster.member.ClusterMember` as
``tenure serve`` composes it, over one
:class:`~tenure.testing.sim.etcd.SimEtcd` (host ``etcd`` on the simulated network:
a member cut from it hears nothing from etcd, and etcd nothing from it). Where the
simulation differs from ``tenure serve --cluster``:

* each member's listening socket is the simulated network's, and its etcd channels
  are the model's (``EtcdClientOptions.channel_factory``);
* the leader's snapshot process (:mod:`tenure.server._cluster.state_process`, a
  ``python -m`` of its own in production) runs in-process: its
  :func:`~tenure.server._cluster.state_process.run` as a simulated process on host
  ``t<n>-state``, with the same channels (:class:`SimStateProcess`); a member's crash
  kills it too;
* its wall clock is the simulation's (``EPOCH`` plus the host's clock:
  :mod:`tenure.testing.sim._chance`).

Clients reach the service as the fault suite's do (:attr:`SimCluster.doors`): through
one member (``tenure://t1:7390``), or every one (``tenure://t0:7390,t1:7390,t2:7390``);
they find the leader from there and follow it.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import io
import json
import random
import socket
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, Final, cast

from tenure.server import ServeConfig
from tenure.server._cluster import ClusterMember, advertised
from tenure.server._cluster.keys import DEFAULT_CELL
from tenure.server._cluster.state_process import run as run_state_process
from tenure.server._config.cluster_url import ClusterUrl, parse_cluster_url
from tenure.server._reception import Sockets
from tenure.testing.sim.etcd import SimEtcd
from tenure.testing.sim.etcd._stubs import ETCD_HOST

if TYPE_CHECKING:
    from tenure._etcd.client import EtcdClientOptions
    from tenure.testing.sim._loop import SimLoop

__all__ = ["CLUSTER_URL", "LEASE_TTL", "SIZE", "SimCluster", "SimMember", "SimStateProcess"]

#: Members of the cluster.
SIZE: Final = 3
#: The port every member listens on (each on its own host).
MEMBER_PORT: Final = 7390
#: The members' ``--cluster``: one etcd endpoint (the model's members are not hosts).
CLUSTER_URL: Final = "etcd://etcd:2379/sim"
#: The members' ``--cluster-lease-ttl`` (the shortest it allows, as the fault suite's).
LEASE_TTL: Final = 2
#: Records between two snapshots (``tenure serve``'s is 10,000: a run sees a few).
SNAPSHOT_EVERY: Final = 2_000
#: The etcd client's timeouts, in seconds (a URL's ``connect_timeout`` and
#: ``request_timeout``; the fault suite's cluster uses the defaults too).
REQUEST_TIMEOUT: Final = 5.0


class SimStateProcess:
    """The leader's state process, in-process
    (:class:`~tenure.server._cluster.state_process.StateProcess`; module docstring)."""

    def __init__(
        self,
        loop: SimLoop,
        host: str,
        asked: dict[str, Any],
        connection: EtcdClientOptions,
        disconnect: Callable[[str], None],
    ) -> None:
        """Start it on ``host`` (the one before there must have been killed:
        :meth:`kill`), told ``asked``, reaching etcd by ``connection``; ``disconnect``
        resets a host's etcd connections (the simulated etcd's)."""
        self.loop = loop
        self.host = host
        self._out = io.BytesIO()
        self._err = b""
        self._code: int | None = None
        self._ended = asyncio.Event()
        self._disconnect = disconnect
        self.process = loop.processes.new(host)
        loop.processes.spawn(self.process, self._run(asked, connection))

    async def _run(self, asked: dict[str, Any], connection: EtcdClientOptions) -> None:
        act = str(asked.get("act", "work"))
        try:
            said = await run_state_process(asked, self._out, connection)
        except Exception as error:  # (as the process's main(): the leader logs it)
            self._err = f"the cluster's {act} failed: {type(error).__name__}: {error}\n".encode()
            self._end(1)
            return
        self._out.write(json.dumps(said).encode() + b"\n")
        self._end(0)

    def _end(self, code: int) -> None:
        self._code = code
        self._ended.set()

    @property
    def returncode(self) -> int | None:
        """Its exit code (None: it still runs)."""
        return self._code

    def kill(self) -> None:
        """Kill it (nothing if it has exited); its process ends either way (an exited
        one's host is free for the next)."""
        if self.process not in self.loop.processes.crashed:
            self.loop.crash(self.host)
            self._disconnect(self.host)
        if self._code is None:
            self._code = -9
            self._ended.set()

    async def communicate(self) -> tuple[bytes, bytes]:
        """Its whole standard output and error, once it exited."""
        await self._ended.wait()
        return self._out.getvalue(), self._err


class SimMember:
    """One member on host ``name``: started, crashed, started again (module docstring)."""

    def __init__(self, cluster: SimCluster, name: str, cell: str = DEFAULT_CELL) -> None:
        """``cell``: its ``--cell`` (:mod:`tenure.testing.sim._cells`)."""
        self.cluster = cluster
        self.loop = cluster.loop
        self.name = name
        self.config = ServeConfig(
            host=name,
            port=MEMBER_PORT,
            cluster=CLUSTER_URL,
            cell=cell,
            member_name=name,
            advertise=f"{name}:{MEMBER_PORT}",
            cluster_lease_ttl=LEASE_TTL,
            cluster_snapshot_every=SNAPSHOT_EVERY,
            idle_timeout=0,
        )
        self.member: ClusterMember | None = None
        #: Its latest snapshot process (None: none yet).
        self.state: SimStateProcess | None = None
        #: How many times it was started.
        self.starts = 0

    @property
    def state_host(self) -> str:
        """The host its snapshot processes run on."""
        return f"{self.name}-state"

    @property
    def running(self) -> bool:
        """Whether a process of it runs (not crashed)."""
        return self.member is not None

    @property
    def leads(self) -> bool:
        """Whether it believes it leads now."""
        role = None if self.member is None else self.member.role
        return role is not None and role.leading

    def start(self) -> None:
        """Start a new process of the member (it joins the cluster as a standby)."""
        process = self.loop.processes.new(self.name)
        self.member = None
        self.loop.processes.spawn(process, self._run())
        self.starts += 1

    async def _run(self) -> None:
        url = self.cluster.url()
        member = self.member = ClusterMember(
            self.config, url, None, start_process=self._start_state_process
        )
        listener = self.loop.network.listen(self.name, MEMBER_PORT)
        # (a simulated socket stands in for the bound socket ``tenure serve`` is given)
        sockets = Sockets([cast("socket.socket", listener)])
        await member.run(sockets, advertised(self.config, MEMBER_PORT))

    async def _start_state_process(self, asked: dict[str, Any]) -> SimStateProcess:
        if self.state is not None:  # (done, or left behind by a dead term: its host is free)
            self.state.kill()
        connection = self.cluster.url().connection
        disconnect = self.cluster.etcd.disconnect
        self.state = SimStateProcess(self.loop, self.state_host, asked, connection, disconnect)
        return self.state

    def crash(self) -> None:
        """Kill the member's process (``kill -9``), and its snapshot process with it."""
        if self.member is None:
            return
        self.member = None
        self.loop.crash(self.name)
        self.cluster.etcd.disconnect(self.name)
        if self.state is not None:
            self.state.kill()


class SimCluster:
    """:data:`SIZE` members over one simulated etcd (module docstring); ``rng`` draws
    etcd's latencies."""

    def __init__(
        self, loop: SimLoop, rng: random.Random, cells: tuple[str, ...] = (DEFAULT_CELL,)
    ) -> None:
        """``cells``: :data:`SIZE` members each (hosts numbered on, cell by cell)."""
        self.loop = loop
        self.etcd = SimEtcd(["etcd:2379"], rng, network=loop.network)
        self.members = [
            SimMember(self, f"t{number * SIZE + index}", cell)
            for number, cell in enumerate(cells)
            for index in range(SIZE)
        ]

    def url(self) -> ClusterUrl:
        """The members' cluster URL, its channels the simulated etcd's."""
        url = parse_cluster_url(CLUSTER_URL)
        connection = dataclasses.replace(
            url.connection,
            channel_factory=self.etcd.channel,
            connect_timeout=REQUEST_TIMEOUT,
            request_timeout=REQUEST_TIMEOUT,
        )
        return dataclasses.replace(url, connection=connection)

    @property
    def doors(self) -> list[str]:
        """Where clients reach the service, as the fault suite's workload gives them
        (:class:`~tenure.testing.workload.LinConfig`): each member alone (a client
        follows the leader it names), then every member."""
        each = [f"tenure://{m.name}:{MEMBER_PORT}" for m in self.members]
        return [*each, "tenure://" + ",".join(f"{m.name}:{MEMBER_PORT}" for m in self.members)]

    @property
    def hosts(self) -> list[str]:
        """The members' hosts."""
        return [member.name for member in self.members]

    def start(self) -> None:
        """Start every member."""
        for member in self.members:
            member.start()

    def leaders(self) -> list[str]:
        """The members that believe they lead now."""
        return [member.name for member in self.members if member.leads]

    # -- what the nemesis faults (:class:`~tenure.testing.sim._nemesis.SimTarget`) -------

    kind = "cluster"

    def move(self, node: str) -> None:
        """Nothing: a service of one cell moves no node (:mod:`tenure.testing.sim._cells`
        does)."""

    def _member(self, host: str) -> SimMember:
        return self.members[self.hosts.index(host)]

    def runs(self, host: str) -> bool:
        """Whether member ``host`` runs."""
        return self._member(host).running

    def kill(self, host: str, *, power: bool = False) -> tuple[int, int]:
        """Kill member ``host`` (no disk: ``power`` changes nothing); (0, 0)."""
        self._member(host).crash()
        return 0, 0

    async def restart(self, host: str) -> None:
        """Start member ``host`` again (it loads the state from etcd)."""
        self._member(host).start()

    def etcd_fault(self, rng: random.Random, host: str, fault: str, length: float) -> None:
        """``cut-etcd``, ``slow-etcd`` or ``etcd`` (:mod:`tenure.testing.sim._nemesis`),
        of member ``host`` (and its snapshot process's host), for ``length`` seconds."""
        network = self.loop.network
        hosts = [host, self._member(host).state_host]
        if fault == "etcd":
            if rng.random() < 0.5:
                self.etcd.leader_change()
            else:
                self.etcd.lose_next_answers(rng.randint(1, 4))
            return
        if fault == "cut-etcd":
            both = rng.random() < 0.5
            to_etcd = both or rng.random() < 0.5
            for one in hosts:
                source, target = (one, ETCD_HOST) if to_etcd else (ETCD_HOST, one)
                network.cut(source, target, both=both)
        else:
            delay = rng.uniform(0.02, 0.5)
            for one in hosts:
                network.slow(one, ETCD_HOST, delay)
            for _ in range(rng.randrange(3)):
                self._later(rng.uniform(0.0, length), partial(self._disconnect, hosts))
        self._later(length, partial(self._heal_etcd, hosts))

    def _disconnect(self, hosts: list[str]) -> None:
        for one in hosts:
            self.etcd.disconnect(one)

    def _heal_etcd(self, hosts: list[str]) -> None:
        for one in hosts:
            self.loop.network.heal(one, ETCD_HOST)

    def _later(self, seconds: float, action: Callable[[], object]) -> None:
        # (no process's: a paused one's timers are held back)
        self.loop.call_later(seconds, action, context=contextvars.Context())

    def close(self) -> None:
        """Kill every member and stop etcd (the run's end: nothing after is judged)."""
        for member in self.members:
            member.crash()
        self.etcd.close()
