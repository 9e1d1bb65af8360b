"""A hostile token beside a bystander in the statistics per name (issue 60).

The abuse: a token floods fresh contended names (each waited on once) to push out
what the other tenants' operators watch in ``tenure top``, or reads the others'
names through it. On a real ``tenure serve --auth-file``: the sketch keeps every
bystander's name whatever the flood (each token fills at most
``--contention-share`` of ``--contention-names`` while others' names are kept, and
pushes out its own), the bystander's counts stay exact, and the hostile token reads
its own nodes' names alone, on the wire and on the dashboard.
"""

from __future__ import annotations

import urllib.request
from pathlib import Path
from typing import Any

import msgspec
import pytest

from tenure._core import MAX_COUNT, Acquire, CreateNode, CreateSession, Release, TopNames, WhyName
from tenure._core.top_report import TopReport
from tenure.errors import ErrorCode

from ..tenants import TenantServer, token, write_auth_file
from ..wire import WAIT, Clients, WireClient

pytestmark = pytest.mark.timeout(120)

ADMIN, SHOP, HOSTILE = "admin-secret", "shop-secret", "hostile-secret"
#: ``--contention-names`` and ``--contention-share``: a token alone may fill all 40;
#: beside another's names, at most 10 are its.
CAPACITY, SHARE = 40, 0.25
#: The bystander's contended names.
WATCHED = [f"cart-{i}" for i in range(5)]


async def _contend(client: WireClient, node: str, names: list[str], first: int) -> None:
    """Each of ``names`` waited on once: held by one session, queued on by another,
    let go (``first``: the first request id, the range unique on the connection)."""
    one = (await client.call(CreateSession(node, b"k1"))).session_id
    two = (await client.call(CreateSession(node, b"k2"))).session_id
    for i, name in enumerate(names):
        ids = first + 2 * i
        await client.call(Acquire(one, name, MAX_COUNT, request_id=ids, ephemeral=True))
        await client.call(Acquire(two, name, MAX_COUNT, request_id=ids + 1, ephemeral=True))
        assert await client.call(Release(one, name))
        assert await client.call(Release(two, name))


async def _top(client: WireClient, node: str) -> TopReport:
    report: TopReport = await client.call(TopNames(node, sort="grants", limit=10_000))
    return report


def _dashboard_top(port: int, secret: str) -> dict[str, Any]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/dashboard/api/top?sort=grants&limit=10000",
        headers={"Authorization": f"Bearer {secret}"},
    )
    with urllib.request.urlopen(request, timeout=WAIT) as answer:
        got: dict[str, Any] = msgspec.json.decode(answer.read())
        return got


async def test_a_flood_of_names_pushes_out_none_of_a_bystanders(
    tmp_path: Path, wire: Clients
) -> None:
    auth_file = write_auth_file(
        tmp_path,
        token("admin", ADMIN),
        token("shop", SHOP, nodes=["shop"]),
        token("hostile", HOSTILE, nodes=["evil"]),
    )
    flags = ("--contention-names", str(CAPACITY), "--contention-share", str(SHARE))
    with TenantServer(tmp_path, auth_file, *flags, "--dashboard-rate", "20", http=True) as server:
        admin = await wire.connect(server.port, token=ADMIN)
        for node in ("shop", "evil"):
            await admin.call(CreateNode(node))
        hostile = await wire.connect(server.port, token=HOSTILE)
        shop = await wire.connect(server.port, token=SHOP)
        # Alone, the hostile token fills the sketch; the bystander's names then come in
        # (pushing out the hostile's), and a flood ten times the capacity follows.
        await _contend(hostile, "evil", [f"first-{i}" for i in range(CAPACITY)], 1)
        assert (await _top(admin, "")).kept == CAPACITY
        await _contend(shop, "shop", WATCHED, 1)
        await _contend(hostile, "evil", [f"flood-{i}" for i in range(10 * CAPACITY)], 1_000)

        every = await _top(admin, "")
        assert every.kept == CAPACITY
        assert every.evicted >= 10 * CAPACITY
        evil = [stat for stat in every.names if stat.node == "evil"]
        assert len(evil) == CAPACITY - len(WATCHED)  # its own pushed out, never others'
        seen = await _top(shop, "shop")
        assert sorted(stat.name for stat in seen.names) == WATCHED
        for stat in seen.names:  # every event since its first wait (the grant after it)
            assert (stat.queued, stat.grants) == (1, 1), stat

        # The hostile token reads its own node's names alone.
        assert {stat.node for stat in (await _top(hostile, "evil")).names} == {"evil"}
        for command in (TopNames(""), TopNames("shop"), WhyName("shop", WATCHED[0])):
            failure = await hostile.fail(command)
            assert failure.code is ErrorCode.PERMISSION_DENIED, command
            assert "cart" not in failure.message
        board = _dashboard_top(server.http_port, HOSTILE)
        assert board["names"]
        assert {row["node"] for row in board["names"]} == {"evil"}
        assert board["kept"] is None  # (how many names there are in all: not its to know)
        board = _dashboard_top(server.http_port, SHOP)
        assert sorted(row["name"] for row in board["names"]) == WATCHED
