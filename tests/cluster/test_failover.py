"""A cluster losing its leader: clients move, sessions and holds survive, tokens go on.

Real servers over a real etcd (the run's member); leases of 2 s, so a dead leader
is replaced in about 2-3 s.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import tenure
from tenure.errors import LeaseLostError
from tests.cluster.harness import TenureCluster, until
from tests.etcd.cluster import EtcdCluster

WINDOW = 20.0


async def test_a_lock_held_through_the_leader_killed_stays_held_and_the_next_token_is_greater(
    cluster: TenureCluster,
) -> None:
    url = cluster.url()
    async with tenure.connect(url) as one, tenure.connect(url) as two:
        await one.create_node("app", exist_ok=True)
        async with one.session("app", recovery_window=WINDOW) as first:
            lock = await first.mutex("job").lock()
            token = lock.token
            async with two.session("app", recovery_window=WINDOW) as second:
                waiting = asyncio.ensure_future(second.mutex("job").lock())
                await asyncio.sleep(0.2)
                assert not waiting.done()  # FIFO: it waits behind the holder

                old = cluster.leader()
                await asyncio.to_thread(old.kill)
                new = await asyncio.to_thread(cluster.leader, excluding=old)
                assert new is not old

                # The holder's session moved to the new leader with its hold: it can
                # still work under the lock, and the waiter still waits.
                assert lock.lost_reason is None
                other = await first.mutex("other").lock()
                assert other.token > token
                assert not waiting.done()
                await lock.release()  # on the new leader
                granted = await asyncio.wait_for(waiting, 30)
                assert granted.token > other.token
                await granted.release()


async def test_a_hand_off_survives_the_leader_killed_both_adopted_and_only_offered(
    cluster: TenureCluster,
) -> None:
    url = cluster.url()
    async with tenure.connect(url) as one, tenure.connect(url) as two:
        await one.create_node("app", exist_ok=True)
        async with (
            one.session("app", recovery_window=WINDOW) as producer,
            two.session("app", recovery_window=WINDOW) as worker,
        ):
            first = await producer.mutex("first").lock()
            moved = await worker.adopt(await first.handoff())  # adopted before the kill
            lock = await producer.mutex("job").lock(data=b"job-7")
            text = await lock.handoff()  # only offered before the kill

            old = cluster.leader()
            await asyncio.to_thread(old.kill)
            await asyncio.to_thread(cluster.leader, excluding=old)

            # The new leader replayed both: the adoption stands, and the offer adopts.
            assert moved.held

            async def first_lost() -> bool:
                return isinstance(first.lost_reason, LeaseLostError)

            await until(first_lost, "the first lease hears it was handed off")
            adopted = await worker.adopt(text)
            assert adopted.token > lock.token > moved.token
            assert adopted.data == b"job-7"

            async def lost() -> bool:
                return isinstance(lock.lost_reason, LeaseLostError)

            await until(lost, "the producer's lease hears it was handed off")
            with pytest.raises(LeaseLostError):
                await producer.adopt(text)  # once only, on the new leader too
            await adopted.release()
            await moved.release()


async def test_a_max_hold_survives_the_leader_killed_and_ends_the_lock_on_the_next_one(
    cluster: TenureCluster,
) -> None:
    """The grant's end is in the journal the next leader replays (issue 50): held
    through the failover (a leader's downtime is not counted), then ended at its
    max_hold by the new leader, whose waiter gets a greater token."""
    url = cluster.url()
    async with tenure.connect(url) as one, tenure.connect(url) as two:
        await one.create_node("app", exist_ok=True)
        async with one.session("app", recovery_window=WINDOW) as first:
            lock = await first.mutex("job", max_hold=5.0).lock()
            async with two.session("app", recovery_window=WINDOW) as second:
                waiting = asyncio.ensure_future(second.mutex("job").lock())
                old = cluster.leader()
                await asyncio.to_thread(old.kill)
                new = await asyncio.to_thread(cluster.leader, excluding=old)
                assert new is not old
                other = await first.mutex("other").lock()  # on the new leader
                assert lock.lost_reason is None  # held through the failover
                reason = await asyncio.wait_for(lock.lost.wait(), 60)
                assert isinstance(reason, tenure.errors.LeaseLostError)
                assert "max_hold" in str(reason)
                assert first.lost_reason is None  # only the lock ended
                granted = await asyncio.wait_for(waiting, 30)
                assert granted.token > other.token > lock.token
                await granted.release()
                await other.release()


async def test_a_graceful_stop_of_the_leader_hands_over_and_clients_follow(
    cluster: TenureCluster,
) -> None:
    async with tenure.connect(cluster.url()) as client:
        await client.create_node("app", exist_ok=True)
        async with client.session("app", recovery_window=WINDOW) as session:
            async with session.mutex("a") as lock:
                before = lock.token
            old = cluster.leader()
            code = await asyncio.to_thread(old.stop)
            assert code == 0, old.output()[-2000:]
            assert '"cluster_stepped_down"' in old.output(this_start=True)
            await asyncio.to_thread(cluster.leader, excluding=old)
            async with session.mutex("a") as lock:
                assert lock.token > before


async def test_every_member_restarted_at_once_keeps_the_state_and_the_sessions(
    cluster: TenureCluster,
) -> None:
    async with tenure.connect(cluster.url()) as client:
        await client.create_node("app", exist_ok=True)
        async with client.session("app", recovery_window=WINDOW) as session:
            pool = session.semaphore("pool")
            await pool.create(limit=3, data=b"three", exist_ok=True)
            held = await pool.acquire(count=2)
            for server in cluster.servers:
                server.kill()
            for server in cluster.servers:
                await asyncio.to_thread(server.start, wait=False)
            for server in cluster.servers:
                await asyncio.to_thread(server.wait_listening)
            await asyncio.to_thread(cluster.leader)
            described = await pool.describe(owners=True)
            assert described.data == b"three"
            assert described.count == 2
            assert [owner.token for owner in described.owners] == [held.token]
            assert held.lost_reason is None
            async with session.mutex("after") as lock:
                assert lock.token > held.token
            await held.release()


async def test_a_paused_leader_is_replaced_and_steps_down_when_it_wakes(
    cluster: TenureCluster,
) -> None:
    old = cluster.leader()
    old.pause()
    try:
        new = await asyncio.to_thread(cluster.leader, excluding=old)
        # A new client: the paused door accepts TCP but never answers its Hello, so it
        # is given up after connect_timeout and the next door tried.
        async with tenure.connect(cluster.url(), connect_timeout=2) as client:
            await client.create_node("app", exist_ok=True)
            opened = client.session("app", recovery_window=WINDOW)
            async with opened as session, session.mutex("while-paused") as lock:
                assert lock.token > 0
    finally:
        old.resume()

    # Awake, it finds its lease ended: it steps down, serves nothing, and stands by
    # behind the new leader (it once exited instead, when its revoke of the lease etcd
    # had ended was answered "lease not found": tools/faults/findings.md, cluster 1).
    async def stepped_down() -> bool:
        return '"cluster_stepped_down"' in old.output(this_start=True)

    async def behind_the_new_leader() -> bool:
        return (await cluster.status(old)).leader == new.address

    await until(stepped_down, "the old leader steps down")
    await until(behind_the_new_leader, "the old leader names the new one")
    assert old.running, old.output(this_start=True)[-1500:]
    assert not old.ready()
    assert cluster.leader() is new


async def test_a_standby_relays_dflockd_connections_to_the_leader(
    cluster: TenureCluster,
) -> None:
    """One lock whichever member a dflockd client reaches: a standby relays its
    connection to the leader (tenure.server._net.relay), which serves it."""
    leader = cluster.leader()
    standby = cluster.standbys()[0]
    reader, writer = await asyncio.open_connection("127.0.0.1", standby.port)
    writer.write(b"l\njob\n10 60\n")
    held = await asyncio.wait_for(reader.readline(), 10)
    assert held.startswith(b"ok "), held
    leaders_reader, leaders_writer = await asyncio.open_connection("127.0.0.1", leader.port)
    leaders_writer.write(b"l\njob\n0 60\n")  # (no wait: the standby's client holds it)
    assert await asyncio.wait_for(leaders_reader.readline(), 10) == b"timeout\n"
    writer.write(f"r\njob\n{held.split()[1].decode()}\n".encode())
    assert await asyncio.wait_for(reader.readline(), 10) == b"ok\n"
    leaders_writer.write(b"l\njob\n10 60\n")
    answer = await asyncio.wait_for(leaders_reader.readline(), 10)
    assert answer.startswith(b"ok "), answer
    writer.close()
    leaders_writer.close()


async def test_a_dflockd_token_from_the_old_leader_is_good_on_the_new_one(
    tmp_path: Path, etcd_member: EtcdCluster
) -> None:
    extra = ("--dflockd-auto-release", "false")  # the grant outlives its connection
    with TenureCluster(tmp_path / "cluster", etcd_member.endpoints, extra=extra) as cluster:
        old = cluster.leader()
        reader, writer = await asyncio.open_connection("127.0.0.1", old.port)
        writer.write(b"l\njob\n10 60\n")
        granted = (await asyncio.wait_for(reader.readline(), 10)).decode().split()
        writer.close()
        assert granted[0] == "ok", granted
        token = granted[1]
        await asyncio.to_thread(old.kill)
        new = await asyncio.to_thread(cluster.leader, excluding=old)
        reader, writer = await asyncio.open_connection("127.0.0.1", new.port)
        # Signed with the cluster's secret, not the old leader's own: it renews and releases.
        writer.write(f"n\njob\n{token} 30\n".encode())
        assert await asyncio.wait_for(reader.readline(), 10) == b"ok 30\n"
        writer.write(f"r\njob\n{token}\n".encode())
        assert await asyncio.wait_for(reader.readline(), 10) == b"ok\n"
        writer.close()


async def test_a_prefix_cache_lists_again_on_the_next_leader(cluster: TenureCluster) -> None:
    """Watches are the connection's (a new leader has none): the cache's session
    re-attaches there, arms its prefix watch again and lists the prefix again."""
    url = cluster.url()
    async with tenure.connect(url) as client, tenure.connect(url) as writer_client:
        await client.create_node("app", exist_ok=True, recovery_window=WINDOW)
        writer = await writer_client.session("app", recovery_window=WINDOW)
        await writer.semaphore("config/a").create(1, b"1")
        async with client.cache("app", prefix="config/") as cache:
            changes = cache.changes()
            old = cluster.leader()
            await asyncio.to_thread(old.kill)
            await asyncio.to_thread(cluster.leader, excluding=old)
            await writer.semaphore("config/a").update(b"2")
            await writer.semaphore("config/b").create(1, b"b")
            told: dict[str, bytes | None] = {}
            while len(told) < 2:
                change = await asyncio.wait_for(anext(changes), 30)
                told[change.name] = None if change.view is None else change.view.data
            assert told == {"config/a": b"2", "config/b": b"b"}
            await writer.semaphore("config/a").update(b"3")  # the new leader pushes it
            change = await asyncio.wait_for(anext(changes), 30)
            assert change.view is not None
            assert (change.name, change.view.data) == ("config/a", b"3")


async def test_a_client_leaves_a_paused_leader_for_the_new_one_while_it_is_still_stopped(
    cluster: TenureCluster,
) -> None:
    """A stopped leader closes nothing: its clients ask the other members once a Ping
    waited a ping interval, and go to the leader a standby names, without waiting for
    the old one to wake (before: they stayed until it did)."""
    async with tenure.connect(cluster.url(), connect_timeout=30) as client:
        await client.create_node("app", exist_ok=True)
        # A Ping every 2 s; a window long enough that only the move can serve the lock.
        async with client.session("app", recovery_window=8.0) as session:
            async with session.mutex("before") as lock:
                before = lock.token
            old = cluster.leader()
            old.pause()
            try:
                new = await asyncio.to_thread(cluster.leader, excluding=old)
                lock = await asyncio.wait_for(session.mutex("while-paused").lock(), 30)
                assert _stopped(old.pid), "the old leader woke before the grant"
                assert lock.token > before
                assert (await cluster.status(new)).leader == new.address
                await lock.release()
            finally:
                old.resume()


def _stopped(pid: int | None) -> bool:
    """Whether process ``pid`` is stopped (SIGSTOP): its state in /proc is ``T``."""
    assert pid is not None
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] == "T"
