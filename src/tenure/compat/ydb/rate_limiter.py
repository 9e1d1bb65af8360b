"""YDB's rate limiter service (``Ydb.RateLimiter.V1.RateLimiterService``) over tenure's
rate limiters.

``CreateResource``, ``AlterResource``, ``DropResource``, ``ListResources``,
``DescribeResource`` and ``AcquireResource``, on the face's port with its tickets
and its operation-wrapped answers; what a resource is, :mod:`.resources`.

Each call reads the node's semaphores, decides, and writes what it changes in one
step: nothing else runs between its read and its writes (the host applies one
command at a time, and the step never yields), so a call sees no other call's
half-done work and an acquire takes its units from a resource and its ancestors
at once. Its writes are all or none, in an engine session opened and closed in the
same step (:mod:`.steps`); a call that writes nothing (a describe, a list, a
refused acquire) opens none. Every answer leaves after the commit that covers it;
an acquire's answer then waits, on the event loop, until its units may go.

A call reads the range of the node's sorted names that it needs (a resource's, its
descendants'), never every semaphore of the node. ``ListResources``, which writes
nothing, reads its range over several steps: ``--step-budget`` names per step,
every other request served between (:mod:`.resource_scan`). YDB's call has no
pages, so the list is answered whole, up to ``--ydb-max-listed-resources`` paths:
past them it is refused (``PRECONDITION_FAILED``, naming the setting).

Statuses are YDB's (``ydb/core/grpc_services/rpc_rate_limiter_api.cpp`` and the
kesus tablet's ``tx_quoter_resource_*.cpp``): a path that is not canonical, bad
settings, a missing parent, dropping a resource with children, creating one that
exists with other settings, acquiring an unknown resource: ``BAD_REQUEST``; a
missing resource otherwise ``NOT_FOUND``; one that exists with the same settings
``ALREADY_EXISTS``; a missing node ``SCHEME_ERROR``; units that could go only
past the call's timeout ``TIMEOUT`` (``CANCELLED`` when its ``cancel_after`` is
the shorter), answered at once with nothing taken.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final

import grpc

from tenure._core import (
    CreateSemaphore,
    DeleteSemaphore,
    DescribeSemaphore,
    ListSemaphores,
    ReserveUnits,
    UpdateSemaphore,
)
from tenure._core.engine import DEFAULT_STEP_BUDGET
from tenure._core.node import Node
from tenure._core.rates import Bucket, bucket_data, check_units
from tenure.compat.ydb import _protos as pb
from tenure.compat.ydb.paths import Database, OutsideDatabaseError
from tenure.compat.ydb.resources import (
    LIMITER_PREFIX,
    SETTINGS_PREFIX,
    Resources,
    check_path,
    check_settings,
    effective,
    settings_data,
    take,
)
from tenure.compat.ydb.settings import DEFAULT_MAX_LISTED_RESOURCES
from tenure.compat.ydb.steps import WriteStep, admit_request, authorize
from tenure.compat.ydb.tickets import Tickets, UnauthorizedError
from tenure.errors import LimitExceededError, TenureError, code_of
from tenure.server.plug import Auditor, HostCalls, Token, peer_host, record_quota_refusal

#: The gRPC service.
SERVICE: Final = "Ydb.RateLimiter.V1.RateLimiterService"
#: Its methods, by the name the face's metrics give each.
METHODS: Final = {
    "CreateResource": "create_resource",
    "AlterResource": "alter_resource",
    "DropResource": "drop_resource",
    "ListResources": "list_resources",
    "DescribeResource": "describe_resource",
    "AcquireResource": "acquire_resource",
}

#: What a call answers: its result message (None: none), and how long after the
#: commit (seconds from the call's step) the answer waits.
Outcome = tuple[Any, float]
#: One call's work: of its node, token, request and gRPC context (awaited: a listing,
#: which reads its range over several steps).
Work = Callable[[str, Token | None, Any, Any], Outcome | Awaitable[Outcome]]
#: How the face makes a unary method: its metric's name, the call, the request's and
#: the response's message types.
Unary = Callable[[str, Callable[[Any, Any], Any], Any, Any], grpc.RpcMethodHandler]

_Status: Final = pb.Status


class RateLimiterCalls:
    """The six calls of YDB's rate limiter service (see the module docstring).

    ``draining()``: whether the server is stopping; ``peer(context)``: the client of
    a call (as the face names it); ``step_budget``: the names a listing reads per step
    (the server's ``--step-budget``); ``max_listed``: the most paths it answers.
    """

    def __init__(
        self,
        host: HostCalls,
        tickets: Tickets,
        database: Database,
        draining: Callable[[], bool],
        peer: Callable[[Any], str],
        *,
        audit: Auditor | None = None,
        step_budget: int = DEFAULT_STEP_BUDGET,
        max_listed: int = DEFAULT_MAX_LISTED_RESOURCES,
    ) -> None:
        """``audit``: where a refusal by a quota or the memory budget is recorded
        (``--audit-log``; None: off)."""
        self.host = host
        self.audit = audit
        self.tickets = tickets
        self.database = database
        self.step_budget = step_budget
        self.max_listed = max_listed
        self._draining = draining
        self._peer = peer

    def handler(self, unary: Unary) -> grpc.GenericRpcHandler:
        """The service's gRPC handler, its methods made by the face's ``unary``."""
        messages = pb.rate_limiter
        return grpc.method_handlers_generic_handler(
            SERVICE,
            {
                method: unary(
                    metric,
                    getattr(self, metric),
                    getattr(messages, f"{method}Request"),
                    getattr(messages, f"{method}Response"),
                )
                for method, metric in METHODS.items()
            },
        )

    # -- the calls -----------------------------------------------------------------------

    async def create_resource(self, request: Any, context: Any) -> Any:
        """``CreateResource``: a resource under an existing parent (or a root)."""
        operation = await self._run(request, context, self._create)
        return pb.rate_limiter.CreateResourceResponse(operation=operation)

    async def alter_resource(self, request: Any, context: Any) -> Any:
        """``AlterResource``: new settings (all of them, as YDB replaces them)."""
        operation = await self._run(request, context, self._alter)
        return pb.rate_limiter.AlterResourceResponse(operation=operation)

    async def drop_resource(self, request: Any, context: Any) -> Any:
        """``DropResource``: a resource without children."""
        operation = await self._run(request, context, self._drop)
        return pb.rate_limiter.DropResourceResponse(operation=operation)

    async def list_resources(self, request: Any, context: Any) -> Any:
        """``ListResources``: the roots, every resource, one, or one and those below it."""
        operation = await self._run(request, context, self._list)
        return pb.rate_limiter.ListResourcesResponse(operation=operation)

    async def describe_resource(self, request: Any, context: Any) -> Any:
        """``DescribeResource``: its path and settings."""
        operation = await self._run(request, context, self._describe)
        return pb.rate_limiter.DescribeResourceResponse(operation=operation)

    async def acquire_resource(self, request: Any, context: Any) -> Any:
        """``AcquireResource``: wait for ``required`` units, or take ``used`` ones now."""
        operation = await self._run(request, context, self._acquire)
        return pb.rate_limiter.AcquireResourceResponse(operation=operation)

    def _refused(
        self, token: Token | None, context: Any, error: BaseException, request: Any
    ) -> None:
        """Record ``error`` in the audit log if a quota of ``token``, or the memory
        budget, refused the call (as the native face does)."""
        record_quota_refusal(
            self.audit,
            error,
            token=token.name if token is not None else None,
            address=peer_host(self._peer(context)),
            via="ydb",
            request=type(request).__name__,
        )

    async def _run(self, request: Any, context: Any, work: Work) -> Any:
        """Do ``work`` for the call; its operation, once durable (and its wait is over).

        A refusal waits for the commit too: it may tell of a change (a resource made
        in the same turn) that the disk does not have yet.
        """
        loop = asyncio.get_running_loop()
        started, wait = 0.0, 0.0
        token: Token | None = None
        try:
            if self._draining():
                raise pb.StatusError(_Status.UNAVAILABLE, "the server is shutting down")
            token = self.tickets.token_of(context.invocation_metadata(), self._peer(context))
            admit_request(self.host, token)
            node = self._node_of(request.coordination_node_path)
            started = loop.time()  # (when the work's step reads the clock: its wait's start)
            done = work(node, token, request, context)
            result, wait = done if isinstance(done, tuple) else await done
            answer = pb.operation(_Status.SUCCESS, result)
        except UnauthorizedError as error:
            answer = pb.operation(_Status.UNAUTHORIZED, why=[str(error)])
        except pb.StatusError as error:
            self._refused(token, context, error, request)
            answer = pb.operation(error.status, why=[str(error)])
        except (TenureError, TimeoutError) as error:
            self._refused(token, context, error, request)
            answer = pb.operation(pb.status_of(code_of(error)), why=[str(error)])
        await self.host.committed()  # no answer tells of a change the disk lacks
        if self.host.dead:
            return pb.operation(_Status.UNAVAILABLE, why=["the server failed to commit"])
        if wait > 0:
            await asyncio.sleep(max(0.0, started + wait - loop.time()))
        return answer

    def _create(self, node: str, token: Token | None, request: Any, context: Any) -> Outcome:
        resource = request.resource
        path = check_path(resource.resource_path)
        settings = check_settings(resource)
        authorize(token, CreateSemaphore(0, LIMITER_PREFIX + path, 1), node)
        tree = self._resources(node)
        found = tree.get(path)
        if found is not None:
            if tree.described(found) == settings:
                why = "Resource already exists and has same settings."
                raise pb.StatusError(_Status.ALREADY_EXISTS, why)
            why = "Resource already exists and has different settings."
            raise pb.StatusError(_Status.BAD_REQUEST, why)
        parent = None
        if "/" in path:
            above = path.rpartition("/")[0]
            parent = tree.get(above)
            if parent is None:
                why = f'Parent resource "{above}" doesn\'t exist.'
                raise pb.StatusError(_Status.BAD_REQUEST, why)
        rate, burst = effective(settings, None if parent is None else parent.bucket)
        with WriteStep(self.host, token, node, self._peer(context)) as step:
            step.create(LIMITER_PREFIX + path, bucket_data(Bucket(rate, burst, 0.0)))
            _keep(step, tree, path, settings)
        return None, 0.0

    def _alter(self, node: str, token: Token | None, request: Any, context: Any) -> Outcome:
        resource = request.resource
        path = check_path(resource.resource_path)
        settings = check_settings(resource)
        authorize(token, UpdateSemaphore(0, LIMITER_PREFIX + path, b""), node)
        tree = self._resources(node)
        found = tree.get(path)
        if found is None:
            raise pb.StatusError(_Status.NOT_FOUND, f'Resource "{path}" doesn\'t exist.')
        writes = tree.rebucket(found, settings)
        with WriteStep(self.host, token, node, self._peer(context)) as step:
            for name, old, new in writes:
                step.write(name, old, new)
            _keep(step, tree, path, settings)
        return None, 0.0

    def _drop(self, node: str, token: Token | None, request: Any, context: Any) -> Outcome:
        path = check_path(request.resource_path)
        authorize(token, DeleteSemaphore(0, LIMITER_PREFIX + path), node)
        tree = self._resources(node)
        found = tree.get(path)
        if found is None:
            raise pb.StatusError(_Status.NOT_FOUND, f'Resource "{path}" doesn\'t exist.')
        if tree.has_children(path):
            raise pb.StatusError(_Status.BAD_REQUEST, f'Resource "{path}" has children.')
        kept = tree.semaphores.get(SETTINGS_PREFIX + path)
        with WriteStep(self.host, token, node, self._peer(context)) as step:
            step.delete(LIMITER_PREFIX + path, found.data)
            if kept is not None:
                step.delete(SETTINGS_PREFIX + path, kept.data)
        return None, 0.0

    async def _list(self, node: str, token: Token | None, request: Any, context: Any) -> Outcome:
        path = request.resource_path
        if path:
            check_path(path)
        authorize(token, ListSemaphores(node, LIMITER_PREFIX), node)
        tree = self._resources(node)
        paths: list[str] = []
        if path:
            if tree.get(path) is None:
                why = f'Resource with path "{path}" doesn\'t exist.'
                raise pb.StatusError(_Status.NOT_FOUND, why)
            paths.append(path)
        if request.recursive or not path:
            # The range, a step at a time: the node is looked up again after each
            # yield (it may be gone), and the list is refused once past its most.
            scan = tree.scan(path, roots=not path and not request.recursive)
            found = tree.node
            while True:
                paths += (resource.path for resource in scan.step(found, self.step_budget))
                if len(paths) > self.max_listed:
                    raise LimitExceededError(
                        f"ListResources would answer more than {self.max_listed} resources "
                        "(--ydb-max-listed-resources); list a resource's own instead"
                    )
                if scan.done:
                    break
                await asyncio.sleep(0)  # (every other request's turn)
                if self._draining():
                    raise pb.StatusError(_Status.UNAVAILABLE, "the server is shutting down")
                found = self._node(node)
        return pb.rate_limiter.ListResourcesResult(resource_paths=paths), 0.0

    def _describe(self, node: str, token: Token | None, request: Any, context: Any) -> Outcome:
        path = check_path(request.resource_path)
        authorize(token, DescribeSemaphore(0, LIMITER_PREFIX + path), node)
        tree = self._resources(node)
        found = tree.get(path)
        if found is None:
            why = f'Resource with path "{path}" doesn\'t exist.'
            raise pb.StatusError(_Status.NOT_FOUND, why)
        described = {"resource_path": path, "hierarchical_drr": tree.described(found)}
        return pb.rate_limiter.DescribeResourceResult(resource=described), 0.0

    def _acquire(self, node: str, token: Token | None, request: Any, context: Any) -> Outcome:
        path = check_path(request.resource_path)
        kind = request.WhichOneof("units")
        if kind is None:
            raise pb.StatusError(_Status.BAD_REQUEST, "Units are not set: required or used.")
        count = check_units(float(getattr(request, kind)))
        authorize(token, ReserveUnits(0, LIMITER_PREFIX + path, count, None), node)
        tree = self._resources(node)
        found = tree.get(path)
        if found is None:  # (YDB's quoter: an unknown resource is BAD_REQUEST)
            raise pb.StatusError(_Status.BAD_REQUEST, f"Unknown resource {path!r}.")
        max_wait, late = _limits(request.operation_params, context)
        chain = [found, *tree.ancestors(path)]
        # The server's wall clock, as its host gives ReserveUnits (tenure._core.rates).
        now = time.time()
        wait, writes = take(chain, count, wait=kind == "required", max_wait=max_wait, now=now)
        if writes is None:
            why = (
                f"{count:g} units of resource {path!r} could go only in {wait:.3f} s, "
                f"past the call's timeout of {max_wait:g} s (nothing was taken)"
            )
            raise pb.StatusError(late, why)
        with WriteStep(self.host, token, node, self._peer(context)) as step:
            for name, old, new in writes:
                step.write(name, old, new)
        return None, wait

    def _node_of(self, path: str) -> str:
        """The tenure node of ``coordination_node_path`` (BAD_REQUEST outside the database)."""
        if not path:
            raise pb.StatusError(_Status.BAD_REQUEST, "Empty path.")
        try:
            return self.database.node_of(path)
        except OutsideDatabaseError as error:
            raise pb.StatusError(_Status.BAD_REQUEST, str(error)) from None

    def _resources(self, node: str) -> Resources:
        """The resources of ``node`` (SCHEME_ERROR if it is missing)."""
        return Resources(self._node(node))

    def _node(self, node: str) -> Node:
        """The engine's node ``node`` (SCHEME_ERROR if it is missing)."""
        found = self.host.engine.nodes.get(node)
        if found is None:
            why = f"Coordination node {self.database.path_of(node)!r} not found"
            raise pb.StatusError(_Status.SCHEME_ERROR, why)
        return found


def _keep(step: WriteStep, tree: Resources, path: str, settings: Any) -> None:
    """Keep ``settings`` as the YDB settings of the resource at ``path``."""
    name, data = SETTINGS_PREFIX + path, settings_data(settings)
    kept = tree.semaphores.get(name)
    if kept is None:
        step.create(name, data)
    else:
        step.write(name, kept.data, data)


def _limits(params: Any, context: Any) -> tuple[float | None, int]:
    """The longest an acquire may wait (None: no limit), and the status it is refused
    with past it: the shortest of ``operation_timeout``, ``cancel_after`` and the
    call's gRPC deadline; ``CANCELLED`` when ``cancel_after`` is shorter than a set
    ``operation_timeout``, as YDB answers (``QuoterDeadlineStatusCode``), else ``TIMEOUT``.
    """
    operation, cancel = _seconds(params.operation_timeout), _seconds(params.cancel_after)
    limits = [seconds for seconds in (operation, cancel) if seconds > 0]
    left = context.time_remaining()
    if left is not None:
        limits.append(max(0.0, float(left)))
    late = _Status.CANCELLED if 0 < cancel < operation else _Status.TIMEOUT
    return (min(limits) if limits else None), int(late)


def _seconds(duration: Any) -> float:
    """A ``google.protobuf.Duration`` in seconds (0 when unset)."""
    return float(duration.seconds + duration.nanos / 1e9)
