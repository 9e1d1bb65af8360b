"""CPU time of the benchmark's processes: the client's own, and a server's by pid.

seq reports both per acquire + release pair (the targets: each at most 100 µs).
"""

from __future__ import annotations

import resource

import psutil


def own_cpu_seconds() -> float:
    """User + system CPU seconds of this process so far, every thread included.

    (etcd's gRPC client works in threads of its own: their CPU is the client's too.)
    """
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class ServerCpu:
    """CPU seconds of a server's processes and their children (PostgreSQL's backends).

    Several pids: a system of several processes (tenure-cluster: its members and
    their etcd), added up. Read by pid from this process with psutil, so the reading
    brackets exactly the timed loop. A process that starts between two readings
    counts from zero; one that exits takes its CPU along (none does during a timed
    loop: the sessions stay open).
    """

    def __init__(self, pid: int, *more: int) -> None:
        self._mains = [psutil.Process(p) for p in (pid, *more)]

    def read(self) -> dict[int, float]:
        """CPU seconds per process of the server, now."""
        found: dict[int, float] = {}
        procs = [p for main in self._mains for p in (main, *main.children(recursive=True))]
        for proc in procs:
            try:
                times = proc.cpu_times()
            except psutil.NoSuchProcess:
                continue
            found[proc.pid] = float(times.user + times.system)
        return found

    @staticmethod
    def spent(before: dict[int, float], after: dict[int, float]) -> float:
        """CPU seconds used between two readings."""
        return sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items())
