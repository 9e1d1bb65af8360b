"""The scenarios: a workload, the nemeses that run during it, and its sizes.

Every scenario runs the same workload (worker processes taking mutexes, writing
to the fenced resource, updating their registers; see :mod:`tools.faults.worker`)
and is judged by every rule of :mod:`tools.faults.checker`. Short mode (CI, what
plain ``pytest`` runs) uses ``short_seconds`` of faults and a few workers; long
mode (``scripts/faults``) runs each scenario for at least ten minutes with more
workers.

A scenario runs against every target that has the capabilities it ``requires``
and none it ``excludes`` (:func:`applies`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Final

from tools.faults import disk, failover, lin_nemesis, members, nemesis, power, tenant
from tools.faults.nemesis import Stage
from tools.faults.target import (
    DATA_DIR,
    IDLE_TIMEOUT,
    MEMBERS,
    PRELOAD,
    REPLICATED,
    TOKENS,
    Target,
)

Nemesis = Callable[[Stage, float], Awaitable[None]]

#: Every nemesis by name.
NEMESES: Final[dict[str, Nemesis]] = {
    "crash": nemesis.crash,
    "network": nemesis.network,
    "pause": nemesis.pause,
    "clock": nemesis.clock,
    "disk": disk.disk,
    "members": members.members,
    "failover": failover.failover,
    "power": power.power,
    "tenant": tenant.tenant,
    "linearizable": lin_nemesis.linearizable,
}

#: The workloads: the suite's own (worker processes taking mutexes and updating their
#: registers: tools/faults/worker.py, run by tools/faults/harness.py), and the
#: ``linearizable`` scenario's (random operations of every model, recorded for
#: lincheck: tools/faults/lin_worker.py, run by tools/faults/lin_harness.py).
LOCKS: Final = "locks"
LINEARIZABLE: Final = "linearizable"

#: Tools a scenario may need on the machine (scripts/bootstrap installs them).
FAKETIME = "faketime"
MOUNT = "mount"
GCC = "gcc"


@dataclass(frozen=True)
class Scenario:
    """One scenario (see the module docstring). Times are in seconds."""

    name: str
    summary: str
    nemeses: tuple[str, ...]
    workers: int = 5
    clients: int = 2
    keys: int = 3
    window: float = 3.0
    idle_timeout: float = 5.0
    hold: tuple[float, float] = (0.01, 0.1)
    #: The last two workers run under libfaketime: wall clock only, then monotonic too
    #: (:attr:`clocks`).
    faketime: bool = False
    #: The data directory is a small tmpfs (needs root).
    tmpfs: bool = False
    #: The server preloads the failing-fsync shim (compiled with gcc at run time).
    fsync_shim: bool = False
    #: Through a fault proxy per worker (the network nemesis needs it).
    proxied: bool = False
    #: The server preloads the power shim (tools/faults/power_shim.c: writes reach the
    #: data directory only once synced; compiled with gcc at run time).
    power_shim: bool = False
    #: With the power shim: the probability, per write, that a random part of the
    #: pending pages reaches the disk (torn tails at the cut); 0: none.
    torn: float = 0.0
    #: With the power shim: the probability, per sync with writes pending, that the
    #: power goes during it (part of it on disk, then SIGKILL); 0: never.
    cut_in_sync: float = 0.0
    short_seconds: float = 20.0
    #: The server takes the hostile-tenant scenario's auth file (tools/faults/tokens.py):
    #: the workers use the ``honest`` token, the harness the ``admin`` one.
    tokens: bool = False
    #: Seconds between two latency probes of each client (0: none; tools/faults/worker.py).
    probe_every: float = 0.0
    #: Target capabilities the scenario needs (target.py's constants).
    requires: frozenset[str] = frozenset()
    #: Capabilities of targets it is not run against, because another scenario
    #: covers it there (said in its ``summary``).
    excludes: frozenset[str] = frozenset()
    #: Its workload: :data:`LOCKS` or :data:`LINEARIZABLE`.
    workload: str = LOCKS
    #: A target that can (capability ``netns``) runs each process in a network
    #: namespace, the workers too, and the network faults are the kernel's there
    #: (tools/faults/netns.py; needs root).
    netns: bool = False

    @property
    def needs(self) -> tuple[str, ...]:
        """The tools the scenario needs."""
        return (
            *((FAKETIME,) if self.faketime else ()),
            *((MOUNT,) if self.tmpfs else ()),
            *((GCC,) if self.fsync_shim or self.power_shim else ()),
        )

    @property
    def clocks(self) -> dict[int, str]:
        """The workers under libfaketime, by index: the last but one's wall clock only
        (``wall``), the last one's monotonic clock too (``monotonic``)."""
        if not self.faketime:
            return {}
        return {self.workers - 2: "wall", self.workers - 1: "monotonic"}

    def long(self, workers: int = 8) -> Scenario:
        """The long-mode version: ``workers`` worker processes of two clients each."""
        return replace(self, workers=max(workers, self.workers), clients=2)


def applies(scenario: Scenario, capabilities: frozenset[str]) -> bool:
    """Whether ``scenario`` runs against a target of ``capabilities`` (module docstring)."""
    return scenario.requires <= capabilities and not scenario.excludes & capabilities


def liveness_bound(scenario: Scenario, target: Target | None = None) -> float:
    """How long any client may wait for one answer (``B`` of the liveness rules).

    A generous sum, not a promise about speed: a restart (10 s allowed on a loaded
    machine), the server noticing a silent connection (idle timeout; left out for
    a target without one), the session of a client that vanished expiring (the
    window) and the client itself giving up (another window), then a margin of
    10 s for a queue of holders and a scheduler that is slow to hand out the two
    cores; plus what the target's backend adds (:meth:`Target.liveness_margin`,
    e.g. an etcd election). ``target`` None: ``tenure serve``'s terms alone.
    """
    idle = scenario.idle_timeout
    margin = 0.0
    if target is not None:
        idle = idle if IDLE_TIMEOUT in target.capabilities else 0.0
        margin = target.liveness_margin(scenario.window)
    return 10.0 + idle + 2 * scenario.window + 10.0 + margin


SCENARIOS: Final[dict[str, Scenario]] = {
    s.name: s
    for s in (
        Scenario(
            "crash",
            "kill -9 of the server every 3-8 s, restarted at once on the same data; every "
            "third outage lasts longer than the recovery window (on a cluster, "
            "cluster-crash or failover does this among its faults)",
            ("crash",),
            excludes=frozenset({MEMBERS, REPLICATED}),
        ),
        Scenario(
            "cluster-crash",
            "kill -9 every 2-5 s of, in turn: the leader, a random member (each "
            "restarted on its data after 1-4 s), the whole cluster (restarted at once "
            "on its data), a majority (the leader and one more, down for the window "
            "+ 1-3 s: no quorum), the whole cluster for the window + 1-3 s",
            ("members",),
            requires=frozenset({MEMBERS}),
            short_seconds=25.0,
        ),
        Scenario(
            "failover",
            "one fault at a time, 1-2 s apart: kill -9 of the leader (about every 10 s; "
            "restarted on its data once a standby leads); a lock holder stopped (SIGSTOP) "
            "while the leader is killed, until a window and 1-2 s after the successor took "
            "over; the leader cut off from etcd, and the leader stopped, each past its "
            "lease; every server and etcd member killed at once and restarted at once; "
            "etcd's leader killed; a standby killed (each restarted after 0.5-1.5 s); "
            "everything down past the window",
            ("failover",),
            window=8.0,
            hold=(0.05, 0.3),
            short_seconds=40.0,
            requires=frozenset({REPLICATED}),
        ),
        Scenario(
            "network",
            "per-client TCP proxy: delay, reset, partitions shorter and longer than the "
            "window, refused connections, and resets with replies and pushes in flight",
            ("network",),
            proxied=True,
        ),
        Scenario(
            "pause-clock",
            "SIGSTOP of a lock holder past its window (idle timeout + window + 1-3 s); "
            "libfaketime jumps of two clients' clocks: one's wall clock (clock+jump: "
            "+1 h or +10 min, clock-jump: -1 h or -10 min, each for 2-5 s), the other's "
            "wall and monotonic clocks leaping as far forward at each jump and staying "
            "there (clock-leap: a monotonic clock never goes back)",
            ("pause", "clock"),
            workers=6,
            window=3.0,
            idle_timeout=3.0,
            hold=(0.1, 0.5),
            faketime=True,
            short_seconds=25.0,
        ),
        Scenario(
            "disk",
            "the data directory on a 64 MB tmpfs filled to the last byte, and fsync "
            "failing with EIO (an LD_PRELOAD shim), in turn every 4-8 s; the server "
            "restarted once the disk is healthy",
            ("disk",),
            tmpfs=True,
            fsync_shim=True,
            short_seconds=22.0,
            requires=frozenset({DATA_DIR, PRELOAD}),
        ),
        Scenario(
            "power",
            "a power cut every 1.5-4 s: the data directory on an LD_PRELOAD layer that "
            "keeps every write in the server's memory until its file is fsynced and "
            "every creation or rename until the directory is, then kill -9 (the unsynced "
            "writes die with it), unsynced creations and renames undone, and the server "
            "restarted at once on what the disk kept; 30% of writes first let a random "
            "part of the pending pages reach the disk, and 0.2% of syncs are cut while "
            "they write (a random half or a random suffix of their pages on disk: torn "
            "tails)",
            ("power",),
            power_shim=True,
            torn=power.TORN,
            cut_in_sync=power.CUT_IN_SYNC,
            short_seconds=10.0,
            requires=frozenset({DATA_DIR, PRELOAD}),
        ),
        Scenario(
            "tenant",
            "a hostile tenant: in turn 3 s quiet and 5 s of one group of abuses at once "
            "(issue 37's and issue 47's in turn), each "
            "bounded and undone after (tools/faults/abuses.py), by a read-write token "
            "limited to its own nodes and a read-only token of the honest node: listings "
            "one name a page among 10,000 nodes it cannot see and 20,000 semaphores, "
            "sessions with a day's window, watches, queued acquires, semaphores of 64 KiB, "
            "a node with limits of 2**63 and nodes of its own, requests as fast as answers "
            "come (from a token of their own, with its own rate), wrong secrets; and issue "
            "47's (tools/faults/abuses_surfaces.py): 10 x 1,000 prefix watches left "
            "detached, claims of 64 KiB over ended claims' semaphores, 2,000 deep YDB "
            "rate-limiter resources listed through the YDB face, 300-link deadlock cycles "
            "of 1 KB names, the dashboard's view of 60 groups of 1,000 members; the "
            "honest clients, with their own token, probe the server every 50 ms, and a "
            "bystander holds one lock all along with a 3 s recovery window",
            ("tenant",),
            workers=3,
            window=2.0,
            idle_timeout=5.0,
            hold=(0.01, 0.05),
            short_seconds=18.0,
            tokens=True,
            probe_every=0.05,
            requires=frozenset({TOKENS}),
        ),
        Scenario(
            "linearizable",
            "clients through every door (each address of the target alone, and all of "
            "them) doing random operations, each recorded for lincheck: registers (a "
            "semaphore's data: describe, update, compare_and_set), counters (add, get), "
            "mutexes with expiry (recovery window 4 s; one worker's loop blocked past it "
            "every 8 s while a client holds), membership (join and leave ids of a small "
            "pool, members) and watches of the registers; on a target that speaks dflockd's "
            "protocol (tenure), mutexes through dflockd's own client too, and YDB's face "
            "through YDB's SDK (semaphores held with counts, the registers read and "
            "written); a request whose "
            "answer was lost sent again. One fault at a time, 1-2 s apart "
            "(tools/faults/lin_nemesis.py): answers lost and connections reset, some "
            "clients cut from the leader alone (on tenure-cluster and etcd, each server, "
            "etcd member and worker in a network namespace of its own, by the kernel's "
            "cuts, silent and half-open, and the leader isolated from everything too); "
            "on a cluster the leader killed, stopped past its lease and resumed, cut from "
            "etcd (not from its clients), etcd's leader and another etcd member killed; on "
            "etcd its leader and a member killed; on a single server kill -9 and SIGSTOP",
            ("linearizable",),
            workers=4,
            clients=3,
            window=4.0,
            hold=(0.01, 0.1),
            proxied=True,
            short_seconds=25.0,
            workload=LINEARIZABLE,
            netns=True,
        ),
    )
}
