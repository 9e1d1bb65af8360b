"""Running a command while something is held: what ``tenure lock`` and ``tenure elect`` share.

The command (the *child*) runs with this process's environment plus the variables
naming what is held. Its exit status is passed through (a child ended by signal N
gives 128 + N, as in a shell). If what is held is lost first, the child's whole
process group is sent SIGTERM, then SIGKILL once ``grace`` seconds have passed, and
the status is :attr:`Status.LOST`. SIGINT, SIGTERM and SIGHUP sent to ``tenure``
meanwhile are passed on to the group, and ``tenure`` waits for it to end (the
caller then releases the lock): a supervisor stopping ``tenure`` stops the command
first.

The command never outlives ``tenure`` (a command running without its lock is what
the lock is there to prevent): it runs under the guard (:mod:`tenure.cli._guard`),
the leader of a process group of its own, which kills the whole group when
``tenure`` goes (even by ``kill -9``: it watches a pipe only ``tenure`` writes to)
and ends what the command left behind when it exits. When ``tenure`` runs in the
terminal's foreground, the guard hands the terminal to the command's group (as a
shell does for a job), so that the command may read it and a ^C reaches it once;
``tenure`` takes the terminal back when the command has ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from tenure.cli._auth_token import redact
from tenure.cli._common import CommandFailedError, environ_with
from tenure.cli._status import Status
from tenure.client import EndSignal, Lease
from tenure.errors import LostError

#: Signals passed on to the child while it runs.
FORWARDED: Final = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: The guard's script, run by the interpreter running tenure (see :mod:`tenure.cli._guard`).
GUARD: Final = str(Path(__file__).with_name("_guard.py"))
#: How long the child has, by default, between SIGTERM and SIGKILL after a loss.
DEFAULT_GRACE: Final = 10.0


def in_foreground() -> bool:
    """Whether stdin is a terminal whose foreground process group is this process's."""
    try:
        return os.isatty(0) and os.tcgetpgrp(0) == os.getpgrp()
    except OSError:
        return False


def take_terminal_back(group: int) -> None:
    """Make this process's group the terminal's foreground again if ``group`` has it."""
    try:
        if not os.isatty(0) or os.tcgetpgrp(0) != group:
            return
    except OSError:
        return
    # A background group's tcsetpgrp raises SIGTTOU, which would stop tenure: blocked.
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTTOU})
    try:
        with contextlib.suppress(OSError):
            os.tcsetpgrp(0, os.getpgrp())
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def child_status(returncode: int) -> int:
    """The exit status a child's ``returncode`` stands for (a signal N is 128 + N)."""
    return Status.SIGNAL_BASE - returncode if returncode < 0 else returncode


def held_environ(
    name: str, node: str, lease: Lease, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment of a command run while ``lease`` (of ``name`` in ``node``: a
    lock, semaphore tokens, leadership) is held: this process's, plus TENURE_TOKEN,
    TENURE_LOCK, TENURE_NODE, TENURE_SESSION_ID and ``extra``."""
    return environ_with(
        {
            "TENURE_TOKEN": str(lease.token),
            "TENURE_LOCK": name,
            "TENURE_NODE": node,
            "TENURE_SESSION_ID": str(lease.session.id),
            **(extra or {}),
        }
    )


class Bounded:
    """A stop for a command whose hold ends ``bound`` seconds after its grant (a claim's
    ``--at-most``, a lock's ``--max-hold``), timed on this machine's monotonic clock:
    :attr:`stop` ends with ``why`` ``min(grace, bound / 2)`` seconds before ``end``
    (SIGTERM then), and :attr:`grace` is what is left until ``end`` (SIGKILL then), so
    that the command is gone by ``end``; with ``lost`` (the hold's own end), it ends
    with that too, if first. :meth:`cancel` the timer when the command is done."""

    def __init__(
        self, end: float, bound: float, grace: float, why: LostError, lost: EndSignal | None = None
    ) -> None:
        loop = asyncio.get_running_loop()
        # At most half of the bound: a grace longer than the hold would stop the
        # command as it starts.
        term_at = max(loop.time(), end - min(grace, bound / 2))
        #: What the command is stopped by (pass it to :func:`supervise`).
        self.stop = EndSignal()
        #: The seconds between SIGTERM and SIGKILL (pass it to :func:`supervise`).
        self.grace = end - term_at
        if lost is not None:
            lost.add_callback(self.stop.end)
        self._timer = loop.call_at(term_at, self.stop.end, why)

    def cancel(self) -> None:
        """Stop the timer (the command has ended)."""
        self._timer.cancel()


def say(message: str) -> None:
    """One line on stderr, prefixed ``tenure:`` (what happened to the lock or the child)."""
    print(f"tenure: {redact(message)}", file=sys.stderr, flush=True)  # (no secret shown)


class Child:
    """The command's process group, led by its guard; ``process`` is the guard."""

    def __init__(self, process: asyncio.subprocess.Process, pipe: int, terminal: bool) -> None:
        self.process = process
        self.pid = process.pid
        self._pipe = pipe
        self._terminal = terminal

    def signal(self, signum: int) -> None:
        """Send ``signum`` to the whole group, unless the guard has ended (and so the group)."""
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signum)

    def close(self) -> None:
        """After the guard has ended: close the pipe, take the terminal back if handed over."""
        if self._pipe >= 0:
            os.close(self._pipe)
            self._pipe = -1
        if self._terminal:
            take_terminal_back(self.pid)


async def spawn(command: Sequence[str], environ: Mapping[str, str], grace: float) -> Child:
    """Start ``command`` under its guard, in a process group of its own."""
    # A command that is missing or cannot run is the guard's to say (127 or 126).
    # The write end stays here alone (os.pipe's ends are not inherited): when tenure
    # ends, however it ends, the guard reads end of file.
    watched, held = os.pipe()
    terminal = in_foreground()
    guard = [sys.executable, "-I", "-S", GUARD, str(watched), repr(grace), "1" if terminal else "0"]
    try:
        process = await asyncio.create_subprocess_exec(
            *guard, "--", *command, env=dict(environ), pass_fds=(watched,), process_group=0
        )
    except BaseException as error:
        os.close(held)
        if isinstance(error, OSError):  # the interpreter itself cannot be run
            raise CommandFailedError(
                f"cannot start the command's guard: {error.strerror or error}",
                Status.CANNOT_EXECUTE,
            ) from None
        raise
    finally:
        os.close(watched)
    return Child(process, held, terminal)


class Signals:
    """SIGINT, SIGTERM and SIGHUP, routed for a command's life (use it as a context).

    Until a child runs, a signal cancels the task that opened it (while ``tenure``
    waits for a lock, that withdraws the request, instead of killing the process
    and leaving the request queued until the session's recovery window passes).
    While a child runs, a signal is passed on to its whole process group (a ^C at a
    terminal reaches that group alone, from the terminal: the guard made it the
    foreground group). Once it has ended, signals are
    only recorded: the lock is being released, which must not be cut short.
    ``received`` lists the signals that came, in order.
    """

    def __init__(self) -> None:
        self.received: list[int] = []
        self.child: Child | None = None
        self._task: asyncio.Task[object] | None = None

    def __enter__(self) -> Signals:
        loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        for signum in FORWARDED:
            loop.add_signal_handler(signum, self._on_signal, signum)
        return self

    def __exit__(self, *exc: object) -> None:
        loop = asyncio.get_running_loop()
        for signum in FORWARDED:
            loop.remove_signal_handler(signum)

    @property
    def stopped_by(self) -> int | None:
        """The first signal that came, if any."""
        return self.received[0] if self.received else None

    def stopped_status(self, doing: str) -> int | None:
        """Called on the cancellation of the task that opened it: if a signal N caused
        it, says so (it stopped ``doing``) and returns 128 + N, the cancellation undone
        (the task ends with that status instead); else None (another cancellation)."""
        if self.stopped_by is None:
            return None
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()
        say(f"stopped by signal {self.stopped_by} while {doing}")
        return Status.SIGNAL_BASE + self.stopped_by

    def _on_signal(self, signum: int) -> None:
        self.received.append(signum)
        if self.child is not None:
            self.child.signal(signum)
        elif self._task is not None:
            self._task.cancel()


async def supervise(
    command: Sequence[str],
    environ: Mapping[str, str],
    lost: EndSignal,
    signals: Signals,
    *,
    what: str,
    grace: float,
    lost_status: int,
    lost_words: str = "was lost",
) -> int:
    """Run ``command`` until it exits or ``lost`` ends; the exit status to end with.

    ``what`` names what is held, for the messages ("lock 'job'", then ``lost_words``
    and the reason). The caller holds it and releases it afterwards; ``signals``
    passes signals on to the child.
    """
    if lost.ended:
        # Lost between the grant and now: the command must not start unprotected.
        say(f"{what} {lost_words} before the command started: {lost.reason}")
        return lost_status
    child = await spawn(command, environ, grace)
    signals.child = child
    exited = asyncio.ensure_future(child.process.wait())
    ended = asyncio.ensure_future(_end_of(lost))
    try:
        await asyncio.wait({exited, ended}, return_when=asyncio.FIRST_COMPLETED)
        if exited.done():
            return child_status(exited.result())
        say(
            f"{what} {lost_words}: {ended.result()}; sending SIGTERM to the command "
            f"(process group {child.pid})"
        )
        child.signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(asyncio.shield(exited), grace)
        except TimeoutError:
            say(
                f"the command (process group {child.pid}) did not exit within {grace:g}s: "
                "sending SIGKILL"
            )
            child.signal(signal.SIGKILL)
            await exited
        return lost_status
    finally:
        ended.cancel()
        if not exited.done():
            # Only when this task itself is cancelled: never leave the command behind.
            child.signal(signal.SIGKILL)
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(exited)
        child.close()


async def _end_of(signal_: EndSignal) -> LostError | None:
    return await signal_
