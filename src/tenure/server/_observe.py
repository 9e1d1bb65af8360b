"""What the server reports as it works, for whoever measures it (``--http-port``'s metrics).

The server's parts call an :class:`ServerObserver` at the few places where something
worth counting happens; with no HTTP endpoint there is none (``None``), and those
places cost one ``is None`` test. The Prometheus implementation is
:class:`tenure.server._http.metrics.ServerMetrics`: this module imports nothing
of it, so a server without the ``server`` extra never loads prometheus-client.

A face of another lock service counts its own requests, in a :class:`FaceObserver`
its registry entry makes (:attr:`tenure.server.plug.FaceEntry.observer`): the face
calls its own methods, and ``/metrics`` shows the :class:`CounterFamily` series each
one lists. The server knows neither its labels nor its names.

Every method runs on the event loop, inside the step it reports: it must be quick
and must not raise.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from tenure._core import Command, Effect
from tenure.errors import ErrorCode, LimitExceededError


@dataclass(frozen=True, slots=True)
class CounterFamily:
    """A face's counter as ``/metrics`` shows it: ``name`` (``tenure_<face>_requests``;
    the series is ``<name>_total``), its help line, its label names, and a count for
    each tuple of label values (one per label name, from bounded sets)."""

    name: str
    help: str
    labels: tuple[str, ...]
    counts: Mapping[tuple[str, ...], int]


class FaceObserver(Protocol):
    """What a face counts its requests in (module docstring); lent to it through
    :class:`tenure.server.plug.Plug`."""

    def families(self) -> Iterable[CounterFamily]:
        """The face's counters as they are now (read when ``/metrics`` is scraped)."""
        ...


class ServerObserver(Protocol):
    """The hooks the server calls (see the module docstring)."""

    def face(self, name: str) -> FaceObserver | None:
        """What face ``name`` counts its requests in (None: nothing counts them)."""

    def request(self, command: Command[object], code: ErrorCode | None) -> None:
        """A native request was answered: ``code`` None for a Reply, else its Failure's."""

    def applied(self, command: Command[object], value: object) -> None:
        """The engine applied ``command`` (from any protocol) and it returned ``value``."""

    def effects(self, effects: list[Effect]) -> None:
        """The engine's effects of one step (grants, failed acquires, ended sessions...)."""

    def committed(self, seconds: float) -> None:
        """A journal commit (write, and fsync as ``--fsync`` says) took ``seconds``."""

    def snapshot_written(self, seconds: float, size: int) -> None:
        """A snapshot of ``size`` bytes was put in place, ``seconds`` after it was begun."""


class Auditor(Protocol):
    """Where the server records its administrative acts and refusals: the audit log
    (:class:`tenure.server._audit.AuditLog`, ``--audit-log``). Never waits."""

    def record(
        self,
        act: str,
        *,
        token: str | None,
        address: str | None,
        outcome: str,
        **what: object,
    ) -> None:
        """Record ``act`` by token ``token`` from ``address`` with ``outcome``; ``what``
        names what it acted on (never a secret)."""


def record_quota_refusal(
    audit: Auditor | None,
    error: BaseException,
    *,
    token: str | None,
    address: str | None,
    **what: object,
) -> None:
    """Record ``error`` as a ``quota_refused`` line if a quota of the token or the
    memory budget refused the request (a :class:`~tenure.errors.LimitExceededError`
    naming its quota, also as the cause of the face's own error); anything else, or
    no audit log (``audit`` None), records nothing. What the native face records for
    the same refusal (:mod:`tenure.server._net.audit_acts`), for the other faces."""
    if audit is None:
        return
    cause = error if isinstance(error, LimitExceededError) else error.__cause__
    quota = cause.quota if isinstance(cause, LimitExceededError) else None
    if quota is None:
        return
    audit.record(
        "quota_refused",
        token=token,
        address=address,
        outcome="limit_exceeded",
        quota=quota,
        why=str(cause),
        **what,
    )
