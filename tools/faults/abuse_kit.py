"""What every abuse of the hostile tenant is made of (issue 37, issue 47).

Each abuse (:mod:`tools.faults.abuses`, :mod:`tools.faults.abuses_surfaces`) is
``async def abuse(tenant, tally, deadline) -> None``: it runs until its own count is
reached or the monotonic time ``deadline`` passes, whichever is first (those of
:data:`EVIDENCE` to their count), then undoes what it made and returns. Every answer is counted in the abuse's :class:`Tally`:
done, refused (a ``LimitExceededError``, by the quota or limit its message names:
:func:`refusal_name`) or failed (any other tenure error, by its type). :func:`wire`
and :func:`answers` speak the native protocol itself (pipelined requests, a
connection dropped without closing its sessions). Kept apart from the abuses so
that both modules of them, and the registry of them all
(:data:`tools.faults.abuses.ABUSES`), import it without importing each other.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import re
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Final

from tests.server.wire import WireClient

import tenure
from tenure._core.commands.base import Command
from tenure._protocol import Failure, Reply
from tenure.errors import ErrorCode, LimitExceededError, TenureError

#: Bound of any one request of an abuse (a stuck answer must not stall the phase).
STEP: Final = 10.0
#: The abuses whose own count, not the phase's deadline, ends them: what each is there
#: to show (a refusal, a block, a kept deadlock) comes only past a count of the
#: server's (a quota, the throttle's failures, a cycle of 300 holds), which the
#: scenario's checks require (tests/faults/test_scenarios.py). The phase's deadline
#: is a share of time, and on a machine busy with other work this niced process's
#: share once ended before the count (10 wrong secrets refused, no block; 15 claims of
#: the 16 a data quota refuses past). Each is bounded by its count of requests, each
#: request by :data:`STEP`.
EVIDENCE: Final = frozenset({"guesses", "prefix-watches", "claims", "deadlocks"})
#: Names in the refusal of a quota, and of the memory budget (the quota interface).
_QUOTA: Final = re.compile(r"over its quota (\w+)")
_LIMIT: Final = re.compile(r"^(\w+)")


class _Failed:
    """The type of :data:`FAILED`."""


#: What :meth:`Tenant.ask` answers for a request refused or failed.
FAILED: Final = _Failed()


def refusal_name(error: LimitExceededError | str) -> str:
    """The quota or limit a refusal names: ``sessions`` for "token 'x' is over its
    quota sessions (1000)", ``memory_budget`` for the server's budget, else the first
    word of the message (``max_nodes`` for "max_nodes (10000) reached")."""
    text = str(error)
    if found := _QUOTA.search(text):
        return found.group(1)
    if "memory budget" in text:
        return "memory_budget"
    found = _LIMIT.match(text)
    return found.group(1) if found else "unnamed"


@dataclass
class Tally:
    """What one run of one abuse got back."""

    done: int = 0
    refused: Counter[str] = field(default_factory=Counter)
    failed: Counter[str] = field(default_factory=Counter)

    def fields(self) -> dict[str, Any]:
        """As a history note's fields."""
        return {"done": self.done, "refused": dict(self.refused), "failed": dict(self.failed)}


@dataclass(frozen=True)
class Ports:
    """The server's other ports the tenant may use (0: not served)."""

    #: The HTTP endpoint's (``--http-port``: /metrics, the dashboard).
    http: int = 0
    #: The YDB face's (``--ydb-port``).
    ydb: int = 0


class Tenant:
    """The hostile tenant: where the server is, and its dice."""

    def __init__(self, url: str, rng: random.Random, ports: Ports | None = None) -> None:
        #: ``tenure://host:port`` without a token.
        self.url = url
        self.rng = rng
        self.ports = ports or Ports()

    @property
    def host_port(self) -> tuple[str, int]:
        """The native protocol's host and port (from :attr:`url`)."""
        host, port = self.url.removeprefix("tenure://").rsplit(":", 1)
        return host, int(port)

    async def client(self, secret: str) -> tenure.Client:
        """A new client with ``secret``."""
        return await tenure.connect(f"{self.url}?token={secret}", connect_timeout=STEP)

    async def ask(self, tally: Tally, request: Awaitable[Any]) -> Any:
        """``request``'s answer, counted in ``tally`` (:data:`FAILED` if it was refused
        or failed)."""
        try:
            async with asyncio.timeout(STEP):
                answer = await request
        except LimitExceededError as error:
            tally.refused[refusal_name(error)] += 1
            return FAILED
        except (TenureError, OSError, TimeoutError) as error:
            tally.failed[type(error).__name__] += 1
            return FAILED
        tally.done += 1
        return answer


Abuse = Callable[[Tenant, Tally, float], Coroutine[Any, Any, None]]


async def in_batches(coros: list[Coroutine[Any, Any, Any]], size: int) -> list[Any]:
    """Run ``coros`` ``size`` at a time (a burst, but not all at once)."""
    results: list[Any] = []
    for start in range(0, len(coros), size):
        results += await asyncio.gather(*coros[start : start + size])
    return results


async def quietly(step: Awaitable[Any]) -> None:
    """Undo one thing (bounded); a failure there is the server's business, not ours."""
    with contextlib.suppress(TenureError, OSError, TimeoutError):
        async with asyncio.timeout(STEP):
            await step


async def wire(tenant: Tenant, secret: str) -> WireClient:
    """A native protocol connection of ``secret``, its Hello answered."""
    host, port = tenant.host_port
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), STEP)
    client = WireClient(reader, writer)
    await client.hello(token=secret)
    return client


async def answers(tally: Tally | None, client: WireClient, sent: list[int]) -> list[Any]:
    """The answers of ``sent`` (pipelined requests), each counted in ``tally``: a
    Reply's value, or :data:`FAILED`."""
    values: list[Any] = []
    for request in sent:
        try:
            answer: Reply | Failure | None = await asyncio.wait_for(client.answer(request), STEP)
        except (AssertionError, OSError, TimeoutError):
            answer = None  # (WireClient's: refused or closed; or no answer in time)
        if answer is None:
            values += [FAILED] * (len(sent) - len(values))
            if tally is not None:
                tally.failed["no answer"] += 1
            return values
        if isinstance(answer, Reply):
            values.append(answer.value)
            if tally is not None:
                tally.done += 1
            continue
        values.append(FAILED)
        if tally is None:
            continue
        if answer.code is ErrorCode.LIMIT_EXCEEDED:
            tally.refused[refusal_name(answer.message)] += 1
        else:
            tally.failed[answer.code.name] += 1
    return values


async def answer(tally: Tally | None, client: WireClient, command: Command[Any]) -> Any:
    """The answer of ``command`` alone (:func:`answers`)."""
    return (await answers(tally, client, [client.send(command)]))[0]
