"""Whether the server is ready: what ``/readyz`` answers, and ``tenure_ready``.

A server goes through its phases once, in order: ``starting`` (the HTTP endpoint
listens, nothing else yet), ``recovering`` (the data directory is being replayed),
``serving`` (clients are being served: ready), ``stopping`` (SIGTERM, SIGINT or a
failed disk: clients are told to go). Only ``serving`` is ready. ``/healthz``
answers 200 in every phase: the process runs and its event loop answers.

A server of a cluster (``--cluster``) serves only while it leads: a standby is
``standby``, not ready, so that a load balancer or a Kubernetes Service that probes
``/readyz`` sends every client to the leader (docs/cluster.md).
"""

from __future__ import annotations

import enum
from collections.abc import Callable

__all__ = ["Phase", "Readiness"]


class Phase(enum.Enum):
    """A phase of the server's life (module docstring)."""

    STARTING = "starting"
    RECOVERING = "recovering"
    SERVING = "serving"
    STOPPING = "stopping"


_ORDER = list(Phase)


class Readiness:
    """The server's phase; moves forward only.

    ``stopping()``, once given (:meth:`serving`), is asked too: the server may begin
    to stop (a signal, a failed journal) before the phase says so.
    """

    def __init__(self) -> None:
        self.phase = Phase.STARTING
        self._stopping: Callable[[], bool] = lambda: False
        self._leading: Callable[[], bool] = lambda: True

    def advance(self, phase: Phase) -> None:
        """Move to ``phase`` (never back: a stopping server does not become ready again)."""
        if _ORDER.index(phase) > _ORDER.index(self.phase):
            self.phase = phase

    def serving(
        self, stopping: Callable[[], bool], leading: Callable[[], bool] = lambda: True
    ) -> None:
        """Clients are being served until ``stopping()`` says otherwise, while
        ``leading()`` (a cluster's standby serves nobody: it is not ready)."""
        self._stopping = stopping
        self._leading = leading
        self.advance(Phase.SERVING)

    @property
    def ready(self) -> bool:
        """Whether the server serves clients now."""
        return self.phase is Phase.SERVING and not self._stopping() and self._leading()

    @property
    def state(self) -> str:
        """The phase's name, as ``/readyz`` reports it (``stopping`` as soon as it is;
        ``standby`` for a cluster's server that does not lead)."""
        if self.phase is Phase.SERVING and self._stopping():
            return Phase.STOPPING.value
        if self.phase is Phase.SERVING and not self._leading():
            return STANDBY
        return self.phase.value


#: ``/readyz``'s state of a cluster's server that serves but does not lead.
STANDBY = "standby"
