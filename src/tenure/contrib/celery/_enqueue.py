"""The enqueue-time mode: a claim taken by the producer, released by id in the worker.

With ``mode="enqueue"`` a Singleton's ``apply_async`` (and so ``delay``, a
signature's ``apply_async``, beat's sends) first claims the task's key
(``session.claim(KEY + "/queued", at_least=0, at_most=enqueue_at_most)``, docs/recipes.md
"Claims"), then sends the task with the claim in a message header (:data:`HEADER`:
node, name, id). While the claim lives, a second enqueue of the same key is a
duplicate, whether the first is still queued or already running. The worker
releases the claim by its id when the task ends (``client.release_claim``: no
session needed, the producer's may be long gone); a retry keeps it (the retried
message carries the header on). A task revoked or expired before it ran is
released by the worker that discards it (the ``task_revoked`` signal). A task lost
on the way (its worker killed, its message dropped) keeps the key until
``at_most`` after the enqueue, and no longer: that bound is the claim's, kept by
the store's clock.

A claim refused answers who holds it: the claim's record (the data of its
semaphore, documented in docs/recipes.md) carries the first task's id in its owner
data, which :func:`take_claim` reads back.
"""

from __future__ import annotations

import json
import logging
import os
import socket
from collections.abc import Mapping
from typing import Any, Final

from celery import signals

import tenure.sync
from tenure.errors import NotFoundError

from ._sessions import process_session

__all__ = [
    "HEADER",
    "QUEUED_SUFFIX",
    "ClaimRef",
    "carried_claim",
    "claim_of",
    "release",
    "take_claim",
]

log = logging.getLogger("tenure.contrib.celery")

#: The message header that carries a task's claim: ``{"node", "name", "id"}``.
HEADER: Final = "tenure_claim"
#: Appended to a task's key to name its claim (the run lock keeps the key itself: a
#: claim's semaphore holds its record and nothing else).
QUEUED_SUFFIX: Final = "/queued"
#: How many times a refused claim whose holder ended meanwhile is tried again.
_TRIES: Final = 3

#: A claim as its header carries it.
ClaimRef = dict[str, str]


def owner_data(task_id: str | None, task: str) -> bytes:
    """What a hold of a Singleton's key says of its holder (``tenure describe`` shows it)."""
    record = {"task_id": task_id, "task": task, "host": socket.gethostname(), "pid": os.getpid()}
    return json.dumps(record, separators=(",", ":")).encode()


def task_id_in(data: bytes) -> str | None:
    """The ``task_id`` of :func:`owner_data`, or None if ``data`` is not such a record."""
    try:
        record = json.loads(data)
    except ValueError:
        return None
    found = record.get("task_id") if isinstance(record, dict) else None
    return found if isinstance(found, str) else None


def take_claim(
    name: str, at_most: float, recovery_window: float | None, data: bytes
) -> tenure.sync.Claim | str | None:
    """Claim ``name`` for ``at_most`` seconds: the Claim, or the id of the task that
    holds it (None if it could not be read: the claim was not made by a Singleton)."""
    session = process_session(recovery_window)
    running: str | None = None
    for _ in range(_TRIES):
        claim = session.claim(name, at_least=0.0, at_most=at_most, data=data)
        if claim is not None:
            return claim
        try:
            record = session.semaphore(name).describe().data
        except NotFoundError:  # it ended between the two calls: claim again
            continue
        running = _claimer_task(record)
        if running is not None:
            return running
    return running


def _claimer_task(record: bytes) -> str | None:
    """The task id in a claim's record: ``claim ID TOKEN GRANTED AT_LEAST AT_MOST
    RELEASED SESSION DATA``, DATA in hex (docs/recipes.md, "Claims")."""
    words = record.split(b" ")
    if len(words) != 9 or words[0] != b"claim" or words[8] == b"-":
        return None
    try:
        return task_id_in(bytes.fromhex(words[8].decode("ascii")))
    except (UnicodeDecodeError, ValueError):
        return None


def claim_of(headers: Mapping[str, Any] | None) -> ClaimRef | None:
    """The claim a task's message carries (:data:`HEADER`), or None."""
    found = (headers or {}).get(HEADER)
    if not isinstance(found, Mapping):
        return None
    ref = {key: found.get(key) for key in ("node", "name", "id")}
    if not all(isinstance(value, str) for value in ref.values()):
        return None
    return {key: str(value) for key, value in ref.items()}


def release(ref: ClaimRef, task: str, task_id: str | None) -> bool:
    """Release the claim ``ref`` by its id; whether it was still live (a warning if not:
    it ended at ``at_most`` first, and a duplicate may have been enqueued since)."""
    released = tenure.sync.default_client().release_claim(ref["node"], ref["name"], ref["id"])
    if not released:
        log.warning(
            "tenure: task %s[%s] ended after its claim %r had ended (enqueue_at_most passed):"
            " a duplicate may have been enqueued meanwhile",
            task,
            task_id,
            ref["name"],
        )
    return released


def carried_claim(request: Any) -> ClaimRef | None:
    """The claim a task's request (a Celery ``Context``) carries: among its custom
    headers, or as the attribute a worker makes of each header."""
    return claim_of(getattr(request, "headers", None)) or claim_of(
        {HEADER: getattr(request, HEADER, None)}
    )


def _on_revoked(request: Any = None, **_: object) -> None:
    """A task discarded by a worker before it ran (revoked, expired), or terminated
    while it ran: free its key (``request`` is the task's Context)."""
    ref = carried_claim(request)
    if ref is None:
        return
    task = str(getattr(request, "task", None) or "?")
    try:
        release(ref, task, getattr(request, "id", None))
    except Exception as error:  # a signal handler must not break the worker
        log.error(
            "tenure: releasing the claim %r of revoked %s failed: %s", ref["name"], task, error
        )


signals.task_revoked.connect(_on_revoked, weak=False)
