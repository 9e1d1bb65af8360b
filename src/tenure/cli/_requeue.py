"""``tenure elect NAME --requeue -- CMD``: lead until stopped, running CMD in each term.

Over the leader runner (``client.lead``, requeue on): each term runs CMD under
:func:`~tenure.cli._supervise.supervise`, as ``tenure elect`` does, with the term's
token in TENURE_TOKEN. When CMD exits, whatever its status, the term ends: the
runner resigns and campaigns again, behind the candidates already waiting. When
leadership (or its session) is lost, CMD is stopped as ``tenure elect`` stops it
(SIGTERM to its group, SIGKILL after ``--grace``) and the runner campaigns again,
in a new session if the old one is gone. It stops only when stopped:

* a signal (SIGINT, SIGTERM, SIGHUP) while CMD runs is passed on to CMD's group;
  once CMD has ended, ``tenure`` resigns and exits with CMD's status;
* a signal while it campaigns withdraws the campaign; ``tenure`` exits 128 + N;
* a CMD that cannot run (126) or is not found (127) ends it with that status, since
  running it again would fail again;
* the backend's errors other than the transient ones the runner retries (a
  missing node it may not create, a refused permission) end it with status 3.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence

from tenure.cli._common import connect, ensure_node, environ_with, session_description
from tenure.cli._status import Status
from tenure.cli._supervise import Signals, say, supervise
from tenure.client import Leadership

#: The statuses of a CMD that cannot be run again: it cannot execute, or is missing.
CANNOT_RUN = frozenset({Status.CANNOT_EXECUTE, Status.COMMAND_NOT_FOUND})


class StopLeadingError(Exception):
    """Raised out of a term to end the runner with ``status`` (it resigns on the way)."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


class Terms:
    """What each term runs: CMD, supervised, with the term's variables."""

    def __init__(
        self, name: str, node: str, command: Sequence[str], signals: Signals, grace: float
    ) -> None:
        self.name, self.node, self.command = name, node, command
        self.what = f"leadership of {name!r}"
        self._signals = signals
        self._grace = grace

    async def run(self, leadership: Leadership) -> None:
        """One term: CMD until it exits (the term ends) or leadership is lost."""
        environ = environ_with(
            {
                "TENURE_TOKEN": str(leadership.token),
                "TENURE_LOCK": self.name,
                "TENURE_NODE": self.node,
                "TENURE_SESSION_ID": str(leadership.session.id),
            }
        )
        supervising = asyncio.ensure_future(
            supervise(
                self.command,
                environ,
                leadership.lost,
                self._signals,
                what=self.what,
                grace=self._grace,
                lost_status=Status.LOST,
            )
        )
        try:
            # Shielded: the runner cancels this term at once on a loss, but CMD is
            # stopped by the supervision, which watches the same loss, gracefully.
            status = await asyncio.shield(supervising)
        except asyncio.CancelledError:
            if leadership.lost_reason is None:
                supervising.cancel()  # not a loss (a signal before CMD ran): at once
            with contextlib.suppress(asyncio.CancelledError):
                status = await supervising
                self._stop_if_signalled(status)
                say(f"{self.what} was lost: campaigning again")
            raise
        finally:
            self._signals.child = None  # a signal from now on stops the runner
        self._stop_if_signalled(status)
        if status in CANNOT_RUN:
            raise StopLeadingError(status)
        say(f"the command exited with status {status}: resigning {self.what}, campaigning again")

    def _stop_if_signalled(self, status: int) -> None:
        """A signal came while CMD ran (and was passed on to it): stop with its status."""
        if self._signals.received:
            raise StopLeadingError(status)


async def elect_with_requeue(
    name: str,
    data: str,
    command: Sequence[str],
    *,
    url: str,
    node: str,
    grace: float,
    recovery_window: float | None,
) -> int:
    """Lead ``name`` term after term until stopped (see the module docstring); the status."""
    description = session_description(["elect", name, "--requeue", "--", *command])
    with Signals() as signals:
        terms = Terms(name, node, command, signals, grace)
        try:
            async with connect(url) as client:
                await ensure_node(client, node)
                await client.lead(
                    node,
                    name,
                    terms.run,
                    data=data.encode(),
                    requeue=True,
                    recovery_window=recovery_window,
                    description=description,
                )
        except StopLeadingError as stop:
            return stop.status
        except asyncio.CancelledError:
            if signals.stopped_by is None:
                raise
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            say(f"stopped by signal {signals.stopped_by} while campaigning for {terms.what}")
            return Status.SIGNAL_BASE + signals.stopped_by
    raise AssertionError("a runner that requeues returns only by an error")  # pragma: no cover
