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
* a signal while it campaigns withdraws the campaign, and one while it pauses
  (below) ends the pause; ``tenure`` exits 128 + N;
* a CMD that cannot run (126) or is not found (127) ends it with that status, since
  running it again would fail again;
* the backend's errors other than the transient ones the runner retries (a
  missing node it may not create, a refused permission) end it with status 3.

**The pause before running CMD again** (:class:`RequeuePause`, systemd's
RestartSec with its steps, Kubernetes' CrashLoopBackOff): after CMD exits, the
runner waits ``--requeue-delay`` before it campaigns again, twice as long after each
run in a row shorter than ``--requeue-reset-after`` (up to ``--requeue-max-delay``);
a run that lasted at least that long starts again from ``--requeue-delay``. So a CMD
that fails at once does not loop hot. Leadership is given up for the pause: the
term's ``work`` raises :class:`PauseBeforeCampaignError` out of the runner, which
resigns and closes its session on the way, so another candidate leads meanwhile
(or none does), and the next campaign is in a new session. A loss is not CMD's
exit: the runner campaigns again at once. ``--requeue-delay 0`` turns the pause off
(the runner then campaigns again at once, in the same session).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Coroutine, Sequence
from typing import Any, Final

import click

from tenure.cli._common import F, connect, ensure_node, seconds_option, session_description
from tenure.cli._status import Status
from tenure.cli._supervise import Signals, held_environ, say, supervise
from tenure.client import Leadership
from tenure.errors import InvalidArgumentError

#: The statuses of a CMD that cannot be run again: it cannot execute, or is missing.
CANNOT_RUN = frozenset({Status.CANNOT_EXECUTE, Status.COMMAND_NOT_FOUND})

#: ``--requeue-delay``: the pause after CMD exits, in seconds, before campaigning again
#: (systemd's RestartSec is 0.1 s; a second keeps a failing CMD to one run a second).
DEFAULT_REQUEUE_DELAY: Final = 1.0
#: ``--requeue-max-delay``: the longest pause, in seconds (Kubernetes' CrashLoopBackOff
#: stops at 300 s; a leader should not stay away longer than a minute).
DEFAULT_REQUEUE_MAX_DELAY: Final = 60.0
#: ``--requeue-reset-after``: a run of CMD lasting at least this many seconds was a
#: good one: the next pause is ``--requeue-delay`` again.
DEFAULT_REQUEUE_RESET_AFTER: Final = 60.0
#: How much each run in a row shorter than ``--requeue-reset-after`` lengthens the pause.
REQUEUE_FACTOR: Final = 2.0
#: The parameters of the pause's options (:func:`requeue_options`).
REQUEUE_OPTIONS: Final = ("requeue_delay", "requeue_max_delay", "requeue_reset_after")


class RequeuePause:
    """The pause after each exit of CMD (module docstring): ``first`` after a run that
    lasted ``reset_after`` seconds or more; after the n-th run in a row shorter than
    that, ``first * 2**(n-1)``, never more than ``most``."""

    def __init__(self, first: float, most: float, reset_after: float) -> None:
        if not (0 <= first <= most < math.inf and 0 <= reset_after < math.inf):
            raise InvalidArgumentError(
                "a requeue pause needs 0 <= first <= most and reset_after >= 0, all "
                f"finite; got first {first}, most {most}, reset_after {reset_after}"
            )
        self.first, self.most, self.reset_after = first, most, reset_after
        self._next = first  # the pause after the next short run

    def after_run(self, lasted: float) -> float:
        """The pause after a run of CMD that lasted ``lasted`` seconds."""
        if lasted >= self.reset_after:
            self._next = self.first
            return self.first
        pause = self._next
        self._next = min(self.most, pause * REQUEUE_FACTOR)
        return pause


class PauseBeforeCampaignError(Exception):
    """Raised out of a term whose CMD exited: the runner resigns and closes its
    session on the way out, and campaigns again after ``seconds``."""

    def __init__(self, seconds: float) -> None:
        super().__init__(seconds)
        self.seconds = seconds


class StopLeadingError(Exception):
    """Raised out of a term to end the runner with ``status`` (it resigns on the way)."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


class TermCommand:
    """What each term runs: CMD, supervised, with the term's variables."""

    def __init__(
        self,
        name: str,
        node: str,
        command: Sequence[str],
        signals: Signals,
        grace: float,
        pause: RequeuePause,
    ) -> None:
        self.name, self.node, self.command = name, node, command
        self.what = f"leadership of {name!r}"
        self._signals = signals
        self._grace = grace
        self._pause = pause

    async def run(self, leadership: Leadership) -> None:
        """One term: CMD until it exits (the term ends) or leadership is lost."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        supervising = asyncio.ensure_future(
            supervise(
                self.command,
                held_environ(self.name, self.node, leadership),
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
        pause = self._pause.after_run(loop.time() - started)
        if pause <= 0:
            say(
                f"the command exited with status {status}: resigning {self.what}, campaigning again"
            )
            return
        say(
            f"the command exited with status {status}: resigning {self.what}, "
            f"campaigning again in {pause:g}s"
        )
        raise PauseBeforeCampaignError(pause)

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
    create_node: bool,
    grace: float,
    recovery_window: float | None,
    pause: RequeuePause,
) -> int:
    """Lead ``name`` term after term until stopped (see the module docstring); the status."""
    description = session_description(["elect", name, "--requeue", "--", *command])
    with Signals() as signals:
        term_command = TermCommand(name, node, command, signals, grace, pause)
        doing = "campaigning for"
        try:
            async with connect(url, node=node, creatable=not create_node) as client:
                await ensure_node(client, node, create_node)
                while True:
                    doing = "campaigning for"
                    try:
                        await client.lead(
                            node,
                            name,
                            term_command.run,
                            data=data.encode(),
                            requeue=True,
                            recovery_window=recovery_window,
                            description=description,
                        )
                    except PauseBeforeCampaignError as paused:
                        # Resigned, the session closed: another candidate may lead now.
                        doing = "pausing before campaigning again for"
                        await asyncio.sleep(paused.seconds)
        except StopLeadingError as stop:
            return stop.status
        except asyncio.CancelledError:
            status = signals.stopped_status(f"{doing} {term_command.what}")
            if status is None:
                raise
            return status


def requeue_options(function: F) -> F:
    """``elect``'s options of the pause (:data:`REQUEUE_OPTIONS`), for ``--requeue`` only."""
    options = [
        seconds_option(
            "--requeue-delay",
            default=DEFAULT_REQUEUE_DELAY,
            help="with --requeue: after CMD exits, resign and wait this long before campaigning "
            "again (another candidate may lead meanwhile); doubled after each run in a row "
            "shorter than --requeue-reset-after; 0: campaign again at once",
        ),
        seconds_option(
            "--requeue-max-delay",
            default=DEFAULT_REQUEUE_MAX_DELAY,
            help="with --requeue: the longest that wait grows to",
        ),
        seconds_option(
            "--requeue-reset-after",
            default=DEFAULT_REQUEUE_RESET_AFTER,
            help="with --requeue: a run of CMD that lasted this long brings the wait back to "
            "--requeue-delay",
        ),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def given(options: Sequence[str]) -> list[str]:
    """Those of ``options`` (parameter names) given on the command line, as flags."""
    context = click.get_current_context()
    return [
        f"--{option.replace('_', '-')}"
        for option in options
        if context.get_parameter_source(option) is not click.core.ParameterSource.DEFAULT
    ]


def refuse_given(options: Sequence[str], why: str) -> None:
    """A usage error naming those of ``options`` given on the command line, if any."""
    flags = given(options)
    if flags:
        raise click.UsageError(f"{', '.join(flags)}: {why}")


def with_requeue(
    name: str, data: str, command: list[str], common: dict[str, Any], pause: dict[str, float]
) -> Coroutine[Any, Any, int]:
    """``elect --requeue``: its options checked (usage errors), then the runner.

    ``common`` holds the options of ``lock`` and ``elect``, ``pause`` those of
    :func:`requeue_options`.
    """
    refused = given(["timeout", "conflict_exit_code", "lost_exit_code"])
    if common["try_only"]:
        refused.insert(0, "--try")
    if refused:
        raise click.UsageError(
            f"--requeue campaigns until stopped: it takes no {', '.join(refused)}"
        )
    for option, seconds in pause.items():
        if not math.isfinite(seconds):
            flag = f"--{option.replace('_', '-')}"
            raise click.UsageError(f"{flag} must be a number of seconds, got {seconds}")
    first, most = pause["requeue_delay"], pause["requeue_max_delay"]
    if most < first:
        raise click.UsageError(
            f"--requeue-max-delay ({most:g}) is shorter than --requeue-delay ({first:g})"
        )
    return elect_with_requeue(
        name,
        data,
        command,
        url=common["url"],
        node=common["node"],
        create_node=common["create_node"],
        grace=common["grace"],
        recovery_window=common["recovery_window"],
        pause=RequeuePause(first, most, pause["requeue_reset_after"]),
    )
