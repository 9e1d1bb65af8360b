"""Programs a matrix venv's interpreter runs as a user's code would (``python -c``)."""

from __future__ import annotations

from pathlib import Path
from typing import Final

from tests.install.matrix import Venv

__all__ = ["LOCK", "YDB_LOCK", "lock_through"]

#: One lock through the library on the URL of ``argv[1]``: prints ``token N``.
LOCK: Final = """
import sys

import tenure.sync

with tenure.sync.connect(sys.argv[1]) as client:
    client.create_node("matrix", exist_ok=True)
    with client.session("matrix") as session, session.mutex("job") as lock:
        print("token", lock.token)
"""


def lock_through(venv: Venv, url: str, cwd: Path) -> str:
    """Take one lock on ``url`` with ``venv``'s tenure; what the program printed."""
    done = venv.run("python", "-c", LOCK, url, cwd=cwd)
    assert (done.returncode, done.stderr) == (0, ""), done
    return done.stdout


#: docs/ydb.md's example, on the YDB face at ``argv[1]`` (``grpc://HOST:PORT``): YDB's
#: own SDK creates a node and holds a semaphore in it; prints ``held``.
YDB_LOCK: Final = """
import sys

import ydb
from ydb.coordination import (
    CoordinationClient,
    NodeConfig,
    ConsistencyMode,
    RateLimiterCountersMode,
)

driver = ydb.Driver(endpoint=sys.argv[1], database="/local")
driver.wait(timeout=30)
client = CoordinationClient(driver)
client.create_node(
    "/local/my-app",
    NodeConfig(
        attach_consistency_mode=ConsistencyMode.STRICT,
        rate_limiter_counters_mode=RateLimiterCountersMode.AGGREGATED,
        read_consistency_mode=ConsistencyMode.RELAXED,
        self_check_period_millis=1000,
        session_grace_period_millis=10000,
    ),
)
with client.session("/local/my-app") as session, session.semaphore("job"):
    print("held")
driver.stop(timeout=10)
"""
