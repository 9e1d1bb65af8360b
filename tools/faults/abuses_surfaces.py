"""The hostile tenant's abuses of issue 47 ("no tenant can hurt another, round two").

Each is an abuse of :mod:`tools.faults.abuse_kit` (bounded by its count and the
phase's deadline, but not before its evidence, :data:`~tools.faults.abuse_kit.EVIDENCE`;
every answer counted, undone after), registered in
:data:`tools.faults.abuses.ABUSES` through :data:`SURFACES`. The tokens are
:mod:`tools.faults.tokens`'s; the nodes are the admin's (:func:`tools.faults.tenant.fill`).

* ``prefix-watches``: ``watcher`` (read-only, the workload's node, a read-only
  token's default quotas) opens 10 sessions and asks 1,000 ``WatchPrefix("")`` in
  each (100 at a time; no more in a session once a hundred are all refused), then
  drops its connections: the sessions stay, detached (for their recovery window, a
  minute), and every honest change of the node fires every watch armed into them
  (a scan of each detached session's queue per firing cost ~1 s a change). Two
  seconds later (or at the phase's end) it re-attaches and closes them.
* ``claims``: ``claimer`` (a data quota of its own, 1 MiB) writes ended claims'
  records into 32 small semaphores of its node (any writer may), then claims each
  with 64 KiB of data (claims skipped the data quota and the memory budget: all 32
  were granted, 4 MiB of records).
* ``limiters``: ``bulk`` made 2,000 deep YDB rate-limiter resources' semaphores
  (``ratelimiter/PATH``, 200 roots 250 levels deep with 9 below each) through the
  native protocol before the phases (:func:`fill_limiters`); ``auditor`` (read-only)
  lists them through the YDB face 6 times a phase (``ListResources``, recursive and
  not), and ``bulk`` makes one more below a root, alters the root and drops the new
  one there (a listing read every semaphore of the node in one step).
* ``deadlocks``: ``bulk``'s 300 tasks of one session each hold a mutex of a 1 KB
  name and wait for the next one's: the last wait closes the cycle and is refused
  (DeadlockError), and asked again 8 times; then the node is described (its kept
  deadlocks' texts made that 2.5 MB, and the description failed for everyone):
  ``done`` if it answered, else ``failed`` as ``describe-node ERROR``.
* ``board``: ``ops`` (read-only, the node of 60 groups of 1,000 members) asks the
  dashboard's view (``GET /dashboard/api/board``) once a second, 5 at most
  (each view took 0.5-1.7 s of the server's loop): ``done`` for a 200, ``refused`` as ``http
  STATUS`` for a 429 or 503 (a bound said no), else ``failed`` as ``http STATUS``.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
from typing import Any, Final

import aiohttp
import grpc

import tenure
from tenure._core import (
    Acquire,
    AttachSession,
    CloseSession,
    CreateSemaphore,
    CreateSession,
    WatchPrefix,
)
from tenure._core.claims import ClaimRecord, claim_data
from tenure._core.members import GROUP_DATA, member_record
from tenure._core.rates import Bucket, bucket_data
from tenure.compat.ydb import _protos as pb
from tenure.errors import TenureError
from tools.faults.abuse_kit import (
    FAILED,
    STEP,
    Abuse,
    Tally,
    Tenant,
    answer,
    answers,
    quietly,
    wire,
)
from tools.faults.history import now
from tools.faults.tokens import (
    AUDITOR,
    BULK,
    CLAIMER,
    CYCLE_NODE,
    GROUPS,
    GROUPS_NODE,
    HONEST_NODE,
    JOBS_NODE,
    LIMITS_NODE,
    MEMBERS,
    OPS,
    WATCHER,
)

#: ``prefix-watches``: detached sessions, prefix watches asked in each, their window.
DETACHED: Final = 10
PREFIX_WATCHES: Final = 1_000
#: Prefix watches asked at once; a session asks no more once a whole batch is refused.
WATCH_BATCH: Final = 100
DETACHED_WINDOW: Final = 60.0
#: How long the detached sessions are left before they are closed (the phase's end
#: if sooner): the honest clients change the node many times a second meanwhile, and
#: each change cost ~1 s with them. Bounded like every other abuse's count, so that
#: the phase lasts as long as the abuses' work, not as long as their waiting.
DETACHED_FOR: Final = 2.0
#: ``claims``: semaphores claimed, each with this much data.
CLAIMS: Final = 32
CLAIM_DATA: Final = b"c" * 65_536
#: ``limiters``: roots, resources below each, levels of each root; listings at most.
ROOTS: Final = 200
BELOW: Final = 9
DEPTH: Final = 250
LISTINGS: Final = 6
#: ``deadlocks``: links of the cycle, bytes of each name, refusals asked.
LINKS: Final = 300
NAME_BYTES: Final = 1_000
ROUNDS: Final = 8
#: ``board``: views asked at most, and the least time between two (a page reloaded
#: every second: one view took 0.5-1.7 s of the server's loop before issue 47, so
#: one a second still stalls the old server; at five a second, as first written, the
#: views' own bounded work, some 17 slices each, weighed on the honest p99 of a
#: loaded machine's short run more than any abuse's harm).
VIEWS: Final = 5
VIEW_EVERY: Final = 1.0
#: The YDB face's database, and its header of a token.
YDB_DATABASE: Final = "/local"
_TICKET: Final = "x-ydb-auth-ticket"
_BUCKET: Final = bucket_data(Bucket(1.0, 1.0, 0.0))
_KEY: Final = b"hostile-key"
#: YDB's rate limiter messages, and its generated stubs as its SDK picks them for
#: this protobuf (as tests/ydb_face/test_rate_limiter.py calls the service).
_rl: Any = pb.rate_limiter
_rl_grpc: Any = importlib.import_module("ydb._grpc.common.ydb_rate_limiter_v1_pb2_grpc")


async def _until(deadline: float) -> None:
    """Sleep until the monotonic ``deadline``."""
    await asyncio.sleep(max(0.0, deadline - now()))


async def prefix_watches(tenant: Tenant, tally: Tally, deadline: float) -> None:
    """``prefix-watches`` (module docstring): 10 sessions x 1,000, left detached."""
    left: list[tuple[int, int]] = []  # (session, its seq_no)
    for _ in range(DETACHED):
        if tally.over(deadline):
            break
        client = await wire(tenant, WATCHER.secret)
        try:
            opened = CreateSession(HONEST_NODE, _KEY, timeout=DETACHED_WINDOW)
            info = await answer(tally, client, opened)
            if info is FAILED:
                continue
            left.append((info.session_id, info.seq_no))
            watch = WatchPrefix(info.session_id, "", watch_data=True, watch_owners=True)
            for _ in range(0, PREFIX_WATCHES, WATCH_BATCH):
                got = await answers(tally, client, [client.send(watch) for _ in range(WATCH_BATCH)])
                if all(answer is FAILED for answer in got):
                    break  # (refused: the rest would be too, and only cost our side)
        finally:
            client.writer.transport.abort()  # (not closed: detached, its watches armed)
    await _until(min(deadline, now() + DETACHED_FOR))
    if left:
        client = await wire(tenant, WATCHER.secret)
        try:
            for sid, seq_no in left:
                if await answer(None, client, AttachSession(sid, _KEY, seq_no + 1)) is not FAILED:
                    await answer(None, client, CloseSession(sid))
        finally:
            await client.close()


async def claims(tenant: Tenant, tally: Tally, deadline: float) -> None:
    """``claims`` (module docstring): 32 ended claims' semaphores made, then each
    claimed with 64 KiB (made first: the claims, not the makes, meet the quota)."""
    async with await tenant.client(CLAIMER.secret) as client:
        session = await tenant.ask(tally, client.session(JOBS_NODE, recovery_window=60.0))
        if session is FAILED:
            return
        async with session:
            made: list[str] = []
            for i in range(CLAIMS):
                if tally.over(deadline):
                    break
                name = f"claimed-{i}"
                # An ended claim (granted at 1 s of 1970, for 2 s): anyone may take it over.
                ended = claim_data(ClaimRecord(f"{i:032x}", 1, 1.0, 1.0, 2.0, None, 1, b""))
                if await tenant.ask(tally, session.semaphore(name).create(1, ended)) is not FAILED:
                    made.append(name)
            for name in made:
                if tally.over(deadline):
                    break
                await tenant.ask(tally, session.claim(name, 0.0, 60.0, data=CLAIM_DATA))
            for name in made:
                await quietly(session.semaphore(name).delete(force=True))


def deep_paths() -> list[str]:
    """The resources ``limiters`` makes: :data:`ROOTS` deep roots, each with a chain of
    :data:`BELOW` resources below it."""
    roots = [f"g{g:03d}" + "/x" * DEPTH for g in range(ROOTS)]
    return roots + [root + "/y" * k for root in roots for k in range(1, BELOW + 1)]


async def _ydb(tally: Tally, stub: Any, secret: str, method: str, **fields: Any) -> None:
    """One call of YDB's RateLimiterService on :data:`LIMITS_NODE`, counted by status:
    ``done`` for SUCCESS, else ``failed`` as ``METHOD STATUS`` (a listing past
    ``--ydb-max-listed-resources`` is ``refused``, naming it)."""
    request = getattr(_rl, f"{method}Request")(
        coordination_node_path=f"{YDB_DATABASE}/{LIMITS_NODE}", **fields
    )
    try:
        reply = await getattr(stub, method)(request, metadata=[(_TICKET, secret)], timeout=STEP)
    except grpc.RpcError as error:
        tally.failed[f"{method} {error.code().name}"] += 1
        return
    status = reply.operation.status
    if status == pb.Status.SUCCESS:
        tally.done += 1
    elif "--ydb-max-listed-resources" in " ".join(i.message for i in reply.operation.issues):
        tally.refused["ydb_max_listed_resources"] += 1
    else:
        tally.failed[f"{method} {pb.Status.StatusCode.Name(status)}"] += 1


async def limiters(tenant: Tenant, tally: Tally, deadline: float) -> None:
    """``limiters`` (module docstring): the 2,000 deep resources (:func:`fill_limiters`)
    listed 6 times, recursively and not; one more made below a root, the root altered
    and the new one dropped, through the YDB face."""
    root = deep_paths()[0]
    extra = f"{root}/z"
    altered = {"resource_path": root, "hierarchical_drr": {"max_units_per_second": 4.0}}
    async with grpc.aio.insecure_channel(f"127.0.0.1:{tenant.ports.ydb}") as channel:
        stub = _rl_grpc.RateLimiterServiceStub(channel)
        for count in range(LISTINGS):
            if tally.over(deadline):
                break
            recursive = count % 2 == 0
            await _ydb(tally, stub, AUDITOR.secret, "ListResources", recursive=recursive)
            if count == 0:
                made = {"resource_path": extra, "hierarchical_drr": {}}
                await _ydb(tally, stub, BULK.secret, "CreateResource", resource=made)
                await _ydb(tally, stub, BULK.secret, "AlterResource", resource=altered)
                await _ydb(tally, stub, BULK.secret, "DropResource", resource_path=extra)


async def fill_limiters(tenant: Tenant) -> None:
    """Make the deep resources of :func:`deep_paths` in :data:`LIMITS_NODE` as ``bulk``,
    natively (pipelined), once before the phases: their listing is the abuse (and
    making them again each phase, 4,000 journaled writes, only the machine's load)."""
    client = await wire(tenant, BULK.secret)
    try:
        info = await answer(None, client, CreateSession(LIMITS_NODE, _KEY))
        if info is FAILED:
            raise RuntimeError(f"no session of bulk's in {LIMITS_NODE}")
        sid = info.session_id
        names = [f"ratelimiter/{path}" for path in deep_paths()]
        made = await answers(
            None, client, [client.send(CreateSemaphore(sid, n, 1, _BUCKET)) for n in names]
        )
        if FAILED in made:
            raise RuntimeError(f"the resources of {LIMITS_NODE} could not be made")
        await answer(None, client, CloseSession(sid))
    finally:
        await client.close()


def _link(i: int) -> str:
    """The name of the cycle's mutex ``i``: 1 KB."""
    return f"link-{i:04d}-".ljust(NAME_BYTES, "x")


async def deadlocks(tenant: Tenant, tally: Tally, deadline: float) -> None:
    """``deadlocks`` (module docstring): a cycle of 300 waits of 1 KB names, closed 8
    times, then the node described."""
    async with await tenant.client(BULK.secret) as client:
        session = await tenant.ask(tally, client.session(CYCLE_NODE, recovery_window=60.0))
        if session is FAILED:
            return
        async with session:
            held = asyncio.Event()
            holding: list[int] = []

            async def link(i: int) -> None:
                """Hold mutex ``i``, then wait for mutex ``i + 1`` (its own task: the
                engine tells the cycle's tasks apart by the client's task numbers)."""
                if await tenant.ask(tally, session.mutex(_link(i)).lock()) is FAILED:
                    return
                holding.append(i)
                await held.wait()
                for _ in range(ROUNDS):
                    before = tally.failed["DeadlockError"]
                    await tenant.ask(tally, session.mutex(_link((i + 1) % LINKS)).lock())
                    if tally.failed["DeadlockError"] == before or tally.over(deadline):
                        return  # (granted, or not refused as a deadlock: no retry)

            tasks = [asyncio.create_task(link(i)) for i in range(LINKS)]
            try:
                # Every link held first (the cycle is the evidence: Tally.over), each
                # ask bounded by STEP.
                while len(holding) < LINKS and not tally.over(deadline):
                    done, _ = await asyncio.wait(tasks, timeout=0.1)
                    if len(done) + len(holding) >= LINKS:
                        break
                held.set()
                # Until the refused link has been refused (ROUNDS times, or once past
                # the deadline: it returns then), and no longer: the kept deadlocks,
                # not the waits, are the abuse.
                waiting = [task for task in tasks if not task.done()]
                if waiting:
                    await asyncio.wait(
                        waiting, timeout=ROUNDS * STEP, return_when=asyncio.FIRST_COMPLETED
                    )
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
            # (the session's close releases the links)
        await _describe(tally, client)


async def _describe(tally: Tally, client: tenure.Client) -> None:
    """DescribeNode of :data:`CYCLE_NODE`: ``done``, or ``failed`` as ``describe-node ERROR``."""
    try:
        async with asyncio.timeout(STEP):
            await client.describe_node(CYCLE_NODE)
    except (TenureError, OSError, TimeoutError) as error:
        tally.failed[f"describe-node {type(error).__name__}"] += 1
    else:
        tally.done += 1


async def board(tenant: Tenant, tally: Tally, deadline: float) -> None:
    """``board`` (module docstring): the dashboard's view, one at a time, 5 at most."""
    url = f"http://127.0.0.1:{tenant.ports.http}/dashboard/api/board"
    headers = {"Authorization": f"Bearer {OPS.secret}"}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=STEP)) as http:
        for _ in range(VIEWS):
            if tally.over(deadline):
                break
            start = now()
            try:
                async with http.get(url, headers=headers) as response:
                    await response.read()
                    status = response.status
            except (aiohttp.ClientError, TimeoutError) as error:
                tally.failed[type(error).__name__] += 1
                continue
            if status == 200:
                tally.done += 1
            elif status in (429, 503):
                tally.refused[f"http {status}"] += 1
            else:
                tally.failed[f"http {status}"] += 1
            await asyncio.sleep(max(0.0, start + VIEW_EVERY - now()))


async def fill_groups(tenant: Tenant, secret: str) -> None:
    """Make :data:`GROUPS` groups of :data:`MEMBERS` members in :data:`GROUPS_NODE` as
    ``secret`` (the admin's, in the scenario's fill): one session holds every member
    (a member is a hold with its record as data: :mod:`tenure.client._group`; one
    session's holds of other numbers are separate members), then its connection is
    dropped: the session stays, detached, for its window (longer than any run)."""
    client = await wire(tenant, secret)
    try:
        info = await answer(None, client, CreateSession(GROUPS_NODE, _KEY, timeout=86_400.0))
        if info is FAILED:
            raise RuntimeError(f"no session of the admin's in {GROUPS_NODE}")
        sid = info.session_id
        for g in range(GROUPS):
            name = f"group-{g:02d}"
            asked = [client.send(CreateSemaphore(sid, name, MEMBERS, GROUP_DATA))]
            for m in range(MEMBERS):
                record = member_record(f"m{m:04d}", b"10.0.0.1:80", weight=None, state="joined")
                request = g * MEMBERS + m + 1
                asked.append(client.send(Acquire(sid, name, 1, request, data=record, hold=m + 1)))
            got = await answers(None, client, asked)
            if FAILED in got:
                raise RuntimeError(f"the groups of {GROUPS_NODE} could not be made ({name})")
    finally:
        client.writer.transport.abort()
    with contextlib.suppress(Exception):
        await client.close()


#: The abuses of issue 47, by name (in :data:`tools.faults.abuses.ABUSES`).
SURFACES: Final[dict[str, Abuse]] = {
    "prefix-watches": prefix_watches,
    "claims": claims,
    "limiters": limiters,
    "deadlocks": deadlocks,
    "board": board,
}
