"""The etcd:// backend under faults, on a real three-member cluster (issue 12).

1. kill -9 of the leader (and then of a follower) while a lock is held and
   waiters are queued: one holder at a time at a fenced resource, tokens keep
   increasing, no session is lost (their windows outlast an election), and the
   waiters are served in arrival order once a leader is back;
2. one client partitioned (a stalled TCP proxy per member) past its window: its
   ``async with lock:`` body is cancelled with SessionExpiredError within the window
   on its own clock, and the next holder's token is greater;
3. the whole cluster stopped and started again on its data: nodes, persistent
   semaphores with their data and the holds of sessions still inside their TTL are
   all there, and tokens go on from where they were.

Every wait is bounded (:data:`BOUND`); nothing asserts how fast etcd is beyond that.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

import pytest

import tenure
from tenure.backends.etcd import EtcdBackend
from tenure.backends.etcd._record import SessionRecord
from tenure.errors import SessionExpiredError
from tests.etcd.cluster import EtcdCluster, EtcdMember
from tests.netproxy import NetProxy

#: Bound of every wait in these tests, in seconds (elections take about one).
BOUND = 20.0
#: Recovery window of the sessions that must survive a fault: longer than an election.
WINDOW = 5.0
#: Scheduling slack allowed past a client-side deadline, in seconds.
SLACK = 1.0

pytestmark = pytest.mark.timeout(60)


class StaleTokenError(AssertionError):
    """The fenced resource refused a write with a token older than the newest seen."""


class FencedResource:
    """What the locks protect: it records every write and refuses stale tokens.

    Like ``examples/mutex.py``'s storage, but it also tracks who is inside (a
    second holder at once is an error) and keeps the (token, holder) history.
    """

    def __init__(self) -> None:
        self.newest = 0
        self.writes: list[tuple[int, str]] = []
        self.inside: set[str] = set()

    def write(self, token: int, holder: str) -> None:
        if token < self.newest:
            raise StaleTokenError(f"{holder}: token {token} is older than {self.newest}")
        self.newest = token
        self.writes.append((token, holder))

    @contextlib.contextmanager
    def occupied(self, holder: str) -> Iterator[None]:
        assert not self.inside, f"{holder} entered while {self.inside} held the lock"
        self.inside.add(holder)
        try:
            yield
        finally:
            self.inside.discard(holder)

    def grant_order(self, since: int = 0) -> list[str]:
        """Holders in the order of their first write from write number ``since`` on."""
        order: list[str] = []
        for _, holder in self.writes[since:]:
            if holder not in order:
                order.append(holder)
        return order


def _rotated(endpoints: Sequence[str], by: int, prefix: str) -> str:
    """``etcd://`` with every endpoint, starting at a different one per client."""
    hosts = [*endpoints[by % len(endpoints) :], *endpoints[: by % len(endpoints)]]
    return f"etcd://{','.join(hosts)}?prefix={prefix}"


def _backend(client: tenure.Client) -> EtcdBackend:
    backend = client.backend
    assert isinstance(backend, EtcdBackend)
    return backend


def _session(client: tenure.Client, session: tenure.Session) -> SessionRecord:
    """The session's record, as its client keeps it (its seq)."""
    return _backend(client).sessions[session.id].record


def _prefix() -> str:
    return f"/faults/{uuid.uuid4().hex[:12]}/"


async def _until(
    session: tenure.Session, name: str, done: Callable[[tenure.SemaphoreDescription], bool]
) -> None:
    """Until the semaphore's state satisfies ``done`` (watched, bounded by BOUND)."""
    watch = session.semaphore(name).watch(owners=True, waiters=True)
    async with asyncio.timeout(BOUND), contextlib.aclosing(watch):
        async for description in watch:
            if done(description):
                return


async def _queued(session: tenure.Session, name: str, waiters: int) -> None:
    """Until ``name`` has ``waiters`` queued requests."""
    await _until(session, name, lambda d: len(d.waiters) >= waiters)


@contextlib.asynccontextmanager
async def _clients(urls: Sequence[str]) -> AsyncIterator[list[tenure.Client]]:
    async with contextlib.AsyncExitStack() as stack:
        yield [await stack.enter_async_context(tenure.connect(url)) for url in urls]


async def _round(
    cluster: EtcdCluster,
    clients: dict[str, tenure.Client],
    sessions: dict[str, tenure.Session],
    resource: FencedResource,
    fault: EtcdMember,
) -> list[str]:
    """One holder and queued waiters; ``fault`` is killed while they wait.

    The first session takes the mutex, the others queue behind it one after the
    other; then ``fault`` is SIGKILLed, the holder writes again once a leader is
    agreed (through whichever member its client fails over to) and releases.
    Returns the order in which the sessions were granted.
    """
    names = list(sessions)
    holder, waiters = names[0], names[1:]
    held = asyncio.Event()
    go = asyncio.Event()

    async def hold() -> None:
        async with sessions[holder].mutex("m") as lock:
            with resource.occupied(holder):
                resource.write(lock.token, holder)
                held.set()
                await go.wait()
                # Still ours after the fault, as etcd (through a leader) says too.
                owners = (await sessions[holder].semaphore("m").describe(owners=True)).owners
                assert lock.held
                assert [o.token for o in owners] == [lock.token]
                resource.write(lock.token, holder)

    async def wait(name: str) -> None:
        async with sessions[name].mutex("m") as lock:
            with resource.occupied(name):
                resource.write(lock.token, name)
                await asyncio.sleep(0.05)
                resource.write(lock.token, name)

    start = len(resource.writes)
    tasks = [asyncio.create_task(hold())]
    async with asyncio.timeout(BOUND):
        await held.wait()
    for count, name in enumerate(waiters, 1):
        tasks.append(asyncio.create_task(wait(name)))
        await _queued(sessions[holder], "m", count)  # arrival order is this order
    # A session re-attaches when its keepalive stream breaks: the clients whose stream
    # is on the member to kill (their unary calls may have failed over elsewhere).
    on_fault = [s for s, c in clients.items() if _backend(c).keepalive.endpoint == fault.endpoint]
    assert on_fault, "no client reaches the member to kill: the fault would test nothing"
    seqs = {name: _session(clients[name], sessions[name]).seq for name in on_fault}
    cluster.kill(fault)
    await cluster.aleader(BOUND, excluding=[fault])
    # Longer than a TTL: every lease must have been renewed after the fault, through
    # whichever member each client's keepalive stream reaches now.
    await asyncio.sleep(WINDOW + SLACK)
    go.set()
    async with asyncio.timeout(2 * BOUND):
        await asyncio.gather(*tasks)
    for name, seq in seqs.items():  # re-attached on another member: same lease, seq bumped
        assert _backend(clients[name]).keepalive.endpoint != fault.endpoint
        assert _session(clients[name], sessions[name]).seq > seq
    return resource.grant_order(start)


async def test_kill_the_leader_then_a_follower_with_a_lock_held_and_waiters_queued(
    etcd_cluster: EtcdCluster,
) -> None:
    cluster, prefix = etcd_cluster, _prefix()
    urls = [_rotated(cluster.endpoints, i, prefix) for i in range(4)]
    async with _clients(urls) as clients:
        await clients[0].create_node("n")
        async with contextlib.AsyncExitStack() as stack:
            sessions = {
                f"c{i}": await stack.enter_async_context(
                    client.session("n", recovery_window=WINDOW, description=f"c{i}")
                )
                for i, client in enumerate(clients)
            }
            resource = FencedResource()

            by_name = {f"c{i}": client for i, client in enumerate(clients)}
            leader = await cluster.aleader()
            order = await _round(cluster, by_name, sessions, resource, leader)
            assert order == list(sessions)  # the holder, then the waiters as they came

            # The old leader comes back (a quorum of three again), then a follower dies.
            await cluster.astart(leader)
            now = await cluster.aleader()
            # The follower most clients reach now.
            follower = max(
                (m for m in cluster.members if m is not now),
                key=lambda m: sum(_backend(c).keepalive.endpoint == m.endpoint for c in clients),
            )
            rotated = dict(reversed(list(sessions.items())))  # another arrival order
            order = await _round(cluster, by_name, rotated, resource, follower)
            assert order == list(rotated)

            tokens = [token for token, _ in resource.writes]
            assert tokens == sorted(tokens)
            firsts = [t for i, (t, h) in enumerate(resource.writes) if i % 2 == 0]
            assert len(set(firsts)) == len(firsts) == 2 * len(sessions)  # a new token each
            for session in sessions.values():
                assert not session.closed, f"{session} was lost"


async def test_a_partitioned_holder_is_cancelled_within_its_window_and_the_next_token_is_greater(
    etcd_cluster: EtcdCluster,
) -> None:
    cluster, prefix = etcd_cluster, _prefix()
    window = 3.0  # a whole number of seconds: the lease TTL is exactly the window
    async with contextlib.AsyncExitStack() as stack:
        # The partitioned client reaches every member through a proxy of its own.
        proxies = [
            await stack.enter_async_context(NetProxy("127.0.0.1", m.client_port))
            for m in cluster.members
        ]
        cut = await stack.enter_async_context(
            tenure.connect(_rotated([f"127.0.0.1:{p.port}" for p in proxies], 0, prefix))
        )
        other = await stack.enter_async_context(
            tenure.connect(_rotated(cluster.endpoints, 1, prefix))
        )
        await other.create_node("n")
        resource = FencedResource()
        loop = asyncio.get_running_loop()
        partitioned_at = 0.0
        entered = asyncio.Event()
        first = 0

        async def partitioned_holder() -> None:
            nonlocal partitioned_at, first
            session = await cut.session("n", recovery_window=window)
            async with session.mutex("m") as lock:
                first = lock.token
                resource.write(lock.token, "cut")
                entered.set()
                await asyncio.sleep(BOUND)  # cancelled by the loss, long before
                resource.write(lock.token, "cut")  # never reached

        holder = asyncio.create_task(partitioned_holder())
        async with asyncio.timeout(BOUND):
            await entered.wait()
        async with other.session("n", recovery_window=WINDOW) as session:
            waiter = asyncio.create_task(session.mutex("m").lock())
            await _queued(session, "m", 1)
            assert sum(proxy.connections for proxy in proxies) >= 1  # it does go through them
            for proxy in proxies:
                proxy.stall()  # nothing passes either way, nothing is refused
            partitioned_at = loop.time()
            with pytest.raises(SessionExpiredError):
                async with asyncio.timeout(BOUND):
                    await holder
            # On its own clock: a TTL after the last renewal etcd answered, which was
            # sent before the partition.
            assert loop.time() - partitioned_at <= window + SLACK
            async with asyncio.timeout(BOUND):  # etcd expires the lease: the waiter is next
                lock = await waiter
            resource.write(lock.token, "other")
            assert lock.token > first
            assert resource.writes == [(first, "cut"), (lock.token, "other")]
            await lock.release()
        for proxy in proxies:
            proxy.resume()  # so that the cut client closes without waiting on the network


async def test_stop_the_whole_cluster_and_start_it_again_on_its_data(
    etcd_cluster: EtcdCluster,
) -> None:
    cluster, prefix = etcd_cluster, _prefix()
    # The orphan's TTL: short enough to run out while the cluster is down, long enough
    # that its lease, renewed to it at the restart, is still there when the test
    # looks (starting every member and agreeing on a leader take about a second).
    short = 4.0
    async with contextlib.AsyncExitStack() as stack:
        client = await stack.enter_async_context(tenure.connect(cluster.url(prefix=prefix)))
        await client.create_node("n", recovery_window=WINDOW)
        # A session that its client keeps renewing, with a TTL longer than the outage.
        kept = await stack.enter_async_context(client.session("n", recovery_window=2 * BOUND))
        await kept.semaphore("pool").create(limit=3, data=b"pool data")
        lease = await kept.semaphore("pool").acquire(count=2, data=b"owner data")
        lock = await kept.mutex("m").lock()
        # A session nobody renews from now on (its client is cut off), whose TTL runs
        # out while the cluster is down.
        proxy = await stack.enter_async_context(
            NetProxy("127.0.0.1", cluster.members[0].client_port)
        )
        cut = await stack.enter_async_context(
            tenure.connect(f"etcd://127.0.0.1:{proxy.port}?prefix={prefix}")
        )
        orphan = await cut.session("n", recovery_window=short)  # its client closes it
        orphaned = await orphan.semaphore("pool").acquire(count=1)
        before = max(lease.token, lock.token, orphaned.token)
        proxy.stall()
        loop = asyncio.get_running_loop()
        stopped_at = loop.time()

        await cluster.astop_all()  # SIGTERM: an orderly shutdown of every member
        await asyncio.sleep(max(0.0, stopped_at + short + SLACK - loop.time()))
        # Its own client gave it up on its clock, while the cluster was down.
        assert orphan.closed
        assert not orphaned.held
        await cluster.astart_all()
        await cluster.aleader()

        async with asyncio.timeout(BOUND):
            # Acknowledged before the stop, there after it.
            node = await client.describe_node("n")
            assert node.config.recovery_window == WINDOW
            pool = await kept.semaphore("pool").describe(owners=True)
            assert (pool.limit, pool.data, pool.ephemeral) == (3, b"pool data", False)
            # What etcd does: every lease comes back with its full TTL from the
            # restart, the orphan's too although its TTL had run out during the outage.
            # So the orphan's hold is still there now, and goes a TTL later (its client
            # had given it up already: nobody acts on it).
            owners = [(o.session_id, o.count, o.data, o.token) for o in pool.owners]
            assert owners == [
                (kept.id, 2, b"owner data", lease.token),
                (orphan.id, 1, b"", orphaned.token),
            ]
            await _until(kept, "pool", lambda d: len(d.owners) == 1)
            # The renewed session outlived the outage and holds what it held, with the
            # same tokens.
            assert not kept.closed
            assert lease.held
            assert lock.held
            mutex = await kept.semaphore("m").describe(owners=True)
            assert [o.token for o in mutex.owners] == [lock.token]

            # A new grant's token is greater than every one before the restart.
            async with client.session("n") as fresh:
                waiting = asyncio.ensure_future(fresh.mutex("m").lock())
                await _queued(fresh, "m", 1)
                await lock.release()
                after = await waiting
                assert after.token > before
                await after.release()
            await lease.release()
        proxy.resume()


async def test_a_grant_whose_answer_was_lost_is_not_granted_twice(
    etcd_cluster: EtcdCluster,
) -> None:
    """The waiter's grant Txn reaches etcd, its answer is lost, the client tries again.

    The waiter's first endpoint is a proxy to one member; when it sends its grant
    Txn the proxy throws away what comes back and then resets the connection, so
    the client fails over to the next member and sends the Txn again. The grant
    stands once, and the lock's token is the grant's (what everyone else sees).
    """
    cluster, prefix = etcd_cluster, _prefix()
    async with contextlib.AsyncExitStack() as stack:
        proxy = await stack.enter_async_context(
            NetProxy("127.0.0.1", cluster.members[0].client_port)
        )
        hosts = [f"127.0.0.1:{proxy.port}", *cluster.endpoints[1:]]
        waiter = await stack.enter_async_context(
            tenure.connect(f"etcd://{','.join(hosts)}?prefix={prefix}")
        )
        other = await stack.enter_async_context(tenure.connect(cluster.url(prefix=prefix)))
        await other.create_node("n")
        holding = await stack.enter_async_context(other.session("n", recovery_window=WINDOW))
        waiting = await stack.enter_async_context(waiter.session("n", recovery_window=WINDOW))
        held = await holding.mutex("m").lock()
        asking = asyncio.ensure_future(waiting.mutex("m").lock())
        await _queued(holding, "m", 1)

        conn = _backend(waiter).conn
        send_txn = conn.send_txn
        lost: list[int] = []

        async def losing_txn(request: Any, *, timeout: float | None = None) -> Any:
            # The waiter's grant: the only Txn of its session that puts a g/ key here.
            if not lost and any(b"/g/" in op.request_put.key for op in request.success):
                lost.append(conn.generation)
                proxy.lose_downstream()  # etcd applies it; the answer never arrives
                asyncio.get_running_loop().call_later(0.5, cut)
            return await send_txn(request, timeout=timeout)

        def cut() -> None:
            proxy.drop()  # the client sees UNAVAILABLE and fails over
            proxy.lose_downstream(False)

        conn.send_txn = losing_txn  # type: ignore[method-assign]
        await held.release()
        async with asyncio.timeout(BOUND):
            lock = await asyncio.shield(asking)
        assert lost
        assert conn.generation > lost[0]
        owners = (await holding.semaphore("m").describe(owners=True)).owners
        assert [(o.session_id, o.token) for o in owners] == [(waiting.id, lock.token)]
        assert lock.token > held.token
        await lock.release()
