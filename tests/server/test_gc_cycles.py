"""The server's own paths leave no reference cycles, so freezing is safe (issue 51).

``--gc-freeze-after`` freezes what a long full collection left alive
(:mod:`tenure._runtime.collector`): an object frozen that later died in a reference
cycle would never be freed. So a real server is churned through its paths (native
connections, in the clear and over TLS, with sessions, holds, waits given up and
watches, connections dropped with all of them, ``/metrics`` and ``/readyz``, dflockd
locks left to the close; a cluster's leader too), with
freezing off, and its own count of what the cyclic collector found
(``python_gc_objects_collected_total``) must stay near still: each closed connection
left 14 objects in a cycle before (the stream callback held its protocol). Then the
server takes a few thousand holds, so that its collector runs (young collections and
the next generation's: a server that makes no cycle frees nearly all by reference
counting and rarely collects), and the test checks that it did.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import trustme

import tenure
from tests.cluster.harness import TenureCluster
from tests.etcd.cluster import EtcdCluster
from tests.ports import free_port
from tests.server.http import Samples, get, scrape, value
from tests.server.wire import WAIT, ServerProcess

#: Rounds of churn measured (each: two native connections, two HTTP requests, a
#: dflockd connection); what the collector may find over all of them is fewer objects
#: than rounds (a cycle a connection would be 14 a connection).
ROUNDS = 60

#: Connections a client process opens, holding and waiting on each, before it exits
#: without closing any (the server sees them all drop at once).
DROPPED = 20

#: Holds taken at a time, and at most, until a full collection freezes what they made.
HOLDS_BATCH = 2000
MOST_HOLDS = 200_000

#: Holds taken after the churn, so that the server's collector runs and looks at what
#: the churn left (about 10 tracked objects a hold with its request: 14 young
#: collections, of 700 each, and a collection of the next generation).
GROWTH = 6000


def collected(samples: Samples) -> float:
    """Objects the server's cyclic collector found, every generation's."""
    return sum(
        value(samples, "python_gc_objects_collected_total", generation=str(g)) for g in range(3)
    )


async def churn(url: str, http_port: int, dflockd_port: int | None, round_: int) -> None:
    """One round of every path (the module docstring)."""
    name = f"m{round_ % 5}"
    async with (
        tenure.connect(url) as client,
        client.session("n") as one,
        client.session("n") as other,
        one.mutex(name).lock(),
    ):
        waiting = asyncio.ensure_future(other.mutex(name).lock())
        watch = other.semaphore(name).watch(owners=True)
        assert (await anext(watch)).exists
        await asyncio.sleep(0.005)  # (queued by now)
        waiting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waiting
        await watch.aclose()
    async with tenure.connect(url) as client:  # closed holding, its session left open
        session = await client.session("n")
        await session.mutex(f"h{round_}").lock()
    for path in ("/metrics", "/readyz"):
        status, _ = await get(http_port, path)
        assert status == 200
    if dflockd_port is None:
        return
    reader, writer = await asyncio.open_connection("127.0.0.1", dflockd_port)
    writer.write(f"l\nd{round_}\n5\n".encode())
    assert (await asyncio.wait_for(reader.readline(), WAIT)).startswith(b"ok")
    writer.close()  # (the lock is the connection's: let go by the close)
    await writer.wait_closed()


def drop_connections(url: str) -> None:
    """A client process that opens :data:`DROPPED` connections, each holding a mutex and
    waiting on another's, then exits without closing them."""
    script = textwrap.dedent(
        f"""
        import asyncio, os, tenure
        async def main():
            for i in range({DROPPED}):
                client = await tenure.connect({url!r})
                session = await client.session("n", recovery_window=0.5)
                await session.mutex(f"x{{i}}").lock()
                waiter = await client.session("n", recovery_window=0.5)
                asyncio.ensure_future(waiter.mutex(f"x{{i}}").lock())
            await asyncio.sleep(0.2)
            os._exit(0)
        asyncio.run(main())
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A CA's file, and the server's certificate and key it signed."""
    base = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    leaf = ca.issue_cert("127.0.0.1", "localhost")
    cert, key, ca_file = base / "server.pem", base / "server.key", base / "ca.pem"
    leaf.cert_chain_pems[0].write_to_path(str(cert))
    leaf.private_key_pem.write_to_path(str(key))
    ca.cert_pem.write_to_path(str(ca_file))
    return ca_file, cert, key


async def grow(url: str, holds: int) -> None:
    """Take ``holds`` holds and keep them: the server's tracked objects grow by a few
    times that, so its collector runs (young collections, and the next generation's)
    and looks at whatever the churn before left."""
    client = await tenure.connect(url)
    session = await client.session("n")
    for first in range(0, holds, HOLDS_BATCH):
        batch = [session.mutex(f"g{first + i}").lock() for i in range(HOLDS_BATCH)]
        await asyncio.gather(*(opening.__aenter__() for opening in batch))
    await client.aclose()


async def churned(url: str, http_port: int, dflockd_port: int | None) -> tuple[Samples, Samples]:
    """The server's samples before and after :data:`ROUNDS` rounds of :func:`churn`,
    :data:`DROPPED` dropped connections, and a :func:`grow` that makes it collect."""
    async with tenure.connect(url) as client:
        await client.create_node("n")
    await churn(url, http_port, dflockd_port, -1)  # (what a first use makes once)
    before = await scrape(http_port)
    for round_ in range(ROUNDS):
        await churn(url, http_port, dflockd_port, round_)
    await asyncio.to_thread(drop_connections, url)
    await asyncio.sleep(1.0)  # (the dropped sessions' windows end)
    await grow(url, GROWTH)
    return before, await scrape(http_port)


def assert_no_cycle(before: Samples, after: Samples) -> None:
    """The collector ran after the churn (so it looked), and found next to nothing."""
    for generation in ("0", "1"):
        ran = value(after, "python_gc_collections_total", generation=generation) - value(
            before, "python_gc_collections_total", generation=generation
        )
        assert ran >= 1, f"no collection of generation {generation}: nothing was looked at"
    found = collected(after) - collected(before)
    assert value(after, "tenure_gc_freezes_total") == 0.0, "freezing was off"
    assert found < ROUNDS, (
        f"the server's collector found {found:.0f} objects in cycles over {ROUNDS} rounds "
        f"and {DROPPED} dropped connections: a path leaves a reference cycle"
    )


@pytest.mark.slow
@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
async def test_the_servers_paths_leave_no_reference_cycle(
    tmp_path: Path, tls: bool, pki: tuple[Path, Path, Path]
) -> None:
    http_port = free_port()
    dflockd_port = None if tls else free_port()  # (dflockd's clients speak it in the clear)
    flags = ["--http-port", str(http_port), "--fsync", "off", "--gc-freeze-after", "0"]
    if dflockd_port is not None:
        flags += ["--dflockd-port", str(dflockd_port)]
    ca_file, cert, key = pki
    if tls:
        flags += ["--tls-cert", str(cert), "--tls-key", str(key)]
    with ServerProcess(tmp_path / "data", *flags) as server:
        url = f"tenure://127.0.0.1:{server.port}"
        if tls:
            url = f"tenures://127.0.0.1:{server.port}?ca={ca_file}"
        before, after = await churned(url, http_port, dflockd_port)
    assert_no_cycle(before, after)


@pytest.mark.slow
async def test_a_cluster_leaders_paths_leave_no_reference_cycle(
    tmp_path: Path, etcd_member: EtcdCluster
) -> None:
    # The leader's log goes to etcd through gRPC (aetcd): its calls are per group
    # commit, and what the churn makes on the leader is looked at as on a lone server.
    extra = ("--gc-freeze-after", "0")
    with TenureCluster(tmp_path / "cluster", etcd_member.endpoints, size=2, extra=extra) as cluster:
        leader = cluster.leader()
        before, after = await churned(cluster.url(), leader.http_port, None)
    assert_no_cycle(before, after)


@pytest.mark.slow
async def test_a_growing_state_is_frozen_by_the_full_collections(tmp_path: Path) -> None:
    # Every full collection counts as long here: what the holds make is frozen once
    # one has run, and the collector walks it no more.
    http_port = free_port()
    flags = ["--http-port", str(http_port), "--fsync", "off", "--gc-freeze-after", "1e-6"]
    with ServerProcess(tmp_path / "data", *flags) as server:
        url = f"tenure://127.0.0.1:{server.port}"
        async with tenure.connect(url) as client:
            await client.create_node("n")
            session = await client.session("n")
            first = await scrape(http_port)
            start = value(first, "tenure_gc_freezes_total")
            held = 0
            while held < MOST_HOLDS:
                batch = [session.mutex(f"m{held + i}").lock() for i in range(HOLDS_BATCH)]
                await asyncio.gather(*(opening.__aenter__() for opening in batch))
                held += HOLDS_BATCH
                samples = await scrape(http_port)
                if value(samples, "tenure_gc_freezes_total") > start:
                    break
    assert value(samples, "tenure_gc_freezes_total") > start, f"no full collection in {held}"
    frozen = value(samples, "tenure_gc_frozen_objects") - value(first, "tenure_gc_frozen_objects")
    assert frozen >= held, f"{frozen:.0f} objects frozen: not the {held} holds' objects"
