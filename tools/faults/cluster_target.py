"""``tenure serve --cluster`` as a fault-suite target: three servers over three etcd members.

The etcd members are :class:`tests.etcd.cluster.EtcdCluster`'s (short Raft timers, as
for :class:`~tools.faults.etcd_target.EtcdTarget`); the servers are
:class:`tests.cluster.harness.ClusterServer`'s (``python -m tenure serve --cluster``
with ``--http-port``, JSON logs), each with a short lease (``--cluster-lease-ttl``,
2 s by default), an idle timeout, and a name of its own (``t0``, ``t1``, ``t2``). Each
server reaches etcd through fault proxies of its own (:class:`~tools.faults.etcd_links.EtcdLinks`),
so one server can be cut off from etcd alone.

Clients get every server as a door (``tenure://h1:p1,h2:p2,h3:p3``): they find the
leader, follow it when it changes, and re-attach their sessions there.

With ``netns`` (the ``linearizable`` scenario's) every etcd member and every server
runs in a network namespace of its own, named as it is (``m0``, ``t0``...), in one
:class:`~tools.faults.netns.Net` (:attr:`TenureClusterTarget.net`), each listening on
its own address; the servers reach etcd directly, and a cut from etcd is the
kernel's (:meth:`TenureClusterTarget.cut_from_etcd`). Nothing is proxied then.

For the :class:`~tools.faults.target.Target` interface "the server" is the whole
service: :meth:`TenureClusterTarget.kill` is ``kill -9`` of every server and every etcd
member at once, :meth:`TenureClusterTarget.restart` starts them all again on their
data. As a :class:`~tools.faults.target.Replicated` its servers and etcd members also
fail one at a time (:mod:`tools.faults.failover`). Who leads is what the servers say
(``/readyz`` is 200 on the leader only); when a server began to lead, or stepped
down, is read from its log (``cluster_leading``, ``cluster_stepped_down``) and told
in the histories' time.

What it does not have: ``data-dir`` and ``preload`` (the disk scenario: the log lives
in etcd, and etcd is a Go binary), and ``members`` (its servers are no quorum: any
one of them may lead alone, and :mod:`tools.faults.failover` fails them and etcd's
members as a cluster of this kind fails).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from tests.cluster.harness import ClusterServer
from tests.etcd.cluster import EtcdCluster, EtcdError, EtcdMember

from tools.faults.etcd_links import EtcdLinks
from tools.faults.etcd_target import ELECTION, REQUEST_TIMEOUT, start_members
from tools.faults.history import now
from tools.faults.netns import Net
from tools.faults.target import IDLE_TIMEOUT, NETNS, REPLICATED, START_WAIT, Address

#: Servers of the service, and members of etcd.
SIZE: Final = 3
#: The cluster's name in etcd (a fresh etcd per run: any name would do).
CLUSTER: Final = "faults"
#: The lease TTL of the servers (the shortest ``--cluster-lease-ttl`` allows).
LEASE_TTL: Final = 2
#: The longest pause of a client between two rounds of its doors (the link's backoff).
CLIENT_BACKOFF: Final = 2.0
#: How often a wait polls the servers, in seconds.
_POLL: Final = 0.05


def _history_offset() -> float:
    """Wall-clock time less history time, now (the servers log wall-clock times)."""
    return time.time() - now()


class TenureClusterTarget:
    """Three ``tenure serve --cluster`` over three etcd members (see the module docstring)."""

    capabilities: frozenset[str] = frozenset({IDLE_TIMEOUT, REPLICATED, NETNS})

    def __init__(
        self,
        data_dir: Path,
        *,
        idle_timeout: float = 5.0,
        lease_ttl: int = LEASE_TTL,
        netns: bool = False,
    ) -> None:
        """``netns``: in network namespaces (module docstring; made here, so :meth:`close`
        must follow)."""
        self.name = "tenure-cluster"
        #: The target's root: etcd's members and the servers keep their data and logs inside.
        self.data_dir = data_dir
        data_dir.mkdir(parents=True, exist_ok=True)
        #: Unused: the servers are started by ClusterServer, never preloaded.
        self.env: dict[str, str] = {}
        self.lease_ttl = lease_ttl
        #: The namespaces everything runs in (None: on loopback, etcd through proxies).
        self.net = Net().open() if netns else None
        places = [self._place(f"m{index}") for index in range(SIZE)]
        self.etcd = EtcdCluster(
            SIZE,
            root=data_dir / "etcd",
            hosts=[host for host, _ in places],
            prefixes=[prefix for _, prefix in places],
        )
        (data_dir / "servers").mkdir(exist_ok=True)
        self._servers: dict[str, ClusterServer] = {}
        for index in range(SIZE):
            name = f"t{index}"
            extra = (
                *("--member-name", name, "--cluster-lease-ttl", str(lease_ttl)),
                *("--idle-timeout", f"{idle_timeout:g}"),
            )
            host, prefix = self._place(name)
            # The cluster URL is known once etcd listens, and the proxies (start).
            self._servers[name] = ClusterServer(
                index, data_dir / "servers", "", extra, host=host, prefix=tuple(prefix)
            )
        self.links: EtcdLinks | None = None
        self._paused: set[str] = set()
        self._opened = False

    def _place(self, name: str) -> tuple[str, list[str]]:
        """Where ``name`` (a server, an etcd member) listens, and what runs it there:
        its namespace in :attr:`net`, made now; loopback without."""
        if self.net is None:
            return "127.0.0.1", []
        return self.net.add(name), self.net.command(name, [])

    # -- what clients see ---------------------------------------------------------------

    @property
    def address(self) -> Address:
        """See :class:`~tools.faults.target.Target`: the first server."""
        return self.addresses[0]

    @property
    def addresses(self) -> list[Address]:
        """See :class:`~tools.faults.target.Target`: every server's native port."""
        return [(server.host, server.port) for server in self._servers.values()]

    def url(self, addresses: Sequence[Address] | None = None) -> str:
        """See :class:`~tools.faults.target.Target`: ``tenure://`` with every door given."""
        doors = ",".join(f"{host}:{port}" for host, port in (addresses or self.addresses))
        return f"tenure://{doors}"

    def liveness_margin(self, window: float) -> float:
        """What a cluster may add to a recovery (see :class:`~tools.faults.target.Target`).

        The bound's terms are a single ``tenure serve``'s; here a recovery may also wait

        * for the dead leader's lease to run out, and a standby to be elected and take
          over (:attr:`lease_ttl`);
        * for etcd's own election when its leader died (``etcd_target.ELECTION``), and a
          server's call in flight to the dead member (``etcd_target.REQUEST_TIMEOUT``);
        * for a client's next round of its doors (:data:`CLIENT_BACKOFF`);
        * one more window: the new leader starts every session's window afresh (as a
          restarted server does), also that of a session whose client already gave it
          up, whose holds then block the others that long again.

        None of this touches a safety rule.
        """
        return self.lease_ttl + ELECTION + REQUEST_TIMEOUT + CLIENT_BACKOFF + window

    @property
    def pid(self) -> int | None:
        """See :class:`~tools.faults.target.Target`: the first running server's."""
        return next((s.pid for s in self._servers.values() if s.pid is not None), None)

    def exit_code(self) -> int | None:
        """The exit code of a server or etcd member that does not run; None while all run."""
        for server in self._servers.values():
            if server.proc is not None and not server.running:
                return server.proc.returncode
        for member in self.etcd.members:
            if member.proc is not None and not member.running:
                return member.proc.returncode
        return None

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> None:
        """Start etcd, the proxies (the first time) and every server; wait for a leader."""
        try:
            if not self._opened:
                self._opened = True
                self.etcd.open()  # (it may pick other ports: the proxies come after)
                etcd = [(member.host, member.client_port) for member in self.etcd.members]
                if self.net is None:
                    self.links = EtcdLinks(etcd, self.servers)
                    self.links.start()
                for name, server in self._servers.items():
                    links = etcd if self.links is None else self.links.addresses(name)
                    hosts = ",".join(f"{h}:{p}" for h, p in links)
                    server.cluster = f"etcd://{hosts}/{CLUSTER}"
            else:
                self.etcd.start_all()
        except EtcdError as error:
            raise RuntimeError(str(error)) from None
        self.start_servers(self.servers)
        if self.leader(timeout=START_WAIT) is None:
            raise RuntimeError(f"no server leads within {START_WAIT}s: {self._tails()}")

    def kill(self) -> None:
        """``kill -9`` of every server and etcd member at once (then each is reaped)."""
        procs = [s.proc for s in self._servers.values() if s.running and s.proc is not None]
        members = [m for m in self.etcd.members if m.pid is not None]
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGKILL)  # a stopped process dies of it too
        for member in members:
            with contextlib.suppress(ProcessLookupError):
                os.kill(member.pid or 0, signal.SIGKILL)
        for proc in procs:
            proc.wait(timeout=START_WAIT)
        for member in members:
            self.etcd.kill(member)  # reaps it
        self._paused.clear()

    def restart(self) -> None:
        """Everything killed, then started again on its data (see :meth:`start`)."""
        self.kill()
        self.start()

    def stop(self) -> int | None:
        """Stop every server (SIGTERM: the leader hands over), then etcd; 0, a code, or None."""
        if not self._opened:
            return None
        for name in list(self._paused):
            self.pause_server(name, False)
        procs = [s.proc for s in self._servers.values() if s.running and s.proc is not None]
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        codes: list[int | None] = []
        for proc in procs:
            try:
                codes.append(proc.wait(timeout=START_WAIT))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=START_WAIT)
                codes.append(None)
        self.etcd.stop_all()
        if None in codes:
            return None
        return next((code for code in codes if code), 0)

    def close(self) -> None:
        """Kill everything, close the proxies, remove etcd's data (the logs stay) and
        the namespaces."""
        try:
            self.kill()
            if self.links is not None:
                self.links.close()
            self.etcd.close()
        finally:
            if self.net is not None:
                self.net.close()

    # -- the servers one at a time ------------------------------------------------------

    @property
    def servers(self) -> list[str]:
        """See :class:`~tools.faults.target.Replicated`."""
        return list(self._servers)

    def running_servers(self) -> list[str]:
        """See :class:`~tools.faults.target.Replicated`."""
        return [name for name, server in self._servers.items() if server.running]

    def leader(self, *, excluding: Sequence[str] = (), timeout: float = 0.0) -> str | None:
        """See :class:`~tools.faults.target.Replicated` (a paused server is not asked)."""
        deadline = time.monotonic() + timeout
        while True:
            for name, server in self._servers.items():
                if name in excluding or name in self._paused or not server.running:
                    continue
                if server.ready():
                    return name
            if time.monotonic() >= deadline:
                return None
            time.sleep(_POLL)

    def led_since(self, name: str, since: float) -> float | None:
        """See :class:`~tools.faults.target.Replicated` (its log's ``cluster_leading``)."""
        times = self._events(name, "cluster_leading", since)
        return min(times) if times else None

    def stepped_down_since(self, name: str, since: float) -> float | None:
        """See :class:`~tools.faults.target.Replicated` (its log's ``cluster_stepped_down``)."""
        times = self._events(name, "cluster_stepped_down", since)
        return min(times) if times else None

    def _events(self, name: str, event: str, since: float) -> list[float]:
        """History times of the ``event`` lines server ``name`` logged at or after ``since``."""
        offset = _history_offset()
        found = []
        for line in self._servers[name].output().splitlines():
            if f'"{event}"' not in line:
                continue
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                if record.get("event") == event and record["ts"] - offset >= since:
                    found.append(float(record["ts"]) - offset)
        return found

    def died_by_itself(self, name: str) -> str | None:
        """See :class:`~tools.faults.target.Replicated`: its exit code and its last
        critical (else error, else any) log line."""
        server = self._servers[name]
        if server.proc is None or server.running or server.proc.returncode == -signal.SIGKILL:
            return None
        lines = server.output(this_start=True).splitlines()
        worst = [line for line in lines if '"critical"' in line] or [
            line for line in lines if '"error"' in line
        ]
        last = (worst or lines or [""])[-1]
        return f"exit code {server.proc.returncode}: {last[:1000]}"

    def kill_server(self, name: str) -> None:
        """See :class:`~tools.faults.target.Replicated`."""
        self._servers[name].kill()
        self._paused.discard(name)

    def start_servers(self, names: Sequence[str]) -> None:
        """See :class:`~tools.faults.target.Replicated`."""
        chosen = [self._servers[name] for name in names]
        try:
            for server in chosen:
                if not server.running:
                    server.start(wait=False)
            for server in chosen:
                server.wait_listening()
        except AssertionError as error:  # ClusterServer's: it exited, or never listened
            raise RuntimeError(str(error)[-3000:]) from None

    def pause_server(self, name: str, paused: bool = True) -> None:
        """See :class:`~tools.faults.target.Replicated`."""
        server = self._servers[name]
        if paused:
            server.pause()
            self._paused.add(name)
        else:
            server.resume()
            self._paused.discard(name)

    def cut_from_etcd(self, name: str, cut: bool = True) -> None:
        """See :class:`~tools.faults.target.Replicated`: in namespaces, the kernel drops
        every packet between server ``name`` and etcd's members, both ways (nothing is
        held: TCP retransmits once healed); else its proxies stall."""
        if self.net is not None:
            self.net.cut_between([name], self.etcd_members, cut)
            return
        assert self.links is not None, "start() first"
        self.links.cut(name, cut)

    def output(self, name: str) -> str:
        """What server ``name`` logged, over all its starts."""
        return self._servers[name].output()

    def _tails(self) -> str:
        return "\n".join(f"--- {n} ---\n{s.output()[-1500:]}" for n, s in self._servers.items())

    # -- etcd's members one at a time ---------------------------------------------------

    @property
    def etcd_members(self) -> list[str]:
        """See :class:`~tools.faults.target.Replicated`."""
        return [member.name for member in self.etcd.members]

    def running_etcd_members(self) -> list[str]:
        """See :class:`~tools.faults.target.Replicated`."""
        return [member.name for member in self.etcd.members if member.running]

    def etcd_leader(self) -> str | None:
        """See :class:`~tools.faults.target.Replicated` (waits up to 5 s for an agreement)."""
        try:
            return self.etcd.leader(timeout=5.0).name
        except EtcdError:
            return None

    def _member(self, name: str) -> EtcdMember:
        return next(member for member in self.etcd.members if member.name == name)

    def kill_etcd_member(self, name: str) -> None:
        """See :class:`~tools.faults.target.Replicated`."""
        self.etcd.kill(self._member(name))

    def start_etcd_members(self, names: Sequence[str]) -> None:
        """See :class:`~tools.faults.target.Replicated` (bounded by etcd's WAIT)."""
        start_members(self.etcd, [self._member(name) for name in names])
