"""``tenure describe`` (and ``watch``) say which recipe a semaphore is and its facts:
each recipe made for real on the shared ``tenure serve`` by the API, then read by the
installed ``tenure`` executable, as a user would."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

import tenure
from tenure._core.rates import parse_bucket
from tenure.errors import NotFoundError
from tests.cli.support import run_tenure

#: A bound against a hang: each recipe is read by two ``tenure`` processes, and
#: test_describe_shows_each_recipe_and_its_facts took 46 s of the 60 it had in a CI
#: run under a CPU hog.
pytestmark = pytest.mark.timeout(240)


async def described(url: str, node: str, name: str) -> tuple[dict[str, Any], str]:
    """``tenure describe NODE NAME``: its JSON document and its text (run in a thread:
    the sessions of this loop keep their connections meanwhile)."""
    as_json = await asyncio.to_thread(run_tenure, "describe", node, name, "--json", url=url)
    assert as_json.returncode == 0, as_json.stderr
    as_text = await asyncio.to_thread(run_tenure, "describe", node, name, url=url)
    assert as_text.returncode == 0, as_text.stderr
    doc: dict[str, Any] = json.loads(as_json.stdout)
    return doc, as_text.stdout


async def tat_of(session: tenure.Session, name: str) -> float:
    """The TAT in rate limiter ``name``'s data."""
    return parse_bucket(name, (await session.semaphore(name).describe()).data).tat


async def until(check: Any, what: str) -> None:
    """Wait (bounded) until ``check()`` (a coroutine function) is true."""
    for _ in range(200):
        if await check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"never: {what}")


async def test_describe_shows_each_recipe_and_its_facts(url: str, node: str) -> None:
    async with tenure.connect(url) as client:
        await client.create_node(node)
        async with (
            client.session(node) as one,
            client.session(node) as two,
            client.session(node) as three,
        ):
            # A readers-writer lock: two readers hold it, a writer waits.
            readers = [await s.rwlock("catalog").read() for s in (one, two)]
            writing = asyncio.ensure_future(three.rwlock("catalog").write())

            async def writer_queued() -> bool:
                found = await one.rwlock("catalog").describe()
                return len(found.waiters) == 1

            await until(writer_queued, "the writer queued")
            doc, text = await described(url, node, "catalog")
            assert doc["recipe"] == {
                "kind": "rwlock",
                "readers": 2,
                "writer": False,
                "readers_waiting": 0,
                "writers_waiting": 1,
            }
            assert "rwlock: 2 readers holding, 1 writer waiting" in text
            for reader in readers:
                await reader.release()
            await (await writing).release()

            # A rate limiter, 60 of its 100 units reserved just now.
            limiter = one.rate_limiter("partner-api", rate=50.0, burst=100)
            before = time.time()
            await limiter.acquire(60)
            after = time.time()
            doc, text = await described(url, node, "partner-api")
            recipe = doc["recipe"]
            assert (recipe["kind"], recipe["rate"], recipe["burst"]) == ("rate_limiter", 50.0, 100)
            # TAT is 1.2 s past the reservation, made between those two readings
            # (a little slack: the server's clock is read apart from this process's).
            assert before + 1.2 - 0.5 <= recipe["tat"] <= after + 1.2 + 0.5
            assert 40.0 <= recipe["available"] <= 100.0
            assert recipe["backlog"] == 0.0
            assert "rate limiter: 50/s, burst 100, " in text
            assert " available now" in text
            # Reserved past the burst: a backlog, and none available. Of 1 unit in
            # 4 s, burst 2: 2 units now, then two reservations of 2 that wait (made
            # at once in the store; their acquires sleep until their turn). Seconds,
            # not fractions: each `tenure describe` starts a Python process, which
            # took seconds on a loaded machine (a 1 s unit's backlog ran out there).
            slow = one.rate_limiter("slow-api", rate=0.25, burst=2)
            started = time.time()
            await slow.acquire(2)
            first_tat = await tat_of(one, "slow-api")
            queued = [asyncio.ensure_future(slow.acquire(2, timeout=60)) for _ in range(2)]

            async def reserved() -> bool:
                return await tat_of(one, "slow-api") >= first_tat + 16.0

            await until(reserved, "both reservations made")
            doc, text = await described(url, node, "slow-api")
            # 16 s of reservations past the burst's 8 s, less the time taken since.
            elapsed = time.time() - started
            assert doc["recipe"]["available"] == 0.0
            assert 16.0 - elapsed - 0.5 <= doc["recipe"]["backlog"] <= 16.0
            assert "rate limiter: 0.25/s, burst 2, backlog " in text
            assert "(none available)" in text
            for acquire in queued:
                acquire.cancel()

            # A barrier of 3 parties, 2 arrived, no round passed yet.
            waiting = [
                asyncio.ensure_future(s.barrier("stage-2", parties=3).wait(timeout=30))
                for s in (one, two)
            ]

            async def two_arrived() -> bool:
                try:
                    state = await one.semaphore("stage-2").describe(owners=True)
                except NotFoundError:
                    return False  # not made yet
                return len(state.owners) == 2

            await until(two_arrived, "two parties arrived")
            doc, text = await described(url, node, "stage-2")
            assert doc["recipe"] == {
                "kind": "barrier",
                "rounds": 0,
                "last": 0,
                "arrived": 2,
                "parties": 3,
            }
            assert "barrier: 2/3 arrived, 0 rounds passed" in text
            await three.barrier("stage-2", parties=3).wait(timeout=30)
            await asyncio.gather(*waiting)
            doc, text = await described(url, node, "stage-2")
            assert (doc["recipe"]["rounds"], doc["recipe"]["arrived"]) == (1, 0)
            assert "1 round passed" in text

            # A counter and a latch: stored alike, said alike.
            await one.counter("jobs-done").add(41)
            doc, text = await described(url, node, "jobs-done")
            assert doc["recipe"] == {"kind": "counter", "value": 41}
            assert "counter or latch: 41" in text
            await one.latch("warmup", count=3).count_down()
            doc, text = await described(url, node, "warmup")
            assert doc["recipe"] == {"kind": "counter", "value": 2}
            assert "counter or latch: 2" in text

            # A mutex, and a semaphore whose data only looks like a counter's.
            async with one.mutex("job"):
                doc, text = await described(url, node, "job")
                assert doc["recipe"] == {"kind": "mutex"}
                assert doc["kind"] == "mutex"  # the field scripts already read is kept
            await one.semaphore("pool").create(limit=3, data=b"+41")
            doc, text = await described(url, node, "pool")
            assert doc["recipe"] == {"kind": "semaphore"}
            assert "counter" not in text

            # A claim: its token and the time it has left (at_least, then at_most).
            claim = await one.claim("nightly", at_least=60.0, at_most=600.0, data=b"host-a")
            assert claim is not None
            doc, text = await described(url, node, "nightly")
            recipe = doc["recipe"]
            assert (recipe["kind"], recipe["id"], recipe["token"]) == (
                "claim",
                claim.id,
                claim.token,
            )
            assert (recipe["at_least"], recipe["at_most"], recipe["data"]) == (
                60.0,
                600.0,
                "host-a",
            )
            assert recipe["ends_at"] == claim.granted_at + 600.0
            assert 590.0 < recipe["left"] <= 600.0  # (the describe ran within seconds)
            assert f"claim: token {claim.token}, 9 min " in text
            assert " left (at least " in text

            # `tenure watch` says it too, on its one line.
            watched = await asyncio.to_thread(
                run_tenure, "watch", node, "jobs-done", "--count", "1", url=url
            )
            assert watched.returncode == 0, watched.stderr
            assert "counter or latch: 41" in watched.stdout
            watched = await asyncio.to_thread(
                run_tenure, "watch", node, "nightly", "--count", "1", url=url
            )
            assert watched.returncode == 0, watched.stderr
            assert f"claim: token {claim.token}, 9 min " in watched.stdout


async def test_describe_shows_a_groups_members_by_id_with_their_own_data(
    url: str, node: str
) -> None:
    # Issue 57: `tenure describe` printed each member's hold as the record it is kept
    # in ("member joined 8:worker-1 - 10.0.0.5:8080"). It shows the member, as the
    # dashboard does: its id, state and weight, and its own data.
    async with tenure.connect(url) as client:
        await client.create_node(node)
        async with (
            client.session(node) as session,
            session.group("workers").join("worker-1", b"10.0.0.5:8080"),
            session.group("workers").partition("worker-2", weight=2, data=b"10.0.0.6:8080"),
        ):
            doc, text = await described(url, node, "workers")
    assert "member joined" not in text
    rows = [[cell.strip() for cell in line.split("│")] for line in text.splitlines()]
    header = next(line for line in text.splitlines() if "member" in line and "┃" in line)
    columns = [cell.strip() for cell in header.split("┃")]
    assert columns[5:9] == ["member", "state", "weight", "held for"], columns
    members = {row[5]: row for row in rows if len(row) == len(columns)}
    assert (members["worker-1"][6:8], members["worker-1"][-1]) == (["joined", "-"], "10.0.0.5:8080")
    assert (members["worker-2"][6:8], members["worker-2"][-1]) == (["joined", "2"], "10.0.0.6:8080")
    # --json keeps each hold's data exact, and names the member beside it.
    by_id = {owner["member"]["id"]: owner for owner in doc["owners"]}
    assert by_id["worker-1"]["data"] == "member joined 8:worker-1 - 10.0.0.5:8080"
    assert by_id["worker-1"]["member"] == {
        "id": "worker-1",
        "state": "joined",
        "weight": None,
        "data": "10.0.0.5:8080",
        "data_base64": "MTAuMC4wLjU6ODA4MA==",
    }
    assert (by_id["worker-2"]["member"]["weight"], by_id["worker-2"]["member"]["data"]) == (
        2,
        "10.0.0.6:8080",
    )
