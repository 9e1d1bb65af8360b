"""bench.tools.cpu reads a process's CPU time from the scheduler's own count.

No timing: the readings of this very process are checked to exist, to add up its
threads, and to grow with work done; a process that is not there reads as None.
"""

from __future__ import annotations

import os
import sys

import pytest
from bench.tools.cpu import ServerCpu, scheduled_seconds

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="/proc/PID/task/*/schedstat is Linux's"
)


def _work() -> int:
    return sum(i * i for i in range(200_000))


def test_this_process_is_read_to_the_nanosecond_and_grows_with_work() -> None:
    before = scheduled_seconds(os.getpid())
    assert before is not None
    assert before > 0
    _work()
    after = scheduled_seconds(os.getpid())
    assert after is not None
    assert after > before


def test_the_server_reading_is_the_schedulers_and_adds_up_to_what_it_spent() -> None:
    reading = ServerCpu(os.getpid())
    first = reading.read()
    _work()
    second = reading.read()
    assert set(first) >= {os.getpid()}
    assert ServerCpu.spent(first, second) > 0
    # The scheduler's count, not psutil's clock ticks: what scheduled_seconds reads.
    now = scheduled_seconds(os.getpid())
    assert now is not None
    assert second[os.getpid()] <= now


def test_a_process_that_is_not_there_reads_as_none() -> None:
    with open("/proc/sys/kernel/pid_max") as limit:
        beyond = int(limit.read()) + 1  # (no pid is ever this high)
    assert scheduled_seconds(beyond) is None
