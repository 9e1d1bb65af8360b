"""What a client reads of a backend for operators: nodes, semaphores, sessions; and kill.

The backend answers in pages (:class:`tenure.backends.Backend`); these functions
fetch every page. Page sizes keep each reply under the frame size the client
accepts (1 MiB: a ``tenure://`` server refuses to send a larger reply) even when
names, descriptions and identities are as long as allowed (1 KiB each), and the
number of pages is bounded.
"""

from __future__ import annotations

import os
import socket
from typing import Final

from tenure._core.values import (
    MAX_NAME_BYTES,
    ClientIdentity,
    SemaphoreSummary,
    SessionSummary,
    check_description,
)
from tenure.backends import Backend
from tenure.errors import InvalidArgumentError

#: Names per page of list_nodes and list_semaphores (500 names of 1 KiB: ~0.5 MiB).
NAME_PAGE: Final = 500
#: Sessions per page of list_sessions (200 sessions of ~3 KiB of text: ~0.6 MiB).
SESSION_PAGE: Final = 200
#: Most pages one listing fetches (10 million names): the loop ends, whatever a
#: backend answers.
MAX_PAGES: Final = 20_000


def identity_of_this_process(client_name: object) -> ClientIdentity:
    """This process's identity: host name (cut to MAX_NAME_BYTES), pid, and ``client_name``."""
    if not isinstance(client_name, str):
        raise InvalidArgumentError(
            f"client_name must be a string, got {type(client_name).__name__}"
        )
    name = check_description(client_name, "client_name")
    host = socket.gethostname().encode("utf-8", "replace")[:MAX_NAME_BYTES]
    return ClientIdentity(host.decode("utf-8", "ignore"), os.getpid(), name)


async def all_nodes(backend: Backend) -> list[str]:
    """Every node name, sorted."""
    names: list[str] = []
    after = ""
    for _ in range(MAX_PAGES):
        page = await backend.list_nodes(after=after, limit=NAME_PAGE)
        names += page
        if len(page) < NAME_PAGE:
            return names
        after = page[-1]
    raise InvalidArgumentError(f"more than {MAX_PAGES} pages of nodes (MAX_PAGES)")


async def all_semaphores(backend: Backend, node: str, prefix: str) -> list[SemaphoreSummary]:
    """Every semaphore of ``node`` whose name starts with ``prefix``, by name."""
    if not isinstance(prefix, str):
        raise InvalidArgumentError(f"prefix must be a string, got {type(prefix).__name__}")
    found: list[SemaphoreSummary] = []
    after = ""
    for _ in range(MAX_PAGES):
        page = await backend.list_semaphores(node, prefix=prefix, after=after, limit=NAME_PAGE)
        found += page
        if len(page) < NAME_PAGE:
            return found
        after = page[-1].name
    raise InvalidArgumentError(f"more than {MAX_PAGES} pages of semaphores (MAX_PAGES)")


async def all_sessions(backend: Backend, node: str) -> list[SessionSummary]:
    """Every live session of ``node``, by id."""
    found: list[SessionSummary] = []
    after = 0
    for _ in range(MAX_PAGES):
        page = await backend.list_sessions(node, after=after, limit=SESSION_PAGE)
        found += page
        if len(page) < SESSION_PAGE:
            return found
        after = page[-1].session_id
    raise InvalidArgumentError(f"more than {MAX_PAGES} pages of sessions (MAX_PAGES)")
