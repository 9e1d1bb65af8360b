"""``tenure top``: the most contended names of a real server, most waited first."""

from __future__ import annotations

import asyncio
import json

import tenure
from tenure.testing.conformance.support import eventually
from tests.cli.support import one_error_line, run_tenure


async def _waiters(session: tenure.Session, name: str, count: int) -> None:
    async def queued() -> bool:
        return len((await session.semaphore(name).describe(waiters=True)).waiters) >= count

    await eventually(queued, f"{count} waiter(s) on {name!r}")


async def test_top_lists_the_most_waited_name_first(url: str, node: str) -> None:
    async with tenure.connect(url) as client:
        await client.create_node(node)
        async with (
            client.session(node, description="busy holder") as busy_holder,
            client.session(node, description="calm holder") as calm_holder,
            client.session(node, description="busy waiter 1") as first,
            client.session(node, description="busy waiter 2") as second,
            client.session(node, description="calm waiter") as calm_waiter,
        ):
            busy = await busy_holder.mutex("busy").lock()
            busy_waits = [asyncio.create_task(first.mutex("busy").lock())]
            await _waiters(busy_holder, "busy", 1)
            busy_waits.append(asyncio.create_task(second.mutex("busy").lock()))
            await _waiters(busy_holder, "busy", 2)
            # The calm name's one wait begins after the busy name's waits and ends
            # before theirs: the busy name has waited at least as long, whatever the
            # machine's speed. (Not surely longer: the server's heard time stands still
            # while its loop is stalled, so a wait may read 0; on a tie, the name
            # sorts the busy one first too.)
            calm = await calm_holder.mutex("calm").lock()
            calm_wait = asyncio.create_task(calm_waiter.mutex("calm").lock())
            await _waiters(calm_holder, "calm", 1)
            await calm.release()
            await (await calm_wait).release()
            await busy.release()
            for task in busy_waits:
                await (await task).release()
            done = await asyncio.to_thread(run_tenure, "top", node, "--once", "--json", url=url)
            assert done.returncode == 0, done.stderr
            report = json.loads(done.stdout)
            names = [(stat["name"], stat["grants"], stat["queued"]) for stat in report["names"]]
            assert names == [("busy", 2, 2), ("calm", 1, 1)]
            first_row = report["names"][0]
            assert first_row["wait_seconds"] >= report["names"][1]["wait_seconds"] >= 0
            assert (first_row["node"], first_row["queue"], first_row["holders"]) == (node, 0, 0)
            assert (report["node"], report["window"], report["sort"]) == (node, 60.0, "wait")
            assert report["kept"] >= 2
            by_grants = await asyncio.to_thread(
                run_tenure, "top", "--once", "--json", "--sort", "grants", "--window", "300",
                "--limit", "10000", url=url,
            )  # fmt: skip
            assert by_grants.returncode == 0, by_grants.stderr
            every = json.loads(by_grants.stdout)
            assert every["node"] is None  # (every node's: the shared server's other tests too)
            ours = [stat["name"] for stat in every["names"] if stat["node"] == node]
            assert ours == ["busy", "calm"]
            table = await asyncio.to_thread(run_tenure, "top", node, "--once", url=url)
            assert table.returncode == 0, table.stderr
            assert f"the most contended names of node {node!r}, by wait" in table.stdout
            assert table.stdout.index("busy") < table.stdout.index("calm")
            streamed = await asyncio.to_thread(
                run_tenure, "top", node, "--json", "--count", "2", "--interval", "0.1", url=url
            )
            assert streamed.returncode == 0, streamed.stderr
            assert len(streamed.stdout.splitlines()) == 2


def test_top_of_a_missing_node_or_a_store_without_statistics_says_so(url: str, node: str) -> None:
    done = run_tenure("top", node, "--once", url=url)
    assert done.returncode != 0
    assert "does not exist" in one_error_line(done)
    memory = run_tenure("top", "--once", url="memory://")
    assert memory.returncode == 0, memory.stderr
