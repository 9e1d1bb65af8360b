"""Listing commands: read-only and paged (sorted, ``after`` exclusive, ``limit`` up to
MAX_PAGE); and WhyName, who blocks a name (its waiters paged the same way), and TopNames, the
most contended names."""

from __future__ import annotations

from dataclasses import dataclass

from tenure._core.commands.base import Command
from tenure._core.limits import WHY_PAGE
from tenure._core.top_report import TOP_PAGE, TopReport
from tenure._core.values import (
    SemaphoreSummary,
    SessionSummary,
)
from tenure._core.why_report import WhyReport


@dataclass(frozen=True, slots=True)
class NodePage:
    """Reply to ListNodes: node names, sorted."""

    names: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SemaphorePage:
    """Reply to ListSemaphores: summaries, by name."""

    semaphores: tuple[SemaphoreSummary, ...] = ()


@dataclass(frozen=True, slots=True)
class SessionPage:
    """Reply to ListSessions: summaries, by session id."""

    sessions: tuple[SessionSummary, ...] = ()


@dataclass(frozen=True, slots=True)
class ListNodes(Command[NodePage]):
    """Up to ``limit`` node names greater than ``after``, sorted."""

    after: str = ""
    limit: int = 1000


@dataclass(frozen=True, slots=True)
class ListSemaphores(Command[SemaphorePage]):
    """Up to ``limit`` semaphores of ``node`` named with ``prefix`` and after ``after``, sorted."""

    node: str
    prefix: str = ""
    after: str = ""
    limit: int = 1000


@dataclass(frozen=True, slots=True)
class ListSessions(Command[SessionPage]):
    """Up to ``limit`` live sessions of ``node`` with ids above ``after``, by id.

    ``created_at`` in the reply is engine time; the host shows it in UNIX seconds.
    """

    node: str
    after: int = 0
    limit: int = 1000


@dataclass(frozen=True, slots=True)
class WhyName(Command[WhyReport]):
    """Who blocks semaphore ``name`` of ``node`` (:mod:`tenure._core.blocking`): up to
    ``limit`` of its holders, up to ``limit`` of its waiters after the ``after``-th
    (in grant order), what each holder waits for, the chain and its roots."""

    node: str
    name: str
    after: int = 0
    limit: int = WHY_PAGE


@dataclass(frozen=True, slots=True)
class TopNames(Command[TopReport]):
    """The ``limit`` most contended names of ``node`` (``""``: of every node), by
    ``sort`` (:data:`~tenure._core.top_report.SORTS`) over the last ``window`` seconds
    (60 or 300): :mod:`tenure._core.contention`."""

    node: str = ""
    window: float = 60.0
    sort: str = "wait"
    limit: int = TOP_PAGE
