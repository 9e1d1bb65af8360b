"""A read-only token's listing watch on a bystander's busy queue (issue 47, round two).

A watch armed by a describe that lists owners and waiters fired with them listed,
built in the step of whoever changed the semaphore: one read-only watch on a queue
of 10,000 made each enqueue there list 10,000 waiters (0.01 ms -> 34 ms of the
bystander's step, pure build). Now a firing that would list more than
``--max-listed-per-firing`` (1,000; 20 here) owners and waiters carries no state
(nil: the watcher describes, in a request of its own, paid from its own rate), and
the bystander's step lists nothing for it. Counted in the pushes, never timed.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from tenure._core import (
    Acquire,
    CreateNode,
    CreateSemaphore,
    CreateSession,
    DescribeSemaphore,
    WatchFired,
)
from tenure._core.values import MAX_LISTED_PER_FIRING
from tenure.server._config.serve_config import ConfigError, ServeConfig, add_arguments, resolve

from ..tenants import TenantServer, token, write_auth_file
from ..wire import Clients, WireClient

pytestmark = pytest.mark.timeout(120)

ADMIN, READER = "admin-secret", "reader-secret"
#: The server's ``--max-listed-per-firing``.
LISTED = 20
#: The bystander's queue behind its one holder: more than LISTED.
QUEUED = 2 * LISTED


def _parse(*argv: str, env: dict[str, str] | None = None) -> ServeConfig:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return resolve(parser.parse_args(argv), env or {})


def test_the_flag_and_its_environment_variable() -> None:
    assert _parse().max_listed_per_firing == MAX_LISTED_PER_FIRING == 1_000
    assert _parse("--max-listed-per-firing", "0").max_listed_per_firing == 0
    env = {"TENURE_MAX_LISTED_PER_FIRING": "8"}
    assert _parse(env=env).max_listed_per_firing == 8
    with pytest.raises(ConfigError, match="max-listed-per-firing='-1': must be at least 0"):
        _parse("--max-listed-per-firing", "-1")


async def _enqueue(admin: WireClient, request_id: int) -> int:
    """A new bystander session queued on ``q``: its id."""
    sid: int = (await admin.call(CreateSession("n", b"w"))).session_id
    await admin.call(Acquire(sid, "q", 1, request_id=request_id))
    return sid


async def test_a_reader_s_listing_watch_adds_no_listing_to_the_bystander_s_changes(
    tmp_path: Path, wire: Clients
) -> None:
    auth_file = write_auth_file(
        tmp_path, token("admin", ADMIN), token("reader", READER, "read-only")
    )
    with TenantServer(tmp_path, auth_file, "--max-listed-per-firing", str(LISTED)) as server:
        admin = await wire.connect(server.port, token=ADMIN)
        await admin.call(CreateNode("n"))
        holder = (await admin.call(CreateSession("n", b"a"))).session_id
        await admin.call(CreateSemaphore(holder, "q", 1))
        await admin.call(Acquire(holder, "q", 1, request_id=1))
        for request_id in range(2, QUEUED + 2):
            await _enqueue(admin, request_id)
        # The bystander's own watch lists nobody: its firings carry the state.
        own = await admin.call(DescribeSemaphore(holder, "q", watch_waiters=True))
        reader = await wire.connect(server.port, token=READER)
        sid = (await reader.call(CreateSession("n", b"r"))).session_id
        asked = DescribeSemaphore(
            sid, "q", owners=True, waiters=True, watch_waiters=True, watch_repeat=True
        )
        armed = await reader.call(asked)
        assert len(armed.description.waiters) == QUEUED  # (its own describe lists them)
        admin.pushes.clear()
        for request_id in range(QUEUED + 2, QUEUED + 5):  # three more enqueues
            await _enqueue(admin, request_id)
        firings = [await reader.next_push() for _ in range(3)]
        assert firings == [WatchFired(sid, armed.watch_id, "q", None)] * 3
        (mine,) = [p for p in admin.pushes if type(p) is WatchFired]
        assert mine.watch_id == own.watch_id
        assert mine.description is not None
        assert mine.description.count == 1
        assert not mine.description.waiters
        # The reader learns the latest state by describing it itself.
        latest = await reader.call(DescribeSemaphore(sid, "q", owners=True, waiters=True))
        assert len(latest.description.waiters) == QUEUED + 3
        assert [o.session_id for o in latest.description.owners] == [holder]
