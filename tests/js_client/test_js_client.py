"""The TypeScript client (``clients/js``, npm package ``tenure-client``) in the test command.

``npm ci`` installs the exact versions of its ``package-lock.json`` from the npm
registry, ``npm test`` compiles it with ``tsc --strict`` and runs node's test runner
(``node --test``) against real ``tenure serve`` processes that the JS tests start
with this interpreter (``TENURE_PYTHON``); the same for ``clients/js/effect``
(``tenure-effect-distributed-lock``: effect-distributed-lock over tenure).

The cross-language tests put a Python holder and a JS waiter
(``clients/js/test/cross_waiter.ts``) on one mutex, and hand a hold from Python to JS
and from JS to Python (``clients/js/test/handoff_peer.ts``: the same ``h1.`` string).
The failover test holds a lock from JS (``clients/js/test/cluster_holder.ts``)
through a three-member cluster (over the run's etcd, leases of 2 s) whose leader is
killed with SIGKILL. Installing and building both packages: ``npm.py``.

Where node or npm is missing, or older than the package's ``engines.node``, the
tests skip, saying so, on a developer's machine and *fail* under ``CI=true``
(:func:`tests.servers.require`): CI never goes green by not testing.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest

import tenure
from tenure.errors import LeaseLostError
from tests.cluster.harness import TenureCluster
from tests.etcd.cluster import EtcdCluster
from tests.etcd.fixtures import require_etcd
from tests.js_client.npm import EFFECT_DIR, JS_DIR, NPM_CI_S, NPM_TEST_S, env, packages_ready, run
from tests.js_client.serving import serving

#: Bound of any one wait on the waiter's output.
WAIT_S: Final = 20.0


@pytest.fixture(scope="module")
def installed() -> Iterator[None]:
    """Both packages installed (``npm ci``: the lock files' exact versions, from the
    registry) and built, and left so while this module's tests run (``npm.py``)."""
    with packages_ready():
        yield


def _passed(done: subprocess.CompletedProcess[str], at_least: int) -> None:
    """node:test's summary says at least ``at_least`` passed, and nothing else happened."""
    summary = dict(
        line.removeprefix("# ").split(" ", 1)
        for line in done.stdout.splitlines()
        if line.startswith("# ")
        and line.removeprefix("# ").split(" ")[0]
        in {"pass", "fail", "skipped", "todo", "cancelled"}
    )
    assert int(summary["pass"]) >= at_least, done.stdout
    assert (summary["fail"], summary["skipped"], summary["todo"], summary["cancelled"]) == (
        "0",
        "0",
        "0",
        "0",
    ), done.stdout


@pytest.mark.timeout(NPM_CI_S + NPM_TEST_S)
def test_npm_test_passes(installed: None) -> None:
    """``npm test``: tsc --strict, then every node:test file, none failing or skipped
    (its cluster test needs etcd: skipped here without it, failed under ``CI=true``)."""
    require_etcd()
    _passed(run(["npm", "test"], NPM_TEST_S), at_least=46)


@pytest.mark.timeout(2 * NPM_CI_S + NPM_TEST_S)
def test_the_effect_backing_passes_the_seed_scenarios(installed: None) -> None:
    """``npm test`` of ``clients/js/effect``: effect-distributed-lock 0.0.11 itself, from
    the registry, on every scenario of its README over tenure, crashes (SIGKILLed
    child processes) and arrival order included."""
    _passed(run(["npm", "test"], NPM_TEST_S, EFFECT_DIR), at_least=21)


class Waiter:
    """The JS waiter process: its JSON lines, read as they come (each wait bounded)."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    async def next(self, event: str) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = await asyncio.wait_for(self.process.stdout.readline(), WAIT_S)
        assert line, f"the waiter ended before {event!r}: {await self._stderr()}"
        said: dict[str, Any] = json.loads(line)
        assert said["event"] == event, said
        return said

    async def tell(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(f"{line}\n".encode())
        await self.process.stdin.drain()

    async def _stderr(self) -> str:
        assert self.process.stderr is not None
        return (await self.process.stderr.read()).decode(errors="replace")


@pytest.mark.timeout(NPM_CI_S + 60)
async def test_a_python_holder_and_a_js_waiter_share_one_queue_and_one_token_sequence(
    installed: None, tmp_path: Path
) -> None:
    """Python holds; a JS waiter queues, then a Python waiter: served in arrival order
    (JS, then Python), each token greater than the one before, one sequence."""
    with serving(tmp_path / "data", "--fsync", "off") as server:
        url = f"tenure://127.0.0.1:{server.port}"
        async with tenure.connect(url) as client:
            await client.create_node("cross")
            holder = await client.session("cross")
            later = await client.session("cross")
            first = await holder.mutex("shared").lock()
            process = await asyncio.create_subprocess_exec(
                "node",
                str(JS_DIR / "dist" / "test" / "cross_waiter.js"),
                url,
                "cross",
                "shared",
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=env(),
            )
            waiter = Waiter(process)
            try:
                js_session = (await waiter.next("session"))["id"]
                await waiter.next("asked")
                semaphore = holder.semaphore("shared")
                await _until_waiters(semaphore, [js_session])
                python_turn = asyncio.create_task(later.mutex("shared").lock())
                await _until_waiters(semaphore, [js_session, later.id])

                await first.release()
                js_token = int((await waiter.next("granted"))["token"])
                assert not python_turn.done()  # the later arrival still waits
                state = await semaphore.describe(owners=True, waiters=True)
                assert [(o.session_id, o.token) for o in state.owners] == [(js_session, js_token)]
                await waiter.tell("release")
                await waiter.next("released")
                second = await asyncio.wait_for(python_turn, WAIT_S)
                await waiter.next("done")
                assert first.token < js_token < second.token
                await second.release()
                assert await asyncio.wait_for(process.wait(), WAIT_S) == 0
            finally:
                if process.returncode is None:
                    process.kill()
                    await process.wait()


async def test_a_python_process_resumes_a_js_session_by_its_ticket(
    installed: None, tmp_path: Path
) -> None:
    """A JS process holds a lock and exits without closing (as a crash would); Python
    resumes the session by the JS ticket: the same session, its hold, the same token."""
    with serving(tmp_path / "data", "--fsync", "off") as server:
        url = f"tenure://127.0.0.1:{server.port}"
        async with tenure.connect(url) as client:
            await client.create_node("tickets")
            done = await asyncio.to_thread(
                subprocess.run,
                ["node", str(JS_DIR / "dist" / "test" / "ticket_holder.js"), url, "tickets"],
                env=env(),
                capture_output=True,
                text=True,
                timeout=WAIT_S,
                check=False,
            )
            assert done.returncode == 0, done.stderr
            held = json.loads(done.stdout)
            session = await client.session("tickets", resume=held["ticket"])
            assert session.id == held["session"]
            assert [(lease.name, lease.token) for lease in session.leases()] == [
                ("handed", int(held["token"]))
            ]
            await session.close()


async def _until_waiters(semaphore: Any, sessions: list[int]) -> None:
    """Until the semaphore's waiters are ``sessions``, in this order (bounded)."""
    for _ in range(int(WAIT_S / 0.02)):
        state = await semaphore.describe(waiters=True)
        if [w.session_id for w in state.waiters] == sessions:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"waiters never became {sessions}: {state.waiters}")


#: The wait for the new leader and the client's move (leases of 2 s).
FAILOVER_S = 30.0


@pytest.mark.timeout(NPM_CI_S + 90)
async def test_a_js_lock_survives_the_leader_killed_and_tokens_never_go_back(
    installed: None, tmp_path: Path, etcd_member: EtcdCluster
) -> None:
    with TenureCluster(tmp_path / "cluster", etcd_member.endpoints) as cluster:
        url = cluster.url()
        process = await asyncio.create_subprocess_exec(
            "node",
            str(JS_DIR / "dist" / "test" / "cluster_holder.js"),
            url,
            "failover",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env(),
        )
        holder = Waiter(process)
        try:
            granted = await holder.next("granted")
            first = int(granted["token"])
            async with (
                tenure.connect(url) as client,
                client.session("failover", recovery_window=20.0) as session,
            ):
                waiting = asyncio.ensure_future(session.mutex("job").lock())
                await _until_queued(session, "job")

                old = cluster.leader()
                await asyncio.to_thread(old.kill)  # SIGKILL
                new = await asyncio.to_thread(cluster.leader, excluding=old)
                assert new is not old

                await holder.tell("check")
                checked = await asyncio.wait_for(holder.next("checked"), FAILOVER_S)
                assert checked["jobLost"] is False
                assert checked["sessionLost"] is False
                assert checked["jobOwners"] == [[granted["session"], str(first)]]
                other = int(checked["other"])
                assert other > first
                assert not waiting.done()  # still behind the JS holder
                await holder.next("released")
                lock = await asyncio.wait_for(waiting, WAIT_S)
                assert lock.token > other
                await lock.release()
            await holder.next("done")
            assert await asyncio.wait_for(process.wait(), WAIT_S) == 0
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()


async def _until_queued(session: tenure.Session, name: str) -> None:
    """Until ``session`` waits in ``name``'s queue (bounded)."""
    for _ in range(int(WAIT_S / 0.02)):
        state = await session.semaphore(name).describe(waiters=True)
        if [w.session_id for w in state.waiters] == [session.id]:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{name}: never queued")


async def _peer(url: str, node: str, *args: str) -> Waiter:
    """``clients/js/test/handoff_peer.ts`` with ``args`` (``adopt``, or ``offer NAME``)."""
    process = await asyncio.create_subprocess_exec(
        "node",
        str(JS_DIR / "dist" / "test" / "handoff_peer.js"),
        url,
        node,
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env(),
    )
    return Waiter(process)


async def _lost(lease: tenure.Lease) -> object:
    """The lease's loss error, once it ends."""
    return await lease.lost


async def _ended(peer: Waiter) -> None:
    """The peer releases what it holds and exits 0 (killed if it does not)."""
    try:
        await peer.tell("release")
        await peer.next("released")
        assert await asyncio.wait_for(peer.process.wait(), WAIT_S) == 0
    finally:
        if peer.process.returncode is None:
            peer.process.kill()
            await peer.process.wait()


async def test_a_hold_handed_off_by_python_is_adopted_by_js(
    installed: None, tmp_path: Path
) -> None:
    """Python's ``lease.handoff()`` string, adopted by ``session.adopt(text)`` in a JS
    process: the Python lease ends lost, the JS lease holds the same count and data
    under a greater token; the Python waiter queued meanwhile keeps its place."""
    with serving(tmp_path / "data", "--fsync", "off") as server:
        url = f"tenure://127.0.0.1:{server.port}"
        async with tenure.connect(url) as client:
            await client.create_node("handing")
            producer = await client.session("handing")
            waiting = await client.session("handing")
            await producer.semaphore("gpus").create(limit=2)
            lease = await producer.semaphore("gpus").acquire(2, data=b"job-7")
            queued = asyncio.ensure_future(waiting.semaphore("gpus").acquire(1))
            peer = await _peer(url, "handing", "adopt")
            try:
                js_session = (await peer.next("session"))["id"]
                await peer.tell(await lease.handoff())
                adopted = await peer.next("adopted")
                assert (adopted["name"], adopted["count"]) == ("gpus", "2")
                assert int(adopted["token"]) > lease.token
                assert isinstance(await asyncio.wait_for(_lost(lease), WAIT_S), LeaseLostError)
                state = await producer.semaphore("gpus").describe(owners=True, waiters=True)
                assert [(o.session_id, o.count, o.data) for o in state.owners] == [
                    (js_session, 2, b"job-7")
                ]
                assert [w.session_id for w in state.waiters] == [waiting.id]
                assert not queued.done()
            finally:
                await _ended(peer)
            permit = await asyncio.wait_for(queued, WAIT_S)
            assert permit.token > int(adopted["token"])
            await permit.release()


async def test_a_hold_handed_off_by_js_is_adopted_by_python(
    installed: None, tmp_path: Path
) -> None:
    """A JS ``lease.handoff()`` string, adopted by Python's ``session.adopt``: the JS
    lease's signal fires with a LeaseLostError, Python holds under a greater token;
    the string adopts once."""
    with serving(tmp_path / "data", "--fsync", "off") as server:
        url = f"tenure://127.0.0.1:{server.port}"
        async with tenure.connect(url) as client:
            await client.create_node("handing")
            worker = await client.session("handing")
            await worker.semaphore("jobs").create(limit=1)
            peer = await _peer(url, "handing", "offer", "jobs")
            try:
                await peer.next("session")
                offered = await peer.next("offered")
                permit = await worker.adopt(offered["text"])
                assert permit.token > int(offered["token"])
                assert (permit.name, permit.count) == ("jobs", 1)
                lost = await peer.next("lost")
                assert lost["reason"] == "LeaseLostError"
                assert "handed off" in lost["message"]
                other = await client.session("handing")
                with pytest.raises(LeaseLostError):
                    await other.adopt(offered["text"])
                state = await worker.semaphore("jobs").describe(owners=True)
                assert [(o.session_id, o.data) for o in state.owners] == [(worker.id, b"from-js")]
                await permit.release()
            finally:
                await _ended(peer)
