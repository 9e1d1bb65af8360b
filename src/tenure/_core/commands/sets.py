"""The command on an all-or-none set of semaphores: AcquireAll, and its reply."""

from __future__ import annotations

from dataclasses import dataclass

from tenure._core.commands.base import Command
from tenure._core.commands.semaphores import AcquireStatus


@dataclass(frozen=True, slots=True)
class AcquireAllResult:
    """Reply to AcquireAll: GRANTED with a token per name (in the command's order),
    QUEUED (a Granted effect per name follows, all in one step, or an AcquireFailed
    per name), or BUSY."""

    status: AcquireStatus
    tokens: tuple[int, ...] = ()
    lease_ttl: float | None = None


@dataclass(frozen=True, slots=True)
class AcquireAll(Command[AcquireAllResult]):
    """Ask for ``count`` tokens of each semaphore of ``names``, all or none, in one step.

    The request is granted only when it can have every one at once, and is queued
    in every queue at once (one arrival across names: queues then agree on the
    order of requests, so requests for overlapping names in any order never
    deadlock; :func:`tenure._core.shared_steps.settle`). Each name is a hold of
    its own: ``holds[i]`` and ``request_ids[i]`` are the hold and the request id of
    ``names[i]`` (Granted and AcquireFailed effects name them, one per name), none
    of which the session may hold or wait for already. A member that leaves its
    queue (cancelled, timed out, released, its semaphore deleted) takes the others
    with it. ``timeout``, ``ephemeral``, ``data``, ``lease_ttl`` and ``task`` are
    Acquire's, for every name (a request that must wait is checked for deadlocks
    as one request waiting in every queue).
    """

    session_id: int
    names: tuple[str, ...]
    holds: tuple[int, ...]
    request_ids: tuple[int, ...]
    count: int
    data: bytes = b""
    timeout: float | None = None
    ephemeral: bool = True
    lease_ttl: float | None = None
    task: int = 0
