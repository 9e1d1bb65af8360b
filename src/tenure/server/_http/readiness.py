"""Whether the server is ready: what ``/readyz`` answers, and ``tenure_ready``.

A server goes through its phases once, in order: ``starting`` (the HTTP endpoint
listens, nothing else yet), ``recovering`` (the data directory is being replayed),
``serving`` (clients are being served: ready), ``stopping`` (SIGTERM, SIGINT or a
failed disk: clients are told to go). Only ``serving`` is ready. ``/healthz``
answers 200 in every phase: the process runs and its event loop answers.
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

    def advance(self, phase: Phase) -> None:
        """Move to ``phase`` (never back: a stopping server does not become ready again)."""
        if _ORDER.index(phase) > _ORDER.index(self.phase):
            self.phase = phase

    def serving(self, stopping: Callable[[], bool]) -> None:
        """Clients are being served until ``stopping()`` says otherwise."""
        self._stopping = stopping
        self.advance(Phase.SERVING)

    @property
    def ready(self) -> bool:
        """Whether the server serves clients now."""
        return self.phase is Phase.SERVING and not self._stopping()

    @property
    def state(self) -> str:
        """The phase's name, as ``/readyz`` reports it (``stopping`` as soon as it is)."""
        if self.phase is Phase.SERVING and self._stopping():
            return Phase.STOPPING.value
        return self.phase.value
