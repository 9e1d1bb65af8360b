"""CPU time of the benchmark's processes: the client's own, and a server's by pid.

seq reports both per acquire + release pair (the targets: each at most 100 µs).
"""

from __future__ import annotations

import os
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
        """CPU seconds per process of the server, now: to the nanosecond where Linux's
        scheduler counts it (:func:`scheduled_seconds`), else as psutil reads it (in
        clock ticks, 10 ms here: 5 µs a pair over quick mode's 2,000, too coarse for
        a lone request's cost)."""
        found: dict[int, float] = {}
        procs = [p for main in self._mains for p in (main, *main.children(recursive=True))]
        for proc in procs:
            precise = scheduled_seconds(proc.pid)
            if precise is not None:
                found[proc.pid] = precise
                continue
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


def scheduled_seconds(pid: int) -> float | None:
    """Seconds the threads of process ``pid`` have run on a CPU so far, user and system
    time together, from ``/proc/PID/task/*/schedstat`` (nanoseconds; None where there
    is no such file: not Linux, no such process, or a kernel without schedstats).

    A thread that ended takes its time along, as an ended process does in
    :class:`ServerCpu` (a timed loop's servers start and end none).
    """
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    total = 0
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as stats:
                total += int(stats.read().split()[0])
        except (OSError, ValueError, IndexError):
            if task == str(pid):
                return None  # (the process itself unread: read it as psutil does)
    return total / 1e9
