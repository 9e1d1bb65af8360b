"""Nodes moved between the two cells of a service, three members each, over one real etcd
(docs/cluster.md, "Cells"), by ``tenure cells move`` as an operator runs it: the
holder keeps its lock, the waiters are served in their order on the new cell, every
token after the move is above every token before, the node is on one cell after,
and a client's sessions follow it; a move cut by the source's leader killed is
finished by the next leader; ``tenure cells ls`` shows the cells and ``rebalance``
puts each node where a client would create it."""

from __future__ import annotations

import asyncio
import json
import subprocess
import uuid
from collections.abc import Iterator
from functools import partial

import pytest
from aetcd.rpc import rpc_pb2

import tenure
from tenure._core.rendezvous import hash64
from tenure._core.values import MutexDescription
from tenure._etcd.client import EtcdClient
from tenure.client import Session
from tenure.server._cluster.directory import DirectoryKeys
from tenure.server._cluster.moves import begin_move
from tenure.server._config.cluster_url import parse_cluster_url
from tests.cli.support import run_tenure, start_tenure
from tests.cluster.cells import Service, cell_nodes, running_service
from tests.cluster.harness import until
from tests.etcd.cluster import EtcdCluster


@pytest.fixture(scope="module")
def service(
    tmp_path_factory: pytest.TempPathFactory, etcd_member: EtcdCluster
) -> Iterator[Service]:
    """One service of cells ``a`` and ``b`` for the module."""
    with running_service(tmp_path_factory.mktemp("moves"), etcd_member.endpoints) as made:
        yield made


def etcd_url(service: Service) -> str:
    """The service's ``--cluster`` URL (its members were started with it)."""
    return service.cells["a"].etcd_url


def name_on(cell: str, stem: str) -> str:
    """A node name a client creates on ``cell`` (rendezvous hashing over a and b)."""
    for n in range(1000):
        name = f"{stem}-{n}-{uuid.uuid4().hex[:6]}"
        if max(("a", "b"), key=lambda c: hash64(c, name)) == cell:
            return name
    raise AssertionError("no name hashes there")


async def cells_move(
    service: Service, node: str, to: str, *extra: str
) -> subprocess.CompletedProcess[str]:
    """``tenure cells move NODE --to CELL`` as an operator runs it (in a thread: the
    test's clients go on meanwhile)."""
    args = ("cells", "move", node, "--to", to, "--cluster", etcd_url(service), *extra)
    return await asyncio.to_thread(run_tenure, *args)


async def queued(session: Session, name: str, count: int) -> bool:
    """Whether ``count`` sessions wait for ``name``."""
    seen = await session.mutex(name).describe()
    return len(seen.waiters) == count


async def test_a_node_moves_while_a_holder_holds_and_waiters_queue(service: Service) -> None:
    node = name_on("a", "moving")
    async with tenure.connect(service.url("a")) as client:
        await client.create_node(node)
        assert node in await cell_nodes(service.cells["a"])
        async with client.session(node) as holder:
            lock = await holder.mutex("m").lock()
            before = lock.token
            waiters = [await client.session(node) for _ in range(3)]
            order: list[tuple[int, int]] = []  # (waiter, token) as each is granted
            tasks = []
            for index, waiter in enumerate(waiters):

                async def wait_then_release(index: int = index, waiter: Session = waiter) -> None:
                    async with waiter.mutex("m") as held:
                        order.append((index, held.token))

                tasks.append(asyncio.ensure_future(wait_then_release()))
                await until(partial(queued, holder, "m", index + 1), f"{index + 1} queued")

            moved = await cells_move(service, node, "b")
            assert moved.returncode == 0, moved.stderr + moved.stdout
            assert f"node {node!r} moved to cell 'b' (epoch 2)" in moved.stdout
            assert node in await cell_nodes(service.cells["b"])
            assert node not in await cell_nodes(service.cells["a"])

            # The holder still holds, on cell b: the waiters queue behind it, in order.
            seen = await until(partial(_described, holder, 3), "the waiters seen on cell b")
            assert seen.owner is not None
            assert seen.owner.session_id == holder.id
            assert [w.session_id for w in seen.waiters] == [w.id for w in waiters]
            assert lock.held
            await lock.release()
            await asyncio.wait_for(asyncio.gather(*tasks), 30)
            assert [index for index, _ in order] == [0, 1, 2]
            tokens = [token for _, token in order]
            assert tokens == sorted(tokens)
            assert tokens[0] > before
            for waiter in waiters:
                await waiter.close()


async def _described(session: Session, waiting: int) -> MutexDescription | None:
    """The mutex ``m`` as ``session`` describes it, once ``waiting`` wait (None before:
    the sessions re-attach on the new cell one by one)."""
    try:
        seen = await session.mutex("m").describe()
    except tenure.errors.UnavailableError:
        return None
    return seen if len(seen.waiters) == waiting else None


async def test_a_move_cut_by_the_source_leader_killed_is_finished_by_the_next(
    service: Service,
) -> None:
    """The move cut after the source froze the node and put its copy: the target's
    members paused (they take nothing in), the source's leader killed; then the
    command run again waits, and the move ends once the target is back: the node on
    the target alone, its holder still holding."""
    node = name_on("a", "cut")
    cell_a, cell_b = service.cells["a"], service.cells["b"]
    async with tenure.connect(service.url()) as client:
        await client.create_node(node)
        async with client.session(node, recovery_window=60.0) as session:
            lock = await session.mutex("m").lock()
            for server in cell_b.servers:
                server.pause()
            try:
                parsed = parse_cluster_url(etcd_url(service))
                keys = DirectoryKeys.of(parsed.prefix, parsed.name)
                conn = EtcdClient(parsed.connection)
                try:
                    await begin_move(conn, keys.node(node), keys.move(node), node, "b")

                    async def copied() -> bool:
                        reply = await conn.range(rpc_pb2.RangeRequest(key=keys.move(node)))
                        return bool(reply.kvs)

                    await until(copied, "the source froze the node and put its copy")
                finally:
                    await conn.close()
                leader = cell_a.leader()
                leader.kill()
                leader.start()
                # Run again while the move is cut: it waits for that move.
                rerun = start_tenure(
                    "cells", "move", node, "--to", "b", "--cluster", etcd_url(service)
                )
                try:
                    assert rerun.stdout is not None
                    said = await asyncio.wait_for(asyncio.to_thread(rerun.stdout.readline), 30)
                    assert said.startswith(f"moving node {node!r} from cell 'a' to cell 'b'")
                    # A wait bounded by --timeout ends first, the move going on.
                    bounded = await cells_move(service, node, "b", "--timeout", "0.5")
                    assert bounded.returncode == 1, bounded.stderr
                    assert "is still moving to cell 'b' after 0.5 s" in bounded.stderr
                except BaseException:
                    rerun.kill()
                    raise
            finally:
                for server in cell_b.servers:
                    server.resume()
            out, err = await asyncio.to_thread(rerun.communicate, timeout=90)
            assert rerun.returncode == 0, err + out
            assert f"node {node!r} moved to cell 'b' (epoch 2)" in out
            assert node in await cell_nodes(cell_b)
            assert node not in await cell_nodes(cell_a)
            assert lock.held
            await lock.release()
            again = await session.mutex("m").lock()
            assert again.token > lock.token
            await again.release()


async def test_cells_ls_and_a_refused_move(service: Service) -> None:
    listed = run_tenure("cells", "ls", "--json", "--cluster", etcd_url(service))
    assert listed.returncode == 0, listed.stderr
    cells = {cell["name"]: cell for cell in json.loads(listed.stdout)["cells"]}
    assert sorted(cells) == ["a", "b"]
    assert cells["a"]["number"] == 1 or cells["b"]["number"] == 1
    assert {len(cell["members"]) for cell in cells.values()} == {3}
    table = run_tenure("cells", "ls", "--cluster", etcd_url(service))
    assert "cell" in table.stdout
    node = name_on("a", "refused")
    async with tenure.connect(service.url()) as client:
        await client.create_node(node)
    nowhere = run_tenure("cells", "move", node, "--to", "nowhere", "--cluster", etcd_url(service))
    assert nowhere.returncode == 3
    assert "cell 'nowhere' has no member up" in nowhere.stderr
    there = run_tenure("cells", "move", node, "--to", "a", "--cluster", etcd_url(service))
    assert there.returncode == 0, there.stderr
    assert f"node {node!r} is on cell 'a' (epoch 1)" in there.stdout
    missing = run_tenure(
        "cells", "move", "no-such-node", "--to", "b", "--cluster", etcd_url(service)
    )
    assert missing.returncode == 3
    assert "no cell serves node 'no-such-node'" in missing.stderr


async def test_rebalance_moves_each_node_where_a_client_would_create_it(service: Service) -> None:
    node = name_on("b", "homed")
    async with tenure.connect(service.url()) as client:
        await client.create_node(node)
        moved = await cells_move(service, node, "a")  # (away from where it hashes)
        assert moved.returncode == 0, moved.stderr
        plan = run_tenure("cells", "rebalance", "--dry-run", "--cluster", etcd_url(service))
        assert plan.returncode == 0, plan.stderr
        assert f"would move node {node!r}: a -> b" in plan.stdout
        one = run_tenure(
            "cells", "rebalance", "--dry-run", "--limit", "1", "--cluster", etcd_url(service)
        )
        assert one.returncode == 0, one.stderr
        assert one.stdout.count("would move node") == 1
        assert "1 node(s) to move" in one.stdout
        done = await asyncio.to_thread(
            run_tenure, "cells", "rebalance", "--cluster", etcd_url(service)
        )
        assert done.returncode == 0, done.stderr
        assert node in await cell_nodes(service.cells["b"])
        assert (await client.describe_node(node)).name == node


async def test_a_client_whose_connection_drops_as_its_node_moves_keeps_its_session(
    service: Service,
) -> None:
    """Its connection to the source cut as the move begins, each time: whether it
    re-attaches there before the node froze (it is then told), while it is frozen
    (``UNAVAILABLE``), or after it left (the session gone there), it finds the node's
    new cell and keeps its hold, five moves in a row."""
    node = name_on("a", "dropped")
    await service.until_known()  # (a member the tests before restarted reads them anew)
    async with tenure.connect(service.url()) as client:
        await client.create_node(node)
        async with client.session(node, recovery_window=30.0) as session:
            lock = await session.mutex("m").lock()
            cells = client.backend.cells  # type: ignore[attr-defined]
            for target in ["b", "a", "b", "a", "b"]:
                source = "a" if target == "b" else "b"
                cells.shards[source].link.drop()
                moved = await cells_move(service, node, target)
                assert moved.returncode == 0, moved.stderr + moved.stdout
                seen = await until(partial(_owner, session), "the session holds on the new cell")
                assert seen == session.id
                assert lock.held
            await lock.release()


async def _owner(session: Session) -> int | None:
    """Who holds ``m``, as ``session`` reads it (None while its node moves)."""
    try:
        seen = await session.mutex("m").describe()
    except tenure.errors.UnavailableError:
        return None
    return None if seen.owner is None else seen.owner.session_id
