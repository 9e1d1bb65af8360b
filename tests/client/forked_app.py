"""A WSGI app that gunicorn runs with ``--preload`` and two workers (tests/client/test_forks.py).

At import, in gunicorn's master (``--preload`` imports the app before forking the
workers), it opens a client of its own, a session and a lock, and registers their
close with ``atexit``: so every worker inherits them, and its ``atexit`` too. Each
worker must use tenure through clients of its own (``@tenure.sync.locked``, over
the process's default client), never the master's: a use of the inherited client
goes on a connection of the worker's own, a use of the master's session raises
ForkedClientError, and the client's close at the worker's exit touches nothing of the
master's. ``TENURE_URL`` and ``TENURE_NODE`` say where.

GET /hold: holds "shared", and waits (in the lock) for "gate", which the test holds;
GET /try: tries "shared" (``blocking=False``). Both answer in JSON: this worker's pid,
the session it holds its locks in, whether it got "shared" (/try), and what the
inherited client did.
"""

from __future__ import annotations

import atexit
import json
import os
from collections.abc import Callable, Iterable
from typing import Any

import tenure
import tenure.sync
from tenure.errors import ForkedClientError

NODE = os.environ["TENURE_NODE"]

# In the master, at import: its own client, session and lock.
master = tenure.sync.connect(os.environ["TENURE_URL"], client_name="gunicorn master")
master_session = master.session(NODE, description="gunicorn master")
master_lock = master_session.mutex("master").lock()
atexit.register(master.close)  # inherited by each worker: there it closes nothing
atexit.register(tenure.sync.close_default_client)  # a worker's own, at its exit


@tenure.sync.locked("shared", timeout=60)
def hold() -> int:
    """Hold "shared" until the test lets "gate" go."""
    with tenure.sync.default_session().mutex("gate").lock(timeout=60):
        pass
    return tenure.sync.current_lock().session.id


@tenure.sync.locked("shared", blocking=False)
def attempt() -> bool:
    return True


def try_shared() -> dict[str, object]:
    """Try "shared" once; and the session this worker holds its locks in."""
    return {"got": attempt() is not None, "session": tenure.sync.default_session().id}


def inherited() -> str:
    """What using the master's client does here: in a worker, its calls go on a
    connection of the worker's own; the master's session refuses (ForkedClientError)."""
    if NODE not in master.list_nodes():
        return "?"
    try:
        master_session.mutex("anything").try_lock()
    except ForkedClientError:
        return "reopened; the session ForkedClientError"
    return "session used"


def app(environ: dict[str, Any], start_response: Callable[..., object]) -> Iterable[bytes]:
    """The WSGI application."""
    answer: dict[str, object] = {"pid": os.getpid(), "master_session": master_session.id}
    if environ["PATH_INFO"] == "/hold":
        answer |= {"session": hold()}
    elif environ["PATH_INFO"] == "/try":
        answer |= try_shared()
    answer |= {"inherited": inherited(), "closed": master.closed}
    body = json.dumps(answer).encode()
    start_response("200 OK", [("Content-Type", "application/json")])
    return [body]
