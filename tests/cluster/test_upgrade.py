"""A rolling upgrade of a running cluster, from an earlier commit's build to this tree's.

The old build is the last commit before protocol version 6 (:data:`OLD_COMMIT`), taken
from this repository's history (``git archive``) and run as the pure build with the
same third-party packages: a server of protocol version 5, journal records without
an actor or a task, snapshots of layout 8. Three members of it over a real etcd,
clients of this tree holding and waiting for a lock; then each member is stopped
and started again on this tree's build, one at a time, in the order
docs/operations.md ("Versions and upgrades") gives: the standbys first, the leader
last. Throughout, the holder keeps its hold, nobody else holds the lock meanwhile
and no token handed out is lower than one handed out before; at the end the newer
protocol's commands work. The wrong order (a newer leader over an older standby)
is shown too: the older member stops following, and never serves.
"""

from __future__ import annotations

import asyncio
import io
import json
import subprocess
import tarfile
from pathlib import Path
from typing import Final

import pytest

import tenure
from tenure import Capability
from tenure._protocol.messages import Refused, Welcome
from tenure.testing import Recorder
from tests.cluster.harness import ClusterServer, TenureCluster, until
from tests.etcd.cluster import EtcdCluster
from tests.server.wire import WireClient

#: The parent of 5cdaafc ("protocol version 6: WatchPrefix..."), the first commit of
#: protocol version 6 (``git log -S"PROTOCOL_VERSION: Final = 6" -- src/tenure/_protocol``
#: lists it last): the newest build of protocol version 5.
OLD_COMMIT: Final = "b11de5d7dd4a2ebd6523169f03e49f85c833c12d"
OLD_VERSION: Final = 5
ROOT: Final = Path(__file__).resolve().parents[2]
WINDOW: Final = 30.0  # every session's recovery window: each restart fits in it
#: Snapshots every few records, so that members start from the old build's snapshots.
EXTRA: Final = ("--cluster-snapshot-every", "8")


def old_build(into: Path) -> dict[str, str]:
    """The old commit's ``src`` written under ``into``: the environment that runs it.

    Fails (never skips) when this clone lacks the commit: a shallow clone must not
    pass this test by not running it.
    """
    found = subprocess.run(
        ["git", "-C", str(ROOT), "cat-file", "-e", f"{OLD_COMMIT}^{{commit}}"],
        capture_output=True,
        check=False,
    )
    if found.returncode != 0:
        pytest.fail(
            f"commit {OLD_COMMIT} (the last before protocol version 6) is not in this "
            f"clone's history ({found.stderr.decode(errors='replace').strip()}): the "
            "upgrade test builds the old server from it. A shallow clone lacks it: clone "
            "with the whole history (no --depth), or `git fetch --unshallow`.",
            pytrace=False,
        )
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", OLD_COMMIT, "src"],
        capture_output=True,
        check=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    messages = (into / "src/tenure/_protocol/messages.py").read_text()
    assert f"PROTOCOL_VERSION: Final = {OLD_VERSION}\n" in messages
    # The pure build: nothing compiled lies in an archive of sources.
    return {"PYTHONPATH": str(into / "src")}


async def speaks_current(server: ClusterServer) -> bool:
    """Whether ``server`` greets a Hello of this tree's protocol version (an older
    build refuses it, UNSUPPORTED)."""
    reader, writer = await asyncio.open_connection(server.host, server.port)
    try:
        answer = await WireClient(reader, writer).hello()
    finally:
        writer.close()
    assert isinstance(answer, Welcome | Refused), answer
    return isinstance(answer, Welcome)


def loaded_snapshot(server: ClusterServer) -> int:
    """The index of the snapshot ``server``'s latest start loaded (0: none)."""
    lines = server.output(this_start=True).splitlines()
    loads = [json.loads(line) for line in lines if '"cluster_loaded"' in line]
    assert loads, f"member {server.index} loaded nothing"
    return int(loads[0]["snapshot"])


class Tokens:
    """Every token a client was handed, in the order it was handed: never lower than
    one before it."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, int]] = []

    def saw(self, what: str, token: int) -> int:
        """Note ``token``, handed out for ``what``; it must exceed every one before."""
        if self.seen:
            last_what, last = max(self.seen, key=lambda item: item[1])
            assert token > last, f"{what} got token {token} after {last_what} got {last}"
        self.seen.append((what, token))
        return token


class Upgrade:
    """The members upgraded one at a time in the documented order (docs/operations.md
    "Versions and upgrades"), while ``holder`` holds ``lock``."""

    def __init__(self, cluster: TenureCluster, holder: tenure.Session, lock: tenure.Lock) -> None:
        self.cluster, self.holder, self.lock = cluster, holder, lock
        self.tokens = Tokens()
        self.tokens.saw("the holder", lock.token)

    async def run(self, waiting: asyncio.Future[tenure.Lock]) -> None:
        """Upgrade every member, standbys first, the leader last; after each, journal
        traffic through the cluster as it is then, the hold kept, ``waiting`` still
        waiting."""
        cluster = self.cluster
        await self.step("old", waiting)
        leader = cluster.leader()
        order = [*(s for s in cluster.servers if s is not leader), leader]
        for number, server in enumerate(order):
            code = await asyncio.to_thread(server.stop)
            assert code == 0, server.output()[-3000:]
            server.env = {}  # this tree's build
            await asyncio.to_thread(server.start)
            assert await speaks_current(server), f"member {server.index} is not new"

            async def caught_up(server: ClusterServer = server) -> bool:
                """A standby again, holding every entry (operations.md's step 2)."""
                view = await cluster.status(server)
                me = next(m for m in view.members if m.address == server.address)
                return bool(view.leader) and me.role == "standby" and me.applied >= view.index

            await until(caught_up, f"member {server.index} follows the log again")
            if server is not leader:  # it started from the old leader's snapshot
                assert loaded_snapshot(server) > 0, server.output(this_start=True)[-3000:]
            # The leader is the old build's until its own turn.
            now_leading = await asyncio.to_thread(cluster.leader)
            assert (now_leading is leader) == (server is not leader)
            await self.step(f"upgraded-{number}", waiting)

    async def step(self, label: str, waiting: asyncio.Future[tenure.Lock]) -> None:
        """A persistent semaphore made and three mutexes held and released; the hold
        kept, the waiter still waiting."""
        holder = self.holder
        await holder.semaphore(label).create(limit=1, data=label.encode())
        for number in range(3):
            async with holder.mutex(f"{label}-{number}") as other:
                self.tokens.saw(f"{label}-{number}", other.token)
        assert self.lock.lost_reason is None, f"{label}: {self.lock.lost_reason}"
        assert not waiting.done(), f"{label}: the waiter was granted a held lock"


async def watch_owners(semaphore: tenure.Semaphore, seen: list[tuple[int, ...]]) -> None:
    """Describe ``semaphore`` again and again, noting its owners' tokens each time."""
    while True:
        described = await semaphore.describe(owners=True)
        seen.append(tuple(owner.token for owner in described.owners))
        await asyncio.sleep(0.05)


async def test_a_rolling_upgrade_from_protocol_5_keeps_the_lock_held_and_tokens_rising(
    tmp_path: Path, etcd_member: EtcdCluster
) -> None:
    old = old_build(tmp_path / "old")
    cluster = TenureCluster(tmp_path / "cluster", etcd_member.endpoints, extra=EXTRA)
    for server in cluster.servers:
        server.env = dict(old)
    recorder, owners = Recorder(), list[tuple[int, ...]]()
    url = cluster.url()
    with cluster:
        for server in cluster.servers:
            assert not await speaks_current(server), f"member {server.index} is not old"
        async with (
            tenure.connect(url, observers=(recorder,)) as one,
            tenure.connect(url, observers=(recorder,)) as two,
        ):
            assert Capability.PREFIX_WATCH not in one.capabilities  # protocol 5
            await one.create_node("app", exist_ok=True)
            holder = await one.session("app", recovery_window=WINDOW)
            waiter = await two.session("app", recovery_window=WINDOW)
            watcher = await two.session("app", recovery_window=WINDOW)
            upgrade = Upgrade(cluster, holder, await holder.mutex("job").lock())
            waiting = asyncio.ensure_future(waiter.mutex("job").lock())
            watching = asyncio.ensure_future(watch_owners(watcher.semaphore("job"), owners))
            try:
                await upgrade.run(waiting)
                # Every member runs this tree, and the client speaks its protocol (it
                # moved to the new leader in it when the old one stopped).
                assert all([await speaks_current(server) for server in cluster.servers])
                assert Capability.PREFIX_WATCH in one.capabilities
                async with one.cache("app", prefix="upgraded-") as cache:
                    found = {name: entry.data for name, entry in cache.items()}
                    assert found == {f"upgraded-{n}": f"upgraded-{n}".encode() for n in range(3)}
                # A session opened now has them (one opened while a member spoke
                # version 5 keeps that version's abilities: docs/operations.md).
                async with one.session("app") as fresh:
                    claim = await fresh.claim("nightly", 0, 60)
                    assert claim is not None
                    upgrade.tokens.saw("a claim", claim.token)
                    await claim.release()

                # The waiter has waited all along; it gets the lock once released.
                # Until then the watcher saw the holder alone, through every restart.
                lock = upgrade.lock
                assert lock.lost_reason is None
                held_throughout = list(owners)
                await lock.release()
                granted = await asyncio.wait_for(waiting, 30)
                upgrade.tokens.saw("the waiter", granted.token)

                async def watcher_sees_the_waiter() -> bool:
                    return bool(owners) and owners[-1] == (granted.token,)

                await until(watcher_sees_the_waiter, "the watcher sees the waiter hold")
                await granted.release()
            finally:
                for task in (waiting, watching):
                    task.cancel()
                await asyncio.gather(waiting, watching, return_exceptions=True)

    recorder.assert_never_overlap("job")
    recorder.assert_linearizable()
    assert held_throughout, "the watcher saw nothing"
    assert set(held_throughout) == {(lock.token,)}, held_throughout
    assert all(len(held) <= 1 for held in owners), owners
    assert {held for held in owners if held} == {(lock.token,), (granted.token,)}


async def test_an_older_member_behind_a_newer_leader_stops_and_never_serves(
    tmp_path: Path, etcd_member: EtcdCluster
) -> None:
    old = old_build(tmp_path / "old")
    cluster = TenureCluster(tmp_path / "cluster", etcd_member.endpoints, extra=EXTRA)
    for server in cluster.servers:
        server.env = dict(old)
    with cluster:
        leader = cluster.leader()
        upgraded, behind = (s for s in cluster.servers if s is not leader)
        # The wrong order: one standby upgraded, then the newer build leads while an
        # older member still runs (here: the others stopped, the older one started
        # again once the newer one leads).
        for server in (upgraded, behind, leader):
            assert await asyncio.to_thread(server.stop) == 0, server.output()[-3000:]
        upgraded.env = {}
        await asyncio.to_thread(upgraded.start)
        assert await asyncio.to_thread(cluster.leader) is upgraded
        await asyncio.to_thread(behind.start, wait=False)

        async def loaded() -> bool:
            assert behind.running, behind.output()[-3000:]
            return '"cluster_loaded"' in behind.output(this_start=True)

        await until(loaded, "the older member loads the log so far")
        tokens = Tokens()
        async with tenure.connect(cluster.url()) as client:
            await client.create_node("app", exist_ok=True)
            async with client.session("app") as session:
                # What this tree's leader journals, the older build cannot read (an
                # Acquire with the asking task, version 6's): it stops following, and
                # exits, rather than stand by (or lead) on a state it no longer has.
                async with session.mutex("job") as lock:
                    tokens.saw("job", lock.token)

                    async def exited() -> bool:
                        return not behind.running

                    await until(exited, "the older member exits")
                    assert behind.proc is not None
                    assert behind.proc.returncode != 0
                    said = behind.output(this_start=True)
                    assert '"cluster_failed"' in said
                    # (an entry it cannot read; or a snapshot of a newer layout, had
                    # the leader written one before that entry reached it)
                    assert "is unreadable" in said or "not a tenure engine snapshot" in said
                    assert not behind.ready()
                    assert await asyncio.to_thread(cluster.leader) is upgraded
                    assert lock.lost_reason is None

                # The way out: the older member upgraded too; it joins and follows.
                behind.env = {}
                await asyncio.to_thread(behind.start)
                async with session.mutex("job") as lock:
                    tokens.saw("job again", lock.token)
                await asyncio.to_thread(upgraded.stop)
                assert await asyncio.to_thread(cluster.leader) is behind
                async with session.mutex("job") as lock:
                    tokens.saw("job on it", lock.token)
