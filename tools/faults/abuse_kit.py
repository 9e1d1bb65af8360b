"""What every abuse of the hostile tenant is made of (issue 37, issue 47).

Each abuse (:mod:`tools.faults.abuses`, :mod:`tools.faults.abuses_surfaces`) is
``async def abuse(tenant, tally, deadline) -> None``: it runs until its own count is
reached or the monotonic time ``deadline`` passes, whichever is first (but not
before it has shown its :data:`EVIDENCE`: :meth:`Tally.over`), then undoes what it
made and returns. Every answer is counted in the abuse's :class:`Tally`:
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
from tools.faults.history import now

#: Bound of any one request of an abuse (a stuck answer must not stall the phase).
STEP: Final = 10.0
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
    """What one run of one abuse got back, and what it must show (:data:`EVIDENCE`)."""

    done: int = 0
    refused: Counter[str] = field(default_factory=Counter)
    failed: Counter[str] = field(default_factory=Counter)
    #: What the abuse must show before the phase's deadline may end it (None: nothing).
    evidence: Callable[[Tally], bool] | None = field(default=None, compare=False)

    def fields(self) -> dict[str, Any]:
        """As a history note's fields."""
        return {"done": self.done, "refused": dict(self.refused), "failed": dict(self.failed)}

    def over(self, deadline: float) -> bool:
        """Whether the abuse stops now: the monotonic ``deadline`` has passed and it
        has shown its :attr:`evidence` (its own count bounds it either way)."""
        return now() >= deadline and (self.evidence is None or self.evidence(self))


def _refused(*names: str) -> Callable[[Tally], bool]:
    """Evidence: a refusal by each of ``names`` (a quota or limit: :func:`refusal_name`)."""
    return lambda tally: all(tally.refused[name] > 0 for name in names)


def _failed(name: str) -> Callable[[Tally], bool]:
    """Evidence: a failure counted as ``name``."""
    return lambda tally: tally.failed[name] > 0


#: What each abuse must show before the phase's deadline may end it: the refusals,
#: blocks and kept deadlocks that come only past a count of the server's (a quota, the
#: throttle's failures, a cycle of 300 holds) and that the scenario's checks require
#: (tests/faults/test_scenarios.py; each quota of tools/faults/tokens.py's QUOTAS by
#: the abuse that asks past it). The deadline is a share of time, and on a machine
#: busy with other work the niced tenant's share of a phase could end before the
#: count: issue 57's short run saw 10 wrong secrets refused and no block, another 15
#: claims of the 16 the data quota refuses past. Each abuse stays bounded by its own
#: count of requests, each request by :data:`STEP`.
EVIDENCE: Final[dict[str, Callable[[Tally], bool]]] = {
    "sessions": _refused("sessions", "recovery_window"),
    "reader-sessions": _refused("sessions", "recovery_window"),
    "watches": _refused("watches"),
    "waiters": _refused("waiters"),
    "big-data": _refused("data_bytes", "semaphores"),
    "nodes": _refused("max_sessions", "nodes"),
    "flood": _refused("requests_per_second"),
    "guesses": _failed("wrong blocked"),
    "prefix-watches": _refused("prefix_watches"),
    "claims": lambda tally: tally.refused["data_bytes"] + tally.refused["memory_budget"] > 0,
    "deadlocks": _failed("DeadlockError"),
}


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
