"""``etcd://`` as a fault-suite target: a three-member etcd cluster on loopback.

The members are :class:`tests.etcd.cluster.EtcdCluster`'s (real ``etcd``
processes, short Raft timers: an election takes about a second). For the
:class:`~tools.faults.target.Target` interface "the server" is the whole cluster:
:meth:`EtcdTarget.kill` is ``kill -9`` of every member at once and
:meth:`EtcdTarget.restart` starts them all again on their data. As a
:class:`~tools.faults.target.Cluster` its members also fail one at a time (the
``cluster-crash`` scenario: a random member, the leader, a majority).

What it does not have, so the scenarios needing it are not run against it:
``data-dir`` and ``preload`` (the disk scenario: etcd keeps three data
directories, and a Go binary does not honour ``LD_PRELOAD``), and
``idle-timeout`` (etcd closes no idle client connection; a silent client's lease
simply runs out).

Clients get every member's address (``etcd://h1:p1,h2:p2,h3:p3``), each worker
in its own rotation (the harness's doing), so that they spread over the members
and fail over from one to the next, as they would in production.

With ``netns`` (the ``linearizable`` scenario's) each member runs in a network
namespace of its own, named as it is (``m0``...), in one
:class:`~tools.faults.netns.Net` (:attr:`EtcdTarget.net`), listening on its own
address, so that the kernel may cut a member off (tools/faults/lin_cuts.py).
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from tests.etcd.cluster import WAIT, EtcdCluster, EtcdError, EtcdMember

from tools.faults.netns import Net
from tools.faults.target import MEMBERS, NETNS, Address

#: Members of the cluster.
SIZE: Final = 3
#: Where tenure's keys live (a fresh cluster per run: any prefix would do).
PREFIX: Final = "/faults/"

# The liveness margin's terms (see EtcdTarget.liveness_margin), in seconds.
#: An election after the leader's death or a restart of the cluster: the Raft
#: election timeout is 0.5 s, randomised up to twice that, plus pre-vote; and the
#: members must first notice that the leader is gone.
ELECTION: Final = 2.0
#: A call in flight when the leader dies: the member that forwarded it drops it
#: silently, and the client tries again (or another member) only once its own
#: deadline passes (the etcd client's request timeout, 5 s: src/tenure/_etcd/client.py).
REQUEST_TIMEOUT: Final = 5.0


def lease_ttl(window: float) -> int:
    """The lease TTL of a session with recovery window ``window`` (docs/backends.md)."""
    return max(2, math.ceil(window))


class EtcdTarget:
    """A three-member etcd cluster as a :class:`~tools.faults.target.Cluster` (module doc)."""

    capabilities: frozenset[str] = frozenset({MEMBERS, NETNS})

    def __init__(self, data_dir: Path, *, netns: bool = False) -> None:
        """``netns``: in network namespaces (module docstring; made here, so
        :meth:`close` must follow)."""
        self.name = "etcd"
        #: The cluster's root: each member's data directory and log are inside.
        self.data_dir = data_dir
        data_dir.mkdir(parents=True, exist_ok=True)
        #: Unused: the members are Go binaries started by EtcdCluster.
        self.env: dict[str, str] = {}
        # etcd tells every watch of tenure's (they ask for progress notices) where it
        # is each second, as `tenure serve`'s idle timeout closes silent connections
        # in the tenure target: the client whose monotonic clock pause-clock moves
        # back sleeps in the event loop's poll through any timer until the network
        # brings something (etcd's default interval, 10 min, would leave it there).
        #: The namespaces the members run in (None: on loopback).
        self.net = Net().open() if netns else None
        names = [f"m{index}" for index in range(SIZE)]
        net = self.net
        self.cluster = EtcdCluster(
            SIZE,
            root=data_dir,
            extra=("--experimental-watch-progress-notify-interval", "1s"),
            hosts=[net.add(name) for name in names] if net is not None else (),
            prefixes=[net.command(name, []) for name in names] if net is not None else (),
        )
        self._opened = False

    # -- what clients see ---------------------------------------------------------------

    def _member(self, name: str) -> EtcdMember:
        for member in self.cluster.members:
            if member.name == name:
                return member
        raise KeyError(name)

    @property
    def address(self) -> Address:
        """See :class:`~tools.faults.target.Target`: the first member."""
        return self.addresses[0]

    @property
    def addresses(self) -> list[Address]:
        """See :class:`~tools.faults.target.Target`: every member's client port."""
        return [(member.host, member.client_port) for member in self.cluster.members]

    def url(self, addresses: Sequence[Address] | None = None) -> str:
        """See :class:`~tools.faults.target.Target`: ``etcd://`` listing ``addresses``."""
        hosts = ",".join(f"{host}:{port}" for host, port in (addresses or self.addresses))
        return f"etcd://{hosts}?prefix={PREFIX}"

    def liveness_margin(self, window: float) -> float:
        """What etcd may add to a recovery (see :class:`~tools.faults.target.Target`).

        The bound's terms are ``tenure serve``'s: a restart, its idle timeout (which
        etcd has not: the bound leaves it out for this target), and the window
        twice. On etcd a recovery may also wait for

        * an election (:data:`ELECTION`);
        * one more lease TTL: a leader change or a restart of the cluster renews
          every lease to its full TTL (docs/backends.md), also the lease of a
          session whose client already gave it up, whose holds then block the
          others that long again;
        * a call that was in flight when the leader died (:data:`REQUEST_TIMEOUT`).

        None of this touches a safety rule: they are all about how long, never
        about who holds.
        """
        return ELECTION + lease_ttl(window) + REQUEST_TIMEOUT

    @property
    def members(self) -> list[str]:
        """See :class:`~tools.faults.target.Cluster`."""
        return [member.name for member in self.cluster.members]

    def running_members(self) -> list[str]:
        """See :class:`~tools.faults.target.Cluster`."""
        return [member.name for member in self.cluster.members if member.running]

    @property
    def pid(self) -> int | None:
        """A running member's process id (the first), None when none runs."""
        return next(iter(sorted(self.cluster.pids)), None)

    def exit_code(self) -> int | None:
        """The exit code of a member that is not running, None while all run."""
        for member in self.cluster.members:
            if member.proc is not None and not member.running:
                return member.proc.returncode
        return None

    def leader(self) -> str | None:
        """See :class:`~tools.faults.target.Cluster` (waits up to 5 s for an agreement)."""
        try:
            return self.cluster.leader(timeout=5.0).name
        except EtcdError:
            return None

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> None:
        """Start every member (fresh data the first time) and wait until each serves."""
        try:
            if not self._opened:
                self._opened = True
                self.cluster.open()
            else:
                self.cluster.start_all()
        except EtcdError as error:
            raise RuntimeError(str(error)) from None

    def kill(self) -> None:
        """``kill -9`` of every running member at once (then each is reaped)."""
        running = [member for member in self.cluster.members if member.pid is not None]
        for member in running:
            with contextlib.suppress(ProcessLookupError):
                os.kill(member.pid or 0, signal.SIGKILL)
        for member in running:
            self.cluster.kill(member)  # reaps it (a second SIGKILL to a zombie is harmless)

    def restart(self) -> None:
        """Every member killed, then started again on its data (see :meth:`start`)."""
        self.kill()
        self.start()

    def stop(self) -> int | None:
        """Stop every member (SIGTERM, the leader last); 0, a member's code, or None if killed."""
        if not self._opened:
            return None
        self.cluster.stop_all()
        codes = [m.proc.returncode for m in self.cluster.members if m.proc is not None]
        if any(code == -signal.SIGKILL for code in codes):
            return None
        return next((code for code in codes if code), 0)

    def close(self) -> None:
        """Kill every member and remove their data directories (the logs stay), and
        the namespaces."""
        try:
            self.kill()
            self.cluster.close()
        finally:
            if self.net is not None:
                self.net.close()

    # -- one member at a time -----------------------------------------------------------

    def kill_member(self, name: str) -> None:
        """See :class:`~tools.faults.target.Cluster`."""
        self.cluster.kill(self._member(name))

    def start_members(self, names: Sequence[str]) -> None:
        """See :class:`~tools.faults.target.Cluster` (bounded by the cluster's WAIT)."""
        start_members(self.cluster, [self._member(name) for name in names])


def start_members(cluster: EtcdCluster, members: Sequence[EtcdMember]) -> None:
    """Start ``members`` of ``cluster`` that do not run, and wait until each serves
    (bounded by the cluster's WAIT; RuntimeError if one exits or is late)."""
    try:
        for member in members:
            if not member.running:
                cluster.start(member, wait=False)
    except EtcdError as error:
        raise RuntimeError(str(error)) from None
    deadline = time.monotonic() + WAIT
    waiting = list(members)
    while waiting:
        waiting = [member for member in waiting if not member.healthy()]
        for member in waiting:
            if not member.running:
                raise RuntimeError(f"{member.name} exited: {member.output()[-2000:]}")
        if waiting and time.monotonic() > deadline:
            raise RuntimeError(f"not serving within {WAIT}s: {waiting}")
        if waiting:
            time.sleep(0.05)
