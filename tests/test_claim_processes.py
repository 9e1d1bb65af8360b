"""Claims across processes: two processes race for each slot, and a worker process
releases by id the claim a producer process took, on every backend a process can
share (tenure://, etcd://, redis://, postgres://).

The conformance kit races two clients of one process (``test_claim``); here each
claimer is a process of its own, as replicas of a cron job are: started together,
told to go at once, they claim the same slots in the same order.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import tenure
from tests.etcd.cluster import EtcdCluster
from tests.redis.server import RedisServer
from tests.server.wire import ServerProcess

pytestmark = pytest.mark.timeout(120)

#: Slots each process tries, in order.
SLOTS = 40

#: A claimer: opens its session, says ready, waits for a line on stdin, then claims
#: slot-0 .. slot-N-1 in turn and says which it won.
CLAIMER = """
import asyncio, sys
import tenure

async def main(url, node, slots):
    async with tenure.connect(url) as client:
        async with client.session(node) as session:
            print("ready", flush=True)
            await asyncio.to_thread(sys.stdin.readline)
            for i in range(slots):
                claim = await session.claim(f"slot-{i}", at_least=60.0, at_most=600.0)
                if claim is not None:
                    print(f"won slot-{i} token {claim.token}", flush=True)

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""

#: A producer: claims the task's name and hands its id on (prints it), then exits
#: (the claim outlives its session and its process).
PRODUCER = """
import asyncio, sys
import tenure

async def main(url, node):
    async with tenure.connect(url) as client:
        async with client.session(node) as session:
            claim = await session.claim("task-17", at_least=0.0, at_most=600.0, data=b"task 17")
            again = await session.claim("task-17", at_least=0.0, at_most=600.0)
            print(f"claimed {claim.id} token {claim.token}; again: {again}", flush=True)

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""

#: A worker: releases the claim of the id it was handed, with no session of its own,
#: then finds the name free.
WORKER = """
import asyncio, sys
import tenure

async def main(url, node, claim_id):
    async with tenure.connect(url) as client:
        released = await client.release_claim(node, "task-17", claim_id)
        again = await client.release_claim(node, "task-17", claim_id)
        async with client.session(node) as session:
            free = await session.claim("task-17", at_least=0.0, at_most=600.0)
        print(f"released {released}, again {again}, free {free is not None}", flush=True)

asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
"""


@pytest.fixture(params=["tenure", "etcd", "redis", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A backend URL the test's processes share (a state of the test's own)."""
    prefix = uuid.uuid4().hex[:12]
    if request.param == "tenure":
        with ServerProcess(tmp_path / "data", "--fsync", "off") as server:
            yield f"tenure://127.0.0.1:{server.port}"
    elif request.param == "etcd":
        member: EtcdCluster = request.getfixturevalue("etcd_member")
        yield member.url(prefix=f"/tenure-claims/{prefix}/")
    elif request.param == "redis":
        redis: RedisServer = request.getfixturevalue("redis_server")
        yield f"{redis.url(0)}?prefix=claims-{prefix}:"
    else:
        yield request.getfixturevalue("postgres_database")


def new_node(url: str) -> str:
    """A node of the test's own, made before any process uses it."""
    node = f"claims-{uuid.uuid4().hex[:8]}"

    async def create() -> None:
        async with tenure.connect(url) as client:
            await client.create_node(node)

    asyncio.run(create())
    return node


def python(script: str, *args: str, stdin: int | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def output(proc: subprocess.Popen[str]) -> list[str]:
    """The lines ``proc`` printed, once it ended (bounded); it must have exited 0."""
    try:
        out, err = proc.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"a process did not end: {out} {err}") from None
    assert proc.returncode == 0, err
    return out.splitlines()


def test_two_processes_racing_for_each_slot_never_both_get_one(url: str) -> None:
    node = new_node(url)
    racers = [python(CLAIMER, url, node, str(SLOTS), stdin=subprocess.PIPE) for _ in range(2)]
    try:
        for racer in racers:
            assert racer.stdout is not None
            ready = racer.stdout.readline().strip()
            assert ready == "ready", (ready, racer.poll(), racer.stderr and racer.stderr.read())
        for racer in racers:  # go, both at once
            assert racer.stdin is not None
            racer.stdin.write("go\n")
            racer.stdin.flush()
        won = [output(racer) for racer in racers]
    finally:
        for racer in racers:
            if racer.poll() is None:
                racer.kill()
            racer.communicate()  # (closes its pipes)
    slots = [[re.fullmatch(r"won (slot-\d+) token (\d+)", line) for line in lines] for lines in won]
    assert all(match is not None for lines in slots for match in lines), won
    first = {m[1]: int(m[2]) for m in slots[0] if m is not None}
    second = {m[1]: int(m[2]) for m in slots[1] if m is not None}
    assert not set(first) & set(second), "a slot was claimed by both processes"
    assert set(first) | set(second) == {f"slot-{i}" for i in range(SLOTS)}
    tokens = [*first.values(), *second.values()]
    assert len(set(tokens)) == SLOTS


def test_a_worker_process_releases_by_id_the_claim_a_producer_process_took(url: str) -> None:
    node = new_node(url)
    (produced,) = output(python(PRODUCER, url, node))
    found = re.fullmatch(r"claimed ([0-9a-f]{32}) token (\d+); again: None", produced)
    assert found is not None, produced  # (the producer's second try was refused)
    (worked,) = output(python(WORKER, url, node, found[1]))
    assert worked == "released True, again False, free True"
