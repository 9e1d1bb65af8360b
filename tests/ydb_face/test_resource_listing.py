"""YDB's ListResources, AlterResource and DropResource read a range of the node's sorted
names (issue 47): a listing a budget of names per step, never the whole node at once.

A hostile writer makes thousands of deep limiter semaphores through the native
protocol; a listing of them (read access is enough) used to walk every semaphore of
the node, and find the roots at a cost of paths x depth^2, in one step that stalled
every other client. Shown on a real Server in this process (so the test reads the
node's sorted index between the loop's turns), by counts and orders, never by time:

* the listing answers what the old walk answered (the paths made, or their roots:
  by construction here; on small random nodes, against the old walk itself);
* no turn of the loop read more than ``--step-budget`` names for it, and it took
  many turns; the roots are found without reading below a root;
* a bystander's Pings are answered while the listing is half read;
* past ``--ydb-max-listed-resources`` paths a listing is refused, naming it;
* AlterResource reads the names below the resource, and DropResource up to its
  first child, not one more.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tenure._core import CreateNode, CreateSemaphore, CreateSession, Engine, NodeConfig
from tenure._core.rates import Bucket, bucket_data
from tenure._core.sorted_keys import SortedKeys
from tenure._protocol import Pong, Reply
from tenure.compat.ydb import _protos as pb
from tenure.compat.ydb.resources import Resources, check_path
from tenure.compat.ydb.settings import YdbSettings
from tenure.server import DataDir, Journal
from tenure.server._config.serve_config import ServeConfig
from tenure.server._durability.storage import FsyncMode
from tenure.server._serve import Server
from tenure.server._server_host import wal_host
from tests.server.wire import BOUND, WAIT, Clients, WireClient, bound, free_port
from tests.ydb_face.raw import Status
from tests.ydb_face.test_rate_limiter import Api, hdrr, rl_grpc

pytestmark = pytest.mark.timeout(120)

BUDGET = 50
#: Roots made, each with DESCENDANTS resources below it: the limiters the listing reads.
ROOTS, DESCENDANTS = 200, 9
LIMITERS = ROOTS * (1 + DESCENDANTS)
#: Levels of each root's path: deep, as any writer may make them.
DEPTH = 250
HOSTILE, BYSTANDER = "HOSTILE-SECRET", "BYSTANDER-SECRET"
AUTH_FILE = f"""
[[token]]
name = "hostile"
secret = "{HOSTILE}"
access = "read-write"

[[token]]
name = "bystander"
secret = "{BYSTANDER}"
access = "read-write"
"""
BUCKET = bucket_data(Bucket(1.0, 1.0, 0.0))


@pytest.fixture
def base(tmp_path: Path) -> Path:
    """The servers' directory, with the auth file."""
    (tmp_path / "tokens.toml").write_text(AUTH_FILE)
    return tmp_path


@asynccontextmanager
async def running(path: Path, *, max_listed: int) -> AsyncIterator[tuple[Server, int, int]]:
    """A real Server in this process with the YDB face, a small step budget and the
    auth file in ``path``; its native and YDB ports. Stopped at the end."""
    journal = Journal(DataDir(path / "data"))
    engine = journal.open(asyncio.get_running_loop().time())
    ydb = YdbSettings(port=free_port(), max_listed_resources=max_listed)
    config = ServeConfig(
        port=0,
        data_dir=path / "data",
        fsync=FsyncMode.OFF,
        step_budget=BUDGET,
        auth_file=path / "tokens.toml",
        faces={"ydb": ydb},
    )
    sockets = bound(config)
    server = Server(config, wal_host(config, journal, engine), sockets, b"1" * 16)
    try:
        _, port = await server.start()
        try:
            yield server, port, ydb.port
        finally:
            server.stop()
            assert await asyncio.wait_for(server.wait(), WAIT) == 0
    finally:
        BOUND.remove(sockets)
        sockets.close()


async def make_limiters(client: WireClient, node: str, paths: list[str], data: bytes) -> None:
    """Create ``ratelimiter/PATH`` for each of ``paths`` holding ``data``, natively (pipelined)."""
    await client.call(CreateNode(node, NodeConfig(max_semaphores=100_000)))
    sid = (await client.call(CreateSession(node, b"k"))).session_id
    asked = [client.send(CreateSemaphore(sid, f"ratelimiter/{p}", 1, data)) for p in paths]
    for request in asked:
        answer = await client.answer(request)
        assert isinstance(answer, Reply), answer


def deep_paths() -> tuple[list[str], list[str]]:
    """The paths the hostile writer makes, and their roots: ROOTS deep roots, each with
    a chain of DESCENDANTS resources below it."""
    roots = [f"g{g:03d}" + "/x" * DEPTH for g in range(ROOTS)]
    below = [root + "/y" * k for root in roots for k in range(1, DESCENDANTS + 1)]
    return roots + below, roots


async def tracked(
    index: SortedKeys[str], work: Awaitable[Any], pinger: WireClient
) -> tuple[Any, list[int], list[int]]:
    """``work``'s answer, the names ``index`` had read (since the start) at each turn
    of the loop while it ran, and at each of the bystander's Pongs meanwhile."""
    start = index.looked_at
    turns: list[int] = []
    at_pongs: list[int] = []
    task = asyncio.ensure_future(work)

    async def sample() -> None:
        while not task.done():
            turns.append(index.looked_at - start)
            await asyncio.sleep(0)
        turns.append(index.looked_at - start)

    async def ping() -> None:
        nonce = 0
        while not task.done():
            nonce += 1
            assert isinstance(await pinger.ping(nonce), Pong)
            at_pongs.append(index.looked_at - start)

    async with asyncio.timeout(WAIT * 6):
        await asyncio.gather(sample(), ping())
    return await task, turns, at_pongs


def steps_of(turns: list[int]) -> list[int]:
    """The names read between two turns of the loop, for each turn that read some."""
    return [b - a for a, b in itertools.pairwise(turns) if b > a]


async def test_a_listing_of_deep_limiters_is_read_a_budget_per_turn(base: Path) -> None:
    paths, roots = deep_paths()
    clients = Clients()
    try:
        async with running(base, max_listed=LIMITERS) as (server, port, ydb_port):
            hostile = await clients.connect(port, token=HOSTILE)
            await make_limiters(hostile, "deep", paths, BUCKET)
            index = server.host.engine.nodes["deep"].semaphore_index
            pinger = await clients.connect(port, token=BYSTANDER)
            async with grpc.aio.insecure_channel(f"127.0.0.1:{ydb_port}") as channel:
                api = Api(
                    rl_grpc.RateLimiterServiceStub(channel),
                    "/local/deep",
                    [("x-ydb-auth-ticket", HOSTILE)],
                )
                listed, turns, pongs = await tracked(index, api.listed(), pinger)
                assert listed == roots  # (what the old walk answered: by construction)
                # The roots were found without reading below them: two names a root.
                assert turns[-1] <= 2 * ROOTS + 1, turns[-1]
                assert len(steps_of(turns)) >= 2 * ROOTS // BUDGET, turns
                assert max(steps_of(turns)) <= BUDGET, steps_of(turns)

                listed, turns, pongs = await tracked(index, api.listed(recursive=True), pinger)
                assert listed == sorted(paths)
                assert turns[-1] == LIMITERS
                assert len(steps_of(turns)) >= LIMITERS // BUDGET, turns
                assert max(steps_of(turns)) <= BUDGET, steps_of(turns)
                # The bystander was answered while the listing was half read.
                assert any(0 < looked < LIMITERS for looked in pongs), pongs

                # One under a root: its own range only.
                listed, turns, _ = await tracked(
                    index, api.listed(roots[7], recursive=True), pinger
                )
                assert listed == [roots[7], *(roots[7] + "/y" * k for k in range(1, 10))]
                assert turns[-1] == DESCENDANTS + 1  # (and the first name past it)

                # One more than the most a listing answers: refused, naming the setting.
                sid = (await hostile.call(CreateSession("deep", b"k"))).session_id
                await hostile.call(CreateSemaphore(sid, "ratelimiter/zzz", 1, BUCKET))
                operation = await api.operation("ListResources", recursive=True)
                assert operation.status == Status.PRECONDITION_FAILED, operation
                why = operation.issues[0].message
                assert f"more than {LIMITERS} resources" in why, why
                assert "--ydb-max-listed-resources" in why, why
                assert await api.listed() == [*roots, "zzz"]  # (the roots are fewer)
    finally:
        await clients.close_all()


async def test_alter_and_drop_read_only_the_resources_range(base: Path) -> None:
    clients = Clients()
    try:
        async with running(base, max_listed=100) as (server, port, ydb_port):
            hostile = await clients.connect(port, token=HOSTILE)
            # Many limiters beside the resource, before and after it in name order.
            beside = [f"{prefix}{i:04d}" for prefix in ("0", "z") for i in range(1_000)]
            await make_limiters(hostile, "n", beside, BUCKET)
            index = server.host.engine.nodes["n"].semaphore_index
            async with grpc.aio.insecure_channel(f"127.0.0.1:{ydb_port}") as channel:
                stub = rl_grpc.RateLimiterServiceStub(channel)
                api = Api(stub, "/local/n", [("x-ydb-auth-ticket", HOSTILE)])
                chain = ["a" + "/x" * level for level in range(40)]  # a, a/x, a/x/x...
                await api.create("a", hdrr(10.0))
                for path in chain[1:]:
                    await api.create(path, hdrr())
                await api.create("a-b", hdrr(3.0))  # (between a and a/x in name order)
                await api.create("a-b/c", hdrr())

                start = index.looked_at
                resource = {"resource_path": "a", "hierarchical_drr": hdrr(4.0)}
                await api.ok("AlterResource", resource=resource)
                # The names below a, and the first past them (z0000).
                assert index.looked_at - start == len(chain)
                tree = Resources(server.host.engine.nodes["n"])

                def rate(path: str) -> float:
                    found = tree.get(path)
                    assert found is not None, path
                    return found.bucket.rate

                # Every one inherits: the alter went down the chain, and only there.
                assert [rate(path) for path in chain] == [4.0] * len(chain)
                assert rate("a-b/c") == 3.0

                start = index.looked_at
                drop = await api.operation("DropResource", resource_path="a")
                assert drop.status == Status.BAD_REQUEST, drop  # it has children
                assert index.looked_at - start == 1  # its first child, no more
                for path in reversed(chain):
                    await api.ok("DropResource", resource_path=path)
                assert await api.listed("a-b", recursive=True) == ["a-b", "a-b/c"]
    finally:
        await clients.close_all()


# -- the same answers as the old walk, on small nodes --------------------------------------


def _old_paths(limiters: set[str], under: str = "") -> list[str]:
    """The old walk's ``Resources.paths``: every limiter below ``under``, sorted."""
    prefix = under + "/" if under else ""
    return sorted(p for p in limiters if p.startswith(prefix))


def _old_roots(limiters: set[str]) -> list[str]:
    """The old walk's ``Resources.roots``: those with no limiter at a path above them."""
    parts = {p: p.split("/") for p in limiters}
    return [
        p
        for p in sorted(limiters)
        if not any("/".join(parts[p][:end]) in limiters for end in range(1, len(parts[p])))
    ]


def _is_path(path: str) -> bool:
    try:
        check_path(path)
    except pb.StatusError:
        return False
    return True


#: Names from a few characters that sort around "/" (``#``, ``-`` and ``.`` before it),
#: and two that no resource path has.
_names = st.lists(st.text(alphabet="ab-.#/ é", min_size=1, max_size=7), max_size=30, unique=True)


@settings(max_examples=300, deadline=None)
@given(names=_names, plain=st.sets(st.integers(0, 29)), budget=st.integers(1, 5))
def test_the_scan_answers_what_the_old_walk_did(
    names: list[str], plain: set[int], budget: int
) -> None:
    engine = Engine()
    engine.apply(CreateNode("n"), 0.0)
    sid = engine.apply(CreateSession("n", b"k"), 0.0).session_id
    limiters = set()
    for i, name in enumerate(names):
        # Some hold no bucket (a plain semaphore under the prefix): no resource.
        data = b"plain" if i in plain else BUCKET
        engine.apply(CreateSemaphore(sid, f"ratelimiter/{name}", 1, data), 0.0)
        if i not in plain and _is_path(name):
            limiters.add(name)
    node = engine.nodes["n"]
    tree = Resources(node)

    def stepped(under: str = "", roots: bool = False) -> list[str]:
        scan, found = tree.scan(under, roots=roots), []
        while not scan.done:
            found += [resource.path for resource in scan.step(node, budget)]
        return found

    assert stepped() == _old_paths(limiters)
    assert stepped(roots=True) == _old_roots(limiters)
    for path in limiters:
        assert stepped(path) == _old_paths(limiters, path)
        assert tree.has_children(path) == bool(_old_paths(limiters, path))
    # Each one's parent, as the pass knows it: the nearest limiter above it.
    for found in tree.scan().rest(node):
        above = [p for p in limiters if found.path.startswith(p + "/")]
        expected = max(above, key=len) if above else None
        assert (found.parent.path if found.parent else None) == expected, found.path
