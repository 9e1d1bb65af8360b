"""A real ``tenure serve``: who may list and kill, and what a version-1 client is sent."""

from __future__ import annotations

from pathlib import Path

import pytest

from tenure._core import (
    MAX_COUNT,
    Acquire,
    CreateNode,
    CreateSession,
    DescribeSemaphore,
    KillSession,
    ListNodes,
    ListSemaphores,
    ListSessions,
    SessionEnded,
)
from tenure._core.values import ClientIdentity
from tenure._protocol import Welcome
from tenure.errors import ErrorCode

from ..wire import Clients, ServerProcess
from .test_auth import ADMIN, AUTH_FILE, HASHED, JOBS, READER

pytestmark = pytest.mark.timeout(60)

WHO = ClientIdentity("host-a", 4242, "billing-worker")


@pytest.fixture
def auth_file(tmp_path: Path) -> Path:
    """The tokens of test_auth.py: admin, reader, jobs-deployer (jobs, config-*), hashed (jobs)."""
    path = tmp_path / "auth.toml"
    path.write_text(AUTH_FILE)
    return path


async def test_listing_needs_read_access_and_kill_session_write_access(
    tmp_path: Path, wire: Clients, auth_file: Path
) -> None:
    with ServerProcess(tmp_path / "data", "--auth-file", str(auth_file)) as server:
        admin = await wire.connect(server.port, token=ADMIN)
        for node in ("a1", "a2", "a3", "billing", "jobs"):
            await admin.call(CreateNode(node))
        victim = (await admin.call(CreateSession("jobs", b"kv", None, "victim", WHO))).session_id
        await admin.call(Acquire(victim, "m", MAX_COUNT, request_id=1, ephemeral=True))
        reader = await wire.connect(server.port, token=READER)
        assert (await reader.call(ListNodes())).names == ("a1", "a2", "a3", "billing", "jobs")
        [summary] = (await reader.call(ListSemaphores("jobs"))).semaphores
        assert (summary.name, summary.owners) == ("m", 1)
        [listed] = (await reader.call(ListSessions("jobs"))).sessions
        assert (listed.session_id, listed.description, listed.identity) == (victim, "victim", WHO)
        assert listed.expires_in is None  # its connection keeps it
        failure = await reader.fail(KillSession("jobs", victim))
        assert failure.code is ErrorCode.PERMISSION_DENIED
        assert "read-only: it may not send KillSession on node 'jobs'" in failure.message
        # A token limited to some nodes lists only those, and may not kill elsewhere.
        hashed = await wire.connect(server.port, token=HASHED)
        assert (await hashed.call(ListNodes())).names == ("jobs",)
        # Pages of 2: the server reads on past the nodes the token may not see.
        assert (await hashed.call(ListNodes("", 2))).names == ("jobs",)
        jobs_deployer = await wire.connect(server.port, token=JOBS)
        await jobs_deployer.call(CreateNode("config-a"))
        await jobs_deployer.call(CreateNode("config-b"))
        first = (await jobs_deployer.call(ListNodes("", 2))).names
        assert first == ("config-a", "config-b")
        assert (await jobs_deployer.call(ListNodes(first[-1], 2))).names == ("jobs",)
        assert (await hashed.fail(ListSessions("billing"))).code is ErrorCode.PERMISSION_DENIED
        jobs = await wire.connect(server.port, token=JOBS)
        assert (await jobs.fail(KillSession("billing", victim))).code is (
            ErrorCode.PERMISSION_DENIED
        )
        # A read-write token kills another connection's session; its owner is told.
        assert await jobs.call(KillSession("jobs", victim)) is None
        ended = await admin.next_push()
        assert isinstance(ended, SessionEnded)
        assert (ended.session_id, ended.code) == (victim, ErrorCode.SESSION_EXPIRED)
        assert "operator" in ended.message
        assert (await jobs.call(ListSessions("jobs"))).sessions == ()
        assert (await jobs.fail(KillSession("jobs", victim))).code is ErrorCode.NOT_FOUND


async def test_a_version_1_client_is_served_in_the_layouts_it_knows(
    tmp_path: Path, wire: Clients
) -> None:
    with ServerProcess(tmp_path / "data") as server:
        new = await wire.connect(server.port)
        await new.call(CreateNode("n"))
        holder = (await new.call(CreateSession("n", b"k1", None, "exporter", WHO))).session_id
        await new.call(Acquire(holder, "m", MAX_COUNT, request_id=1, ephemeral=True))
        old = await wire.connect(server.port, hello=False)
        welcome = await old.hello(version=1)
        assert isinstance(welcome, Welcome)
        assert welcome.version == 1
        session = (await old.call(CreateSession("n", b"k2", None, "old"))).session_id
        described = await old.call(DescribeSemaphore(session, "m", owners=True))
        [owner] = described.description.owners
        assert (owner.session_id, owner.description, owner.since) == (holder, "", None)
        assert owner.identity == ClientIdentity()
        # The same state, to a version-2 client: who holds, and since when.
        mine = await new.call(DescribeSemaphore(holder, "m", owners=True))
        [full] = mine.description.owners
        assert (full.description, full.identity) == ("exporter", WHO)
        assert full.since is not None
        [listed_old, _] = (await new.call(ListSessions("n"))).sessions[::-1]
        assert (listed_old.description, listed_old.identity) == ("old", ClientIdentity())
