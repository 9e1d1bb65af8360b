"""A dashboard view of a tenant's big state is built in slices, a bystander's pings
answered between them (issue 47).

A real Server in this process with its HTTP endpoint and an auth file: a tenant's
node holds 60 groups of 1,000 members each; an operator asks the dashboard for a
view (``GET /dashboard/api/board``) while a bystander's connection pings. Shown by
order and by counts, never by time:

* Pongs arrive while some groups have been read for the view and some not yet (one
  step, as before, left no such moment: 60,000 holders classified at once);
* no slice of the view did more than ``--step-budget`` items of work but for one
  semaphore's own (at most ``KIND_SCAN + 2 * max_holders + 3``), and the view read
  ``--dashboard-max-scan`` holders in all, plus one per group at most;
* the view says so: each group's exact totals, and how many of its holders it read.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

import tenure._core.kinds as kinds_module
from tenure._core import Acquire, CreateNode, CreateSemaphore, CreateSession, NodeConfig
from tenure._core.members import GROUP_DATA, Hold, Member, member_record, members_of
from tenure._protocol import Pong
from tenure.server import DataDir, Journal
from tenure.server._config.serve_config import ServeConfig
from tenure.server._durability.storage import FsyncMode
from tenure.server._http.board import DEFAULT_MAX_SCAN, KIND_SCAN
from tenure.server._http.dashboard import DASHBOARD
from tenure.server._http.endpoint import Endpoint
from tenure.server._serve import Server
from tenure.server._server_host import wal_host

from .wire import WAIT, Clients, bound

pytestmark = pytest.mark.timeout(180)

GROUPS = 60
MEMBERS = 1_000
BUDGET = 1_000
MAX_HOLDERS = 20  # --dashboard-max-holders' default
#: Pings a test sends at most (each waits for its Pong; the waits are bounded).
MAX_PINGS = 1_000_000
BIG = NodeConfig(max_sessions=100_000, max_semaphores=100_000, max_waiters=100_000)
AUTH = (
    "[[token]]\nname = 'ops'\nsecret = 'OPS-SECRET'\naccess = 'read-only'\n"
    "[[token]]\nname = 'bystander'\nsecret = 'BYSTANDER-SECRET'\naccess = 'read-write'\n"
)


async def test_a_view_of_60_groups_of_1000_is_sliced_and_pings_are_answered_between(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Groups read for views so far (whichever code reads them: the classifier's own).
    read: list[int] = []

    def counted(holds: Iterable[Hold]) -> dict[str, Member]:
        held = list(holds)
        read.append(len(held))
        return members_of(held)

    monkeypatch.setattr(kinds_module, "members_of", counted)
    auth = tmp_path / "auth.toml"
    auth.write_text(AUTH)
    path = tmp_path / "data"
    journal = Journal(DataDir(path))
    engine = journal.open(asyncio.get_running_loop().time())
    config = ServeConfig(
        port=0, data_dir=path, fsync=FsyncMode.OFF, step_budget=BUDGET, auth_file=auth
    )
    server = Server(config, wal_host(config, journal, engine), bound(config), b"1" * 16)
    _, port = await server.start()
    endpoint = Endpoint("0")
    _, http = await endpoint.start("127.0.0.1", 0, config)
    endpoint.serving(server)
    clients = Clients()
    groups_at_pongs: list[int] = []
    try:
        host = server.host
        host.execute(CreateNode("tenant", BIG))
        sids = [host.execute(CreateSession("tenant", b"k")).session_id for _ in range(MEMBERS)]
        for g in range(GROUPS):
            name = f"g{g:02d}"
            host.execute(CreateSemaphore(sids[0], name, MEMBERS, GROUP_DATA))
            for i, sid in enumerate(sids):
                record = member_record(f"m{i:04d}", b"10.0.0.1:80", weight=None, state="joined")
                host.execute(Acquire(sid, name, 1, request_id=g + 1, data=record))
        pinger = await clients.connect(port, token="BYSTANDER-SECRET")

        async def one_view() -> dict[str, Any]:
            timeout = aiohttp.ClientTimeout(total=WAIT)
            headers = {"Authorization": "Bearer OPS-SECRET"}
            async with (
                aiohttp.ClientSession(timeout=timeout) as http_client,
                http_client.get(
                    f"http://127.0.0.1:{http}/dashboard/api/board", headers=headers
                ) as response,
            ):
                assert response.status == 200
                answer: dict[str, Any] = await response.json(content_type=None)
                return answer

        asked = asyncio.ensure_future(one_view())
        for nonce in range(1, MAX_PINGS):
            if asked.done():
                break
            assert isinstance(await pinger.ping(nonce), Pong)
            groups_at_pongs.append(len(read))
        answer = await asked
        work = endpoint.application.app[DASHBOARD].work
    finally:
        await clients.close_all()
        server.stop()
        assert await asyncio.wait_for(server.wait(), WAIT) == 0
        await endpoint.stop()
    # A Pong came between two slices of the view: some groups read, others not yet.
    assert any(0 < groups < GROUPS for groups in groups_at_pongs), groups_at_pongs
    assert len(read) == GROUPS
    assert sum(read) <= DEFAULT_MAX_SCAN + GROUPS  # before: 60,000
    assert max(read) <= KIND_SCAN
    assert work.slices > 1
    # A slice ends once it has done the budget: it did one entry past it at most.
    assert work.most_in_a_slice < BUDGET + work.largest_entry
    assert work.largest_entry <= 3 + KIND_SCAN + 2 * MAX_HOLDERS + 20  # (and its bytes)
    [node] = answer["view"]["board"]["nodes"]
    assert node["semaphores_total"] == GROUPS
    for group in node["semaphores"]:
        assert group["owners_total"] == MEMBERS
        assert group["recipe"]["members"] == group["recipe"]["scanned"] < MEMBERS
        assert group["recipe"]["counted_all"] is False
