"""``tenure why NODE NAME``: a chain of three services, found in one command."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import tenure
from tenure._core.values import NO_IDENTITY
from tenure._core.why_report import WhyHolder, WhyLink, WhyReport, WhyRoot, WhyWait
from tenure.cli.why import report_json, report_lines
from tenure.testing.conformance.support import eventually
from tests.cli.support import one_error_line, run_tenure


async def _hold_then_wait(session: tenure.Session, held: str, wanted: str) -> None:
    """Lock ``held``, then, in the same task, wait for ``wanted`` (until cancelled)."""
    async with session.mutex(held), session.mutex(wanted):
        pass


async def _lock(session: tenure.Session, name: str) -> None:
    """Wait for ``name`` (until cancelled)."""
    async with session.mutex(name):
        pass


def _queued(session: tenure.Session, name: str) -> Callable[[], Awaitable[bool]]:
    """Whether ``name`` has a waiter now."""

    async def check() -> bool:
        return bool((await session.semaphore(name).describe(waiters=True)).waiters)

    return check


@asynccontextmanager
async def chain_of_three(url: str, node: str) -> AsyncIterator[dict[str, int]]:
    """``billing`` holds C and waits for nothing; ``reports`` holds B and waits on C;
    ``api`` holds A and waits on B; ``web`` waits on A. Their session ids by name."""
    async with tenure.connect(url, client_name="svc") as client:
        sessions = {
            name: await client.session(node, description=name)
            for name in ("billing", "reports", "api", "web")
        }
        tasks: list[asyncio.Task[None]] = []
        try:
            held = asyncio.Event()

            async def hold_c() -> None:
                async with sessions["billing"].mutex("C"):
                    held.set()
                    await asyncio.Event().wait()

            tasks.append(asyncio.create_task(hold_c()))
            await held.wait()
            tasks.append(asyncio.create_task(_hold_then_wait(sessions["reports"], "B", "C")))
            await eventually(_queued(sessions["billing"], "C"), "a waiter on C")
            tasks.append(asyncio.create_task(_hold_then_wait(sessions["api"], "A", "B")))
            await eventually(_queued(sessions["billing"], "B"), "a waiter on B")
            tasks.append(asyncio.create_task(_lock(sessions["web"], "A")))
            await eventually(_queued(sessions["billing"], "A"), "a waiter on A")
            yield {name: session.id for name, session in sessions.items()}
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for session in sessions.values():
                await session.close()


async def test_why_names_the_root_of_a_chain_of_three(url: str, node: str) -> None:
    async with tenure.connect(url) as client:
        await client.create_node(node)
    async with chain_of_three(url, node) as ids:
        done = await asyncio.to_thread(run_tenure, "why", node, "A", "--json", url=url)
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        (holder,) = report["holders"]
        assert (holder["session_id"], holder["description"]) == (ids["api"], "api")
        assert holder["client"]["name"] == "svc"
        assert holder["address"] == "127.0.0.1"  # (where the server sees its connection)
        assert holder["waiting_for"] == [{"node": node, "name": "B", "position": 1}]
        assert holder["held_for"] >= 0
        assert holder["max_hold_ends_in"] is None
        assert [(w["session_id"], w["position"]) for w in report["waiters"]] == [(ids["web"], 1)]
        assert [(x["name"], x["session_id"]) for x in report["chain"]] == [
            ("A", ids["api"]), ("B", ids["reports"]), ("C", ids["billing"]),
        ]  # fmt: skip
        (root,) = report["roots"]
        assert (root["name"], root["session_id"], root["description"]) == (
            "C", ids["billing"], "billing",
        )  # fmt: skip
        assert report["cut"] is False
        text = await asyncio.to_thread(run_tenure, "why", node, "A", url=url)
        assert text.returncode == 0, text.stderr
        assert f'root: C held by session {ids["billing"]} "billing"' in text.stdout
        assert "waiting for B (#1)" in text.stdout


def test_why_of_a_name_nobody_made_says_so(url: str, node: str) -> None:
    made = run_tenure("node", "create", node, url=url)
    assert made.returncode == 0, made.stderr
    done = run_tenure("why", node, "nobody-made-this", url=url)
    assert done.returncode != 0
    assert "nobody-made-this" in one_error_line(done)


def test_the_text_names_other_nodes_and_shows_what_is_hidden() -> None:
    elsewhere = (WhyWait("back-office", "ledger", 1), WhyWait("", "", 2))
    report = WhyReport(
        "shop",
        "orders",
        (WhyHolder(3, "api", NO_IDENTITY, "", 1, 7, 1.0, None, elsewhere),),
        (),
        (
            WhyLink("shop", "orders", 3, ("cart",), elsewhere),
            WhyLink("back-office", "ledger", 4, (), ()),
            WhyLink("", "", 0, ("",), ()),
        ),
        (WhyRoot("", "", 0, "", NO_IDENTITY, "", 5.0),),
        1,
        0,
    )
    lines = report_lines(report)
    assert "waiting for ledger (node back-office) (#1), (hidden) (#2)" in lines[1]
    assert (
        "chain: orders held by session 3, waits on cart, ledger (node back-office), (hidden)"
        in lines
    )
    assert "chain: (hidden) held by session ?, waits on (hidden)" in lines
    assert lines[-1].startswith("root: (hidden) held by session 0")
    document = report_json(report)
    assert document["chain"][0]["waits_elsewhere"] == [  # type: ignore[index]
        {"node": "back-office", "name": "ledger", "position": 1},
        {"node": "", "name": "", "position": 2},
    ]
