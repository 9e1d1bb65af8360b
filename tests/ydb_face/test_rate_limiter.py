"""YDB's rate limiter service on the YDB port, over tenure's rate limiters.

A resource ``a/b`` of ``/local/NODE`` is the tenure rate limiter ``ratelimiter/a/b`` of
node ``NODE`` (its YDB settings beside it in ``ydb.ratelimiter/a/b``): created,
altered, described, listed and dropped with YDB's stubs (the ``ydb`` package's, and
its SDK's driver), acquired with YDB's ``required`` (wait within the call's timeout,
or ``TIMEOUT`` at once with nothing taken) and ``used`` (taken now, past the limit),
and the same bucket a tenure client's ``session.rate_limiter`` sees. Timings are
read from the server's own bucket (its TAT, on its wall clock) and from reply
times with generous bounds, never from how fast this machine runs.
"""

from __future__ import annotations

import asyncio
import importlib
import math
import struct
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import ydb
from google.protobuf.duration_pb2 import Duration
from ydb.aio.driver import Driver as AioDriver

import tenure
from tenure._core.rates import Bucket, parse_bucket
from tenure.compat.ydb import _protos as pb
from tenure.errors import PreconditionFailedError
from tests.server.wire import WAIT
from tests.ydb_face.conftest import DATABASE, YdbServer, start_server, unique
from tests.ydb_face.raw import Status, new_node
from tests.ydb_face.sdkkit import apoll

pytestmark = pytest.mark.timeout(60)

rl: Any = pb.rate_limiter
#: YDB's generated stubs of the service, as the SDK picks them for this protobuf
#: (``ydb._grpc.common`` is an alias it makes when imported, which mypy cannot see).
rl_grpc: Any = importlib.import_module("ydb._grpc.common.ydb_rate_limiter_v1_pb2_grpc")


def hdrr(rate: float = 0.0, coefficient: float = 0.0, **more: float) -> Any:
    """HierarchicalDrrSettings (unset fields: 0, as YDB's clients send them)."""
    return rl.HierarchicalDrrSettings(
        max_units_per_second=rate, max_burst_size_coefficient=coefficient, **more
    )


def seconds(value: float) -> Duration:
    """A ``google.protobuf.Duration`` of ``value`` seconds."""
    duration = Duration()
    duration.FromNanoseconds(round(value * 1e9))
    return duration


class Api:
    """YDB's ``RateLimiterService`` stub on one channel, for the resources of one node."""

    def __init__(self, stub: Any, node_path: str, metadata: Any = ()) -> None:
        self.stub = stub
        self.node_path = node_path
        self.metadata = metadata

    async def operation(self, method: str, **fields: Any) -> Any:
        """Call ``method`` on the node; the reply's operation (any status)."""
        fields.setdefault("coordination_node_path", self.node_path)
        request = getattr(rl, f"{method}Request")(**fields)
        call = getattr(self.stub, method)
        return (await call(request, metadata=self.metadata, timeout=WAIT)).operation

    async def status(self, method: str, **fields: Any) -> int:
        """Call ``method``; the status it answers."""
        return int((await self.operation(method, **fields)).status)

    async def ok(self, method: str, result: Any = None, **fields: Any) -> Any:
        """Call ``method``, which must succeed; its result (a ``result`` message) or None."""
        operation = await self.operation(method, **fields)
        assert operation.status == Status.SUCCESS, operation
        if result is None:
            return None
        unpacked = result()
        assert operation.result.Unpack(unpacked)
        return unpacked

    async def create(self, path: str, settings: Any) -> None:
        """Create the resource ``path`` (it must succeed)."""
        resource = {"resource_path": path, "hierarchical_drr": settings}
        await self.ok("CreateResource", resource=resource)

    async def describe(self, path: str) -> Any:
        """The settings DescribeResource answers for ``path``."""
        result = await self.ok("DescribeResource", rl.DescribeResourceResult, resource_path=path)
        assert result.resource.resource_path == path
        return result.resource.hierarchical_drr

    async def listed(self, path: str = "", recursive: bool = False) -> list[str]:
        """What ListResources answers."""
        result = await self.ok(
            "ListResources", rl.ListResourcesResult, resource_path=path, recursive=recursive
        )
        return list(result.resource_paths)

    async def acquire(self, path: str, timeout: float | None = None, **units: int) -> Any:
        """AcquireResource of ``path`` (``required=N`` or ``used=N``) with an operation
        timeout of ``timeout`` seconds (None: none); its operation."""
        params = {} if timeout is None else {"operation_timeout": seconds(timeout)}
        return await self.operation(
            "AcquireResource", resource_path=path, operation_params=params, **units
        )


@pytest.fixture
async def stub(server: YdbServer) -> AsyncIterator[Any]:
    """YDB's generated ``RateLimiterService`` stub on a channel to the module server."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.ydb_port}") as channel:
        yield rl_grpc.RateLimiterServiceStub(channel)


@pytest.fixture
async def api(server: YdbServer, stub: Any) -> Api:
    """The stub, for the resources of a new node."""
    return Api(stub, await new_node(server))


def node_of(api: Api) -> str:
    """The tenure node of ``api``'s YDB node."""
    return api.node_path.removeprefix(DATABASE + "/")


async def bucket(server: YdbServer, api: Api, path: str) -> Bucket:
    """The bucket of resource ``path``, as a tenure client reads it."""
    async with tenure.connect(server.url) as client, client.session(node_of(api)) as session:
        data = (await session.semaphore(f"ratelimiter/{path}").describe()).data
    return parse_bucket(path, data)


# -- the control plane ----------------------------------------------------------------------


async def test_resources_are_created_described_altered_listed_and_dropped(
    server: YdbServer, api: Api
) -> None:
    root = hdrr(10.0, 2.0, prefetch_coefficient=0.5, prefetch_watermark=0.75)
    await api.create("api", root)
    await api.create("api/search", hdrr())  # inherits everything
    await api.create("api/search/fast", hdrr(100.0))  # above its parent's: capped
    await api.create("other", hdrr(1.5))
    # Described as given (YDB describes a resource's own settings, not what it inherits).
    assert await api.describe("api") == root
    assert await api.describe("api/search") == hdrr()
    assert await api.describe("api/search/fast") == hdrr(100.0)
    assert await api.listed() == ["api", "other"]
    assert await api.listed(recursive=True) == ["api", "api/search", "api/search/fast", "other"]
    assert await api.listed("api") == ["api"]
    assert await api.listed("api", recursive=True) == ["api", "api/search", "api/search/fast"]
    # Each is the tenure limiter ratelimiter/PATH with its effective rate and burst.
    assert await bucket(server, api, "api") == Bucket(10.0, 20.0, 0.0)
    assert await bucket(server, api, "api/search") == Bucket(10.0, 10.0, 0.0)
    assert await bucket(server, api, "api/search/fast") == Bucket(10.0, 10.0, 0.0)
    assert await bucket(server, api, "other") == Bucket(1.5, 1.5, 0.0)

    # An alter replaces the settings, and the descendants that inherit follow.
    await api.ok("AlterResource", resource={"resource_path": "api", "hierarchical_drr": hdrr(4.0)})
    assert await api.describe("api") == hdrr(4.0)
    assert await bucket(server, api, "api") == Bucket(4.0, 4.0, 0.0)
    assert await bucket(server, api, "api/search") == Bucket(4.0, 4.0, 0.0)
    assert await bucket(server, api, "api/search/fast") == Bucket(4.0, 4.0, 0.0)
    await api.ok("AlterResource", resource={"resource_path": "api", "hierarchical_drr": hdrr(50.0)})
    assert await bucket(server, api, "api/search/fast") == Bucket(50.0, 50.0, 0.0)

    for path in ("api/search/fast", "api/search", "api", "other"):
        await api.ok("DropResource", resource_path=path)
    assert await api.listed(recursive=True) == []
    async with tenure.connect(server.url) as client:
        # Both semaphores of each resource are gone, and no session was left behind.
        assert await client.list_semaphores(node_of(api)) == []
        assert await client.list_sessions(node_of(api)) == []


async def test_a_limiter_made_by_a_tenure_client_is_a_resource(server: YdbServer, api: Api) -> None:
    async with tenure.connect(server.url) as client, client.session(node_of(api)) as session:
        limiter = session.rate_limiter("ratelimiter/made", rate=8.0, burst=2.0)
        assert await limiter.try_acquire(1)
        await session.semaphore("ratelimiter/plain").create(1, b"not a bucket")
        # Without a resource above it, a limiter is a root, whatever its path.
        assert await session.rate_limiter("ratelimiter/plain/x", 1.0, 1.0).try_acquire(1)
    assert await api.listed() == ["made", "plain/x"]
    assert await api.listed(recursive=True) == ["made", "plain/x"]
    assert await api.describe("made") == hdrr(8.0, 0.25)
    assert (await api.acquire("plain/x", used=1)).status == Status.SUCCESS
    # Created again with the settings it has: ALREADY_EXISTS; with others: BAD_REQUEST.
    same = {"resource_path": "made", "hierarchical_drr": hdrr(8.0, 0.25)}
    assert await api.status("CreateResource", resource=same) == Status.ALREADY_EXISTS
    other = {"resource_path": "made", "hierarchical_drr": hdrr(9.0)}
    assert await api.status("CreateResource", resource=other) == Status.BAD_REQUEST
    plain = {"resource_path": "plain", "hierarchical_drr": hdrr(9.0)}
    assert await api.status("CreateResource", resource=plain) == Status.PRECONDITION_FAILED


def _with_unknown_field(settings: Any, number: int) -> Any:
    """``settings`` with a double field ``number`` this protocol does not know (as a
    newer YDB's ``immediately_fill_up_to`` arrives)."""
    data = settings.SerializeToString() + bytes([number << 3 | 1]) + struct.pack("<d", 3.0)
    return rl.HierarchicalDrrSettings.FromString(data)


@pytest.mark.parametrize(
    ("path", "settings", "status"),
    [
        ("", hdrr(1.0), Status.BAD_REQUEST),
        ("/a", hdrr(1.0), Status.BAD_REQUEST),
        ("a/", hdrr(1.0), Status.BAD_REQUEST),
        ("a//b", hdrr(1.0), Status.BAD_REQUEST),
        ("a b", hdrr(1.0), Status.BAD_REQUEST),
        ("a" * 1020, hdrr(1.0), Status.BAD_REQUEST),
        ("root", hdrr(), Status.BAD_REQUEST),  # a root sets its rate
        ("root", None, Status.BAD_REQUEST),  # no settings at all
        ("root", hdrr(-1.0), Status.BAD_REQUEST),
        ("root", hdrr(math.nan), Status.BAD_REQUEST),
        ("root", hdrr(math.inf), Status.BAD_REQUEST),
        ("root", hdrr(2e15), Status.BAD_REQUEST),  # past tenure's range
        ("root", hdrr(1.0, -1.0), Status.BAD_REQUEST),
        ("root", hdrr(1e10, 1e10), Status.BAD_REQUEST),  # a burst past tenure's range
        ("root", hdrr(1.0, prefetch_watermark=1.5), Status.BAD_REQUEST),
        ("root", hdrr(1.0, prefetch_coefficient=math.nan), Status.BAD_REQUEST),
        ("root", _with_unknown_field(hdrr(1.0), 5), Status.BAD_REQUEST),
        ("missing/child", hdrr(1.0), Status.BAD_REQUEST),  # its parent does not exist
        ("root", hdrr(1.0, prefetch_coefficient=-1.0), Status.SUCCESS),  # YDB: no prefetch
    ],
)
async def test_a_create_is_checked_as_ydb_checks_it(
    api: Api, path: str, settings: Any, status: int
) -> None:
    resource = (
        {"resource_path": path}
        if settings is None
        else {
            "resource_path": path,
            "hierarchical_drr": settings,
        }
    )
    operation = await api.operation("CreateResource", resource=resource)
    assert operation.status == status, operation
    assert await api.listed() == (["root"] if status == Status.SUCCESS else [])


async def test_calls_on_what_is_missing_or_in_use_are_refused(server: YdbServer, api: Api) -> None:
    await api.create("a", hdrr(1.0))
    await api.create("a/b", hdrr())
    resource = {"resource_path": "x", "hierarchical_drr": hdrr(1.0)}
    assert await api.status("AlterResource", resource=resource) == Status.NOT_FOUND
    assert await api.status("DescribeResource", resource_path="x") == Status.NOT_FOUND
    assert await api.status("DropResource", resource_path="x") == Status.NOT_FOUND
    assert await api.status("ListResources", resource_path="x") == Status.NOT_FOUND
    assert await api.status("AcquireResource", resource_path="x", required=1) == Status.BAD_REQUEST
    # YDB refuses to drop a resource with children, and a root without a rate.
    assert await api.status("DropResource", resource_path="a") == Status.BAD_REQUEST
    resource = {"resource_path": "a", "hierarchical_drr": hdrr()}
    assert await api.status("AlterResource", resource=resource) == Status.BAD_REQUEST
    assert await api.describe("a") == hdrr(1.0)
    assert await api.status("AcquireResource", resource_path="a") == Status.BAD_REQUEST  # no units
    # More units than the burst could never go (YDB would let them wait).
    assert await api.status("AcquireResource", resource_path="a", required=2) == (
        Status.PRECONDITION_FAILED
    )
    missing = Api(api.stub, f"{DATABASE}/{unique('gone')}")
    assert await missing.status("ListResources") == Status.SCHEME_ERROR
    assert await missing.status("AcquireResource", resource_path="a", used=1) == (
        Status.SCHEME_ERROR
    )
    for elsewhere in ("/other/node", ""):
        assert await Api(api.stub, elsewhere).status("ListResources") == Status.BAD_REQUEST
    assert await bucket(server, api, "a") == Bucket(1.0, 1.0, 0.0)  # nothing was taken


async def test_a_call_changes_all_it_would_or_nothing(server: YdbServer, stub: Any) -> None:
    name = unique("rl")
    async with tenure.connect(server.url) as client:
        await client.create_node(name, max_semaphores=1)  # room for a limiter, not its settings
        api = Api(stub, f"{DATABASE}/{name}")
        resource = {"resource_path": "r", "hierarchical_drr": hdrr(1.0)}
        operation = await api.operation("CreateResource", resource=resource)
        assert operation.status == Status.PRECONDITION_FAILED, operation
        assert "max_semaphores" in operation.issues[0].message
        # The limiter made before the settings failed was undone, and the call's session closed.
        assert await client.list_semaphores(name) == []
        assert await client.list_sessions(name) == []


# -- acquiring ------------------------------------------------------------------------------


async def test_required_units_wait_their_turn_in_order(server: YdbServer, api: Api) -> None:
    await api.create("five", hdrr(5.0, 0.2))  # 5 units/s, one at a time
    # A second's worth used first: the next ones wait, however slow this test runs.
    first = await api.acquire("five", used=5)
    assert first.status == Status.SUCCESS, first
    reserved = (await bucket(server, api, "five")).tat
    replies: dict[str, float] = {}

    async def take(who: str) -> None:
        operation = await api.acquire("five", required=1)
        assert operation.status == Status.SUCCESS, operation
        replies[who] = time.monotonic()

    async def reserved_past(tat: float) -> float:
        """Until the bucket shows the next reservation (polled: a round trip each)."""

        async def later() -> float | None:
            now = (await bucket(server, api, "five")).tat
            return now if now > tat else None

        return await apoll(later, "the next reservation")

    async with asyncio.timeout(WAIT):
        second = asyncio.create_task(take("second"))
        after_second = await reserved_past(reserved)
        third = asyncio.create_task(take("third"))
        after_third = await reserved_past(after_second)
        await asyncio.gather(second, third)
    # Each reservation is 1/rate after the one before, and the replies came in order,
    # the third about 1/rate after the second (the server slept each one's wait).
    assert after_second == pytest.approx(reserved + 0.2, abs=1e-6)
    assert after_third == pytest.approx(after_second + 0.2, abs=1e-6)
    gap = replies["third"] - replies["second"]
    assert 0.05 < gap < 2.0, gap


async def test_required_units_past_the_timeout_are_refused_at_once(
    server: YdbServer, api: Api
) -> None:
    await api.create("slow", hdrr(0.2, 5.0))  # one unit every 5 s, one at a time
    assert (await api.acquire("slow", required=1)).status == Status.SUCCESS
    before = await bucket(server, api, "slow")
    started = time.monotonic()
    refused = await api.acquire("slow", timeout=0.3, required=1)
    elapsed = time.monotonic() - started
    assert refused.status == Status.TIMEOUT, refused
    assert elapsed < 4.0, elapsed  # answered at once, not after the ~5 s the units needed
    # cancel_after shorter than the operation's timeout: CANCELLED, as YDB answers.
    params = {"operation_timeout": seconds(2.0), "cancel_after": seconds(0.5)}
    cancelled = await api.operation(
        "AcquireResource", resource_path="slow", operation_params=params, required=1
    )
    assert cancelled.status == Status.CANCELLED, cancelled
    assert await bucket(server, api, "slow") == before  # nothing was taken


async def test_used_units_are_taken_at_once_past_the_limit(server: YdbServer, api: Api) -> None:
    await api.create("ten", hdrr(10.0))
    started = time.time()
    used = await api.acquire("ten", used=50)  # five seconds' worth, and the burst is 10
    assert used.status == Status.SUCCESS, used
    tat = (await bucket(server, api, "ten")).tat
    assert started + 5.0 <= tat <= time.time() + 5.0
    assert (await api.acquire("ten", timeout=0.3, required=1)).status == Status.TIMEOUT
    async with tenure.connect(server.url) as client, client.session(node_of(api)) as session:
        assert not await session.rate_limiter("ratelimiter/ten", 10.0, 10.0).try_acquire(1)


async def test_a_parent_limits_its_children_together(server: YdbServer, api: Api) -> None:
    await api.create("shared", hdrr(5.0, 0.2))  # 5 units/s, one at a time, for both
    await api.create("shared/x", hdrr())
    await api.create("shared/y", hdrr())
    assert await bucket(server, api, "shared/y") == Bucket(5.0, 5.0, 0.0)  # its own burst: 5
    # A second's worth used through x counts in its parent's bucket too.
    assert (await api.acquire("shared/x", used=5)).status == Status.SUCCESS
    # y's own bucket is full, its parent's is not: refused within a short timeout...
    assert (await api.acquire("shared/y", timeout=0.05, required=1)).status == Status.TIMEOUT
    parent = (await bucket(server, api, "shared")).tat
    # ...and granted after its turn in the parent's, which both buckets count it at.
    assert (await api.acquire("shared/y", required=1)).status == Status.SUCCESS
    assert (await bucket(server, api, "shared")).tat == pytest.approx(parent + 0.2, abs=1e-6)
    assert (await bucket(server, api, "shared/y")).tat == pytest.approx(parent + 0.2, abs=1e-6)


# -- the same limiter as tenure's -------------------------------------------------------------


async def test_a_tenure_client_shares_the_bucket(server: YdbServer, api: Api) -> None:
    await api.create("both", hdrr(2.0, 1.0))
    async with tenure.connect(server.url) as client, client.session(node_of(api)) as session:
        limiter = session.rate_limiter("ratelimiter/both", rate=2.0, burst=2.0)
        assert await limiter.try_acquire(2)  # the whole burst, through tenure
        assert (await api.acquire("both", timeout=0.1, required=1)).status == Status.TIMEOUT
        assert (await api.acquire("both", used=1)).status == Status.SUCCESS
        tat = (await bucket(server, api, "both")).tat
        assert not await limiter.try_acquire(1)  # YDB's use counts for tenure too
        # The limiter is the resource's: a tenure client that expects another rate is told.
        with pytest.raises(PreconditionFailedError):
            await session.rate_limiter("ratelimiter/both", rate=3.0, burst=3.0).try_acquire(1)
        # A tenure client's reconfigure() shows in YDB's describe (the bucket is the truth).
        await limiter.reconfigure(4.0, 8.0)
    assert await api.describe("both") == hdrr(4.0, 2.0)
    assert (await bucket(server, api, "both")).tat == tat


async def test_the_sdk_driver_calls_the_service(aio_driver: AioDriver, server: YdbServer) -> None:
    node = await new_node(server)

    def checked(rpc_state: Any, response: Any) -> Any:
        ydb.issues._process_response(response.operation)
        return response

    async def call(method: str, settings: Any = None, **fields: Any) -> Any:
        request = getattr(rl, f"{method}Request")(coordination_node_path=node, **fields)
        stub = rl_grpc.RateLimiterServiceStub
        return await aio_driver(request, stub, method, wrap_result=checked, settings=settings)

    resource = {"resource_path": "r", "hierarchical_drr": hdrr(0.5, 2.0)}
    await call("CreateResource", resource=resource)
    with pytest.raises(ydb.issues.AlreadyExists):
        await call("CreateResource", resource=resource)
    await call("AcquireResource", resource_path="r", required=1)
    # The SDK sends its timeout as the operation's: one unit in 2 s does not fit in 0.3 s.
    quick = ydb.BaseRequestSettings().with_timeout(0.3)
    with pytest.raises(ydb.issues.Timeout):
        await call("AcquireResource", settings=quick, resource_path="r", required=1)
    with pytest.raises(ydb.issues.NotFound):
        await call("DescribeResource", resource_path="nope")
    await call("DropResource", resource_path="r")


# -- who may ------------------------------------------------------------------------------------

AUTH_FILE = """
[[token]]
name = "admin"
secret = "rl-admin-secret-1"
access = "read-write"

[[token]]
name = "reader"
secret = "rl-reader-secret-2"
access = "read-only"
"""


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[YdbServer]:
    """A server with an auth file."""
    base: Path = tmp_path_factory.mktemp("ydb-rl-auth")
    (base / "tokens.toml").write_text(AUTH_FILE)
    running = start_server(base / "data", "--auth-file", str(base / "tokens.toml"))
    try:
        yield running
    finally:
        running.process.kill()


async def test_calls_are_authorized_as_the_coordination_calls_are(guarded: YdbServer) -> None:
    admin = [("x-ydb-auth-ticket", "rl-admin-secret-1")]
    reader = [("x-ydb-auth-ticket", "rl-reader-secret-2")]
    node = await new_node(guarded, admin)
    async with grpc.aio.insecure_channel(f"127.0.0.1:{guarded.ydb_port}") as channel:
        stub = rl_grpc.RateLimiterServiceStub(channel)
        as_admin, as_reader, anonymous = (Api(stub, node, m) for m in (admin, reader, ()))
        await as_admin.create("r", hdrr(1.0))
        assert await anonymous.status("ListResources") == Status.UNAUTHORIZED
        assert await as_reader.listed() == ["r"]
        assert await as_reader.describe("r") == hdrr(1.0)
        resource = {"resource_path": "s", "hierarchical_drr": hdrr(1.0)}
        assert await as_reader.status("CreateResource", resource=resource) == Status.UNAUTHORIZED
        assert await as_reader.status("AcquireResource", resource_path="r", used=1) == (
            Status.UNAUTHORIZED
        )
        assert await as_reader.status("DropResource", resource_path="r") == Status.UNAUTHORIZED
        assert (await as_admin.acquire("r", used=1)).status == Status.SUCCESS
        await as_admin.ok("DropResource", resource_path="r")
