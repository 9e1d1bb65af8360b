"""What the server reports as it works, for whoever measures it (``--http-port``'s metrics).

The server's parts call an :class:`Observer` at the few places where something
worth counting happens; with no HTTP endpoint there is none (``None``), and those
places cost one ``is None`` test. The Prometheus implementation is
:class:`tenure.server._http.metrics.ServerMetrics`: this module imports nothing
of it, so a server without the ``server`` extra never loads prometheus-client.

Every method runs on the event loop, inside the step it reports: it must be quick
and must not raise.
"""

from __future__ import annotations

from typing import Protocol

from tenure._core import Command, Effect
from tenure.errors import ErrorCode


class FaceObserver(Protocol):
    """The hooks a face of another lock service calls (dflockd's, YDB's): lent to it
    through :class:`tenure.server.plug.Plug`."""

    def dflockd_request(self, command: str, answer: bytes) -> None:
        """A dflockd request (its command line, as sent) was answered ``answer``."""

    def ydb_request(self, request: str, status: str) -> None:
        """A YDB request or call (``acquire_semaphore``, ``create_node``...) was answered
        with a YDB status (``success``, ``not_found``...)."""


class Observer(FaceObserver, Protocol):
    """The hooks the server calls (see the module docstring), the faces' included."""

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
