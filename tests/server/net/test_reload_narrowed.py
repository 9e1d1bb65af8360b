"""A reload that narrows a token ends the sessions that use a right it lost (issue 58, D5).

Made read-only, or moved to other nodes, a token's sessions stayed attached while its
connections pinged, and its client could no longer Release, Renew or CloseSession
them: its locks were held until somebody killed the sessions. Now the reload ends
each session that uses a lost right (as an operator's kill: its holds released, its
client told its session expired), and only those: a session on a node the token
keeps, or, made read-only, one that holds and waits for nothing, stays. A real server and client.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import time
from pathlib import Path

import pytest

import tenure
from tenure.errors import SessionExpiredError

from ..tenants import TenantServer, auth_text, token, write_auth_file
from ..wire import WAIT

ADMIN, JOBS = "admin-secret-1", "jobs-secret-2"

pytestmark = pytest.mark.timeout(120)


async def reloaded(server: TenantServer, text: str, auth: Path) -> None:
    """Write ``text`` to the auth file, SIGHUP, and wait (on this loop) until it is taken."""
    seen = server.output().count('"event": "reloaded"')
    await asyncio.to_thread(auth.write_text, text)
    server.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + WAIT
    while server.output().count('"event": "reloaded"') <= seen:
        assert server.proc.poll() is None, server.output()
        assert time.monotonic() < deadline, server.output()
        await asyncio.sleep(0.02)


async def holding(client: tenure.Client, node: str, held: asyncio.Event) -> Exception:
    """Hold the mutex ``m`` of ``node`` in a session of its own until the session is lost:
    the loss (a lost session cancels its block, and leaving it raises the loss)."""
    try:
        async with client.session(node, recovery_window=60.0) as session, session.mutex("m"):
            held.set()
            await asyncio.Event().wait()
    except SessionExpiredError as error:
        return error
    raise AssertionError("never lost")


async def test_narrowing_a_token_ends_the_sessions_using_a_lost_right(tmp_path: Path) -> None:
    admin_token = token("admin", ADMIN)
    auth = write_auth_file(tmp_path, admin_token, token("jobs", JOBS, nodes=["a", "b"]))
    with TenantServer(tmp_path, auth) as server:
        url = f"tenure://127.0.0.1:{server.port}"
        async with contextlib.AsyncExitStack() as stack:
            admin = await stack.enter_async_context(tenure.connect(f"{url}?token={ADMIN}"))
            jobs = await stack.enter_async_context(tenure.connect(f"{url}?token={JOBS}"))
            for node in ("a", "b"):
                await admin.create_node(node)
            idle = await stack.enter_async_context(jobs.session("b", recovery_window=60.0))
            on_a, on_b = asyncio.Event(), asyncio.Event()
            holder_a = asyncio.create_task(holding(jobs, "a", on_a))
            holder_b = asyncio.create_task(holding(jobs, "b", on_b))
            await asyncio.wait_for(asyncio.gather(on_a.wait(), on_b.wait()), WAIT)

            # Moved off node a: its session there ends, the one on b stays.
            await reloaded(server, auth_text(admin_token, token("jobs", JOBS, nodes=["b"])), auth)
            lost = await asyncio.wait_for(holder_a, WAIT)
            assert "ended by an operator" in str(lost)
            assert not holder_b.done()
            other = await stack.enter_async_context(admin.session("a"))
            assert await other.mutex("m").try_lock() is not None, "the ended session's is free"

            # Made read-only: the session holding on b ends, the idle one stays.
            read_only = token("jobs", JOBS, "read-only", nodes=["b"])
            await reloaded(server, auth_text(admin_token, read_only), auth)
            lost = await asyncio.wait_for(holder_b, WAIT)
            assert "ended by an operator" in str(lost)
            described = await idle.mutex("m").describe()
            assert not described.held
            assert idle.lost_reason is None

    ended = [
        json.loads(line)
        for line in server.output().splitlines()
        if '"event": "narrowed_session_ended"' in line
    ]
    assert [(e["node"], e["token"]) for e in ended] == [("a", "jobs"), ("b", "jobs")]
    assert "may no longer touch its node" in ended[0]["why"]
    assert "was made read-only" in ended[1]["why"]
