"""Listing commands: the nodes, a node's semaphores, a node's live sessions (paged);
who blocks a name (:func:`why_name`, :mod:`tenure._core.blocking`); and the most
contended names (:func:`top_names`, :mod:`tenure._core.contention`).

A page is sorted, starts after its ``after`` (exclusive) and holds at most ``limit``
entries (in [1, MAX_PAGE]), so that no reply outgrows a frame however large the
state is. Each page is read from a sorted index of the keys
(:mod:`tenure._core.sorted_keys`): a bisection, then the page itself, however many
nodes, semaphores or sessions there are (a prefix is a range of the index).
:func:`visible_node_page` is the page of the nodes a token limited to some nodes
may see, read from the ranges of its patterns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from tenure._core import commands as c
from tenure._core.blocking import why
from tenure._core.contention import top
from tenure._core.state import EngineState
from tenure._core.top_report import TopReport
from tenure._core.values import (
    MAX_NAME_BYTES,
    SemaphoreSummary,
    SessionSummary,
    check_page_limit,
)
from tenure._core.why_report import WhyReport
from tenure.errors import InvalidArgumentError


def list_nodes(state: EngineState, cmd: c.ListNodes, now: float) -> c.NodePage:
    """Node names after ``cmd.after``, sorted, at most ``cmd.limit``."""
    after = _check_after(cmd.after)
    limit = check_page_limit(cmd.limit)
    return c.NodePage(tuple(state.node_index.page(after, limit)))


def visible_node_page(
    state: EngineState,
    after: str,
    limit: int,
    prefixes: Iterable[str],
    may_see: Callable[[str], bool],
) -> c.NodePage:
    """The names after ``after`` of up to ``limit`` nodes that ``may_see`` lets through,
    sorted: a page of a token's view that the others' names do not slow down.

    Every name ``may_see`` lets through starts with one of ``prefixes`` (a token's
    pattern ``jobs-*`` is the range of ``jobs-``, ``jobs`` that of ``jobs``): only
    those ranges are read. (``after`` and ``limit`` are checked as ListNodes' are.)
    """
    after = _check_after(after)
    limit = check_page_limit(limit)
    return c.NodePage(tuple(state.node_index.matching(prefixes, after, limit, may_see)))


def visible_node_slice(
    state: EngineState,
    after: str,
    limit: int,
    prefixes: Iterable[str],
    may_see: Callable[[str], bool],
    budget: int,
) -> tuple[list[str], str | None]:
    """:func:`visible_node_page` a slice at a time: the names found after ``after``
    (up to ``limit``) among at most ``budget`` names looked at, and the name to go
    on after (None: the page is whole). The server answers a token's page over as
    many turns of its loop as its ranges take (``tenure.server._net.native``).
    """
    after = _check_after(after)
    limit = check_page_limit(limit)
    return state.node_index.matching_within(prefixes, after, limit, may_see, budget)


def list_semaphores(state: EngineState, cmd: c.ListSemaphores, now: float) -> c.SemaphorePage:
    """A page of the node's semaphores whose names start with ``cmd.prefix``."""
    node = state.lookup_node(cmd.node)
    prefix = _check_after(cmd.prefix, "prefix")
    after = _check_after(cmd.after)
    limit = check_page_limit(cmd.limit)
    names = node.semaphore_index.prefixed(prefix, after, limit)
    page = []
    for name in names:
        sem = node.semaphores[name]
        page.append(
            SemaphoreSummary(
                name,
                sem.limit,
                sem.count,
                len(sem.owners),
                sem.queue_length(),
                sem.ephemeral,
            )
        )
    return c.SemaphorePage(tuple(page))


def list_sessions(state: EngineState, cmd: c.ListSessions, now: float) -> c.SessionPage:
    """A page of the node's live sessions by id; ``created_at`` in engine time."""
    node = state.lookup_node(cmd.node)
    after = cmd.after
    if type(after) is not int or after < 0:
        raise InvalidArgumentError(f"after must be a non-negative session id, got {after!r}")
    limit = check_page_limit(cmd.limit)
    page = []
    for sid in node.session_index.page(after, limit):
        session = state.sessions[sid]
        holds = sum(len(list(session.holds_on(name))) for name in session.held)
        waits = sum(len(list(session.waits_on(name))) for name in session.waits)
        expires_in = None if session.expires_at is None else max(0.0, session.expires_at - now)
        page.append(
            SessionSummary(
                sid,
                session.description,
                session.identity,
                session.timeout,
                session.created_at,
                expires_in,
                holds,
                waits,
            )
        )
    return c.SessionPage(tuple(page))


def why_name(state: EngineState, cmd: c.WhyName, now: float) -> WhyReport:
    """Who blocks ``cmd.name`` of ``cmd.node`` (:func:`tenure._core.blocking.why`)."""
    return why(state, cmd.node, cmd.name, cmd.after, cmd.limit, now)


def top_names(state: EngineState, cmd: c.TopNames, now: float) -> TopReport:
    """The most contended names (:func:`tenure._core.contention.top`)."""
    return top(state, cmd.node, cmd.window, cmd.sort, cmd.limit, now)


def _check_after(text: object, what: str = "after") -> str:
    """A name bound of a page (``""``: from the first), or a prefix: a bounded str."""
    if not isinstance(text, str):
        raise InvalidArgumentError(f"{what} must be a string, got {type(text).__name__}")
    too_long = len(text) > MAX_NAME_BYTES  # (cheap first: a character is >= 1 byte)
    if too_long or len(text.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        raise InvalidArgumentError(f"{what} is longer than {MAX_NAME_BYTES} bytes")
    return text
