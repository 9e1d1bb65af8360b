"""A hostile token beside a bystander in the statistics per name, and what a chain
shows of a node a token may not read (issue 60).

The abuse: a token floods fresh contended names (each waited on once) to push out
what the other tenants' operators watch in ``tenure top``, or reads the others'
names through it. On a real ``tenure serve --auth-file``: the sketch keeps every
bystander's name whatever the flood (each token fills at most
``--contention-share`` of ``--contention-names`` while others' names are kept, and
pushes out its own), the bystander's counts stay exact, and the hostile token reads
its own nodes' names alone, on the wire and on the dashboard.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import msgspec
import pytest

from tenure._core import MAX_COUNT, Acquire, CreateNode, CreateSession, Release, TopNames, WhyName
from tenure._core.top_report import TopReport
from tenure._core.values import ClientIdentity
from tenure._core.why_report import WhyLink, WhyReport, WhyWait
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


async def test_a_chain_into_a_node_the_token_may_not_read_is_shown_hidden(
    tmp_path: Path, wire: Clients
) -> None:
    # One task of one process holds A of shop and waits on B of back-office (held by
    # another process): the shop token sees that A's holder waits, on something of a
    # node it may not read, and nothing of what.
    auth_file = write_auth_file(
        tmp_path, token("admin", ADMIN), token("shop", SHOP, nodes=["shop"])
    )
    with TenantServer(tmp_path, auth_file, "--dashboard-rate", "20", http=True) as server:
        admin = await wire.connect(server.port, token=ADMIN)
        for node in ("shop", "back-office"):
            await admin.call(CreateNode(node))
        worker, other = ClientIdentity("web-1", 42, "worker"), ClientIdentity("db-1", 7, "ledger")
        here = (await admin.call(CreateSession("shop", b"k", identity=worker))).session_id
        there = (await admin.call(CreateSession("back-office", b"k", identity=worker))).session_id
        ledger = (await admin.call(CreateSession("back-office", b"k", identity=other))).session_id
        await admin.call(Acquire(here, "A", MAX_COUNT, request_id=1, ephemeral=True, task=5))
        await admin.call(Acquire(ledger, "B", MAX_COUNT, request_id=2, ephemeral=True, task=1))
        await admin.call(Acquire(there, "B", MAX_COUNT, request_id=3, ephemeral=True, task=5))

        whole: WhyReport = await admin.call(WhyName("shop", "A"))
        assert whole.holders[0].waiting_for == (WhyWait("back-office", "B", 1),)
        assert [(r.node, r.name, r.session_id) for r in whole.roots or ()] == [
            ("back-office", "B", ledger)
        ]
        shop = await wire.connect(server.port, token=SHOP)
        seen: WhyReport = await shop.call(WhyName("shop", "A"))
        assert seen.holders[0].waiting_for == (WhyWait("", "", 1),)
        assert seen.chain == (
            WhyLink("shop", "A", here, (), (WhyWait("", "", 1),)),
            WhyLink("", "", 0, (), ()),
        )
        assert [(r.node, r.name, r.session_id, r.description) for r in seen.roots or ()] == [
            ("", "", 0, "")
        ]
        assert "back-office" not in repr(seen)
        assert "ledger" not in repr(seen)
        board = _dashboard_why(server.http_port, SHOP, "shop", "A")
        assert board["chain"][1] == {
            "node": "", "name": "", "session_id": 0, "waits_on": [], "waits_elsewhere": []
        }  # fmt: skip
        assert "back-office" not in json.dumps(board)


def _dashboard_why(port: int, secret: str, node: str, name: str) -> dict[str, Any]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/dashboard/api/why?node={node}&name={name}",
        headers={"Authorization": f"Bearer {secret}"},
    )
    with urllib.request.urlopen(request, timeout=WAIT) as answer:
        got: dict[str, Any] = msgspec.json.decode(answer.read())
        return got
