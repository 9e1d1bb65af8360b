"""Running a command while something is held: what ``tenure lock`` and ``tenure elect`` share.

The command (the *child*) runs with this process's environment plus the variables
naming what is held. Its exit status is passed through (a child ended by signal N
gives 128 + N, as in a shell). If what is held is lost first, the child is sent
SIGTERM, then SIGKILL once ``grace`` seconds have passed, and the status is
:attr:`Status.LOST`. SIGINT, SIGTERM and SIGHUP sent to ``tenure`` meanwhile are
passed on to the child, and ``tenure`` waits for it to end (the caller then
releases the lock): a supervisor stopping ``tenure`` stops the command first.

The child stays in ``tenure``'s process group, so that it keeps the terminal (it
may read from it). A ^C typed at a terminal is sent by the terminal to its whole
foreground process group, the child included: a SIGINT that comes while ``tenure``
and the child are that group is not passed on again (:func:`terminal_sent`), so
that the child gets it once. A SIGINT sent to ``tenure`` alone then does not reach
the child: stop it with SIGTERM.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from typing import Final

from tenure.cli._common import CommandFailedError
from tenure.cli._status import Status
from tenure.client import EndSignal
from tenure.errors import LostError

#: Signals passed on to the child while it runs.
FORWARDED: Final = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: How long the child has, by default, between SIGTERM and SIGKILL after a loss.
DEFAULT_GRACE: Final = 10.0


#: The controlling terminal of this process, whatever its own name.
CONTROLLING_TERMINAL: Final = "/dev/tty"


def terminal_sent(child_pid: int) -> bool:
    """Whether a SIGINT received now came from the controlling terminal (a ^C) and so
    reached the child ``child_pid`` too: it is in this process's group, and that
    group is the terminal's foreground group, which the terminal signals whole."""
    try:
        terminal = os.open(CONTROLLING_TERMINAL, os.O_RDONLY | os.O_NOCTTY)
    except OSError:
        return False  # no controlling terminal: somebody sent it to tenure alone
    try:
        group = os.getpgrp()
        return os.tcgetpgrp(terminal) == group and os.getpgid(child_pid) == group
    except OSError:  # the child is gone, or the terminal hung up
        return False
    finally:
        os.close(terminal)


def child_status(returncode: int) -> int:
    """The exit status a child's ``returncode`` stands for (a signal N is 128 + N)."""
    return Status.SIGNAL_BASE - returncode if returncode < 0 else returncode


def say(message: str) -> None:
    """One line on stderr, prefixed ``tenure:`` (what happened to the lock or the child)."""
    print(f"tenure: {message}", file=sys.stderr, flush=True)


async def spawn(command: Sequence[str], environ: Mapping[str, str]) -> asyncio.subprocess.Process:
    """Start ``command``; a missing or unrunnable program is CommandFailedError (127 or 126)."""
    try:
        return await asyncio.create_subprocess_exec(*command, env=dict(environ))
    except FileNotFoundError:
        raise CommandFailedError(
            f"{command[0]}: command not found", Status.COMMAND_NOT_FOUND
        ) from None
    except OSError as error:  # PermissionError, ENOEXEC...
        raise CommandFailedError(
            f"{command[0]}: cannot execute: {error.strerror or error}", Status.CANNOT_EXECUTE
        ) from None


class Signals:
    """SIGINT, SIGTERM and SIGHUP, routed for a command's life (use it as a context).

    Until a child runs, a signal cancels the task that opened it (while ``tenure``
    waits for a lock, that withdraws the request, instead of killing the process
    and leaving the request queued until the session's recovery window passes).
    While a child runs, a signal is passed on to it (bar a terminal's ^C, which has
    reached it already: :func:`terminal_sent`). Once it has ended, signals are
    only recorded: the lock is being released, which must not be cut short.
    ``received`` lists the signals that came, in order.
    """

    def __init__(self) -> None:
        self.received: list[int] = []
        self.child: asyncio.subprocess.Process | None = None
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

    def _on_signal(self, signum: int) -> None:
        self.received.append(signum)
        if self.child is not None:
            if self.child.returncode is None and not (
                signum == signal.SIGINT and terminal_sent(self.child.pid)
            ):
                _send(self.child, signum)
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
) -> int:
    """Run ``command`` until it exits or ``lost`` ends; the exit status to end with.

    ``what`` names what is held, for the messages ("lock 'job'"). The caller holds
    it and releases it afterwards; ``signals`` passes signals on to the child.
    """
    if lost.ended:
        # Lost between the grant and now: the command must not start unprotected.
        say(f"{what} was lost before the command started: {lost.reason}")
        return lost_status
    child = await spawn(command, environ)
    signals.child = child
    exited = asyncio.ensure_future(child.wait())
    ended = asyncio.ensure_future(_end_of(lost))
    try:
        await asyncio.wait({exited, ended}, return_when=asyncio.FIRST_COMPLETED)
        if exited.done():
            return child_status(exited.result())
        say(f"{what} was lost: {ended.result()}; sending SIGTERM to the command (pid {child.pid})")
        _send(child, signal.SIGTERM)
        try:
            await asyncio.wait_for(asyncio.shield(exited), grace)
        except TimeoutError:
            say(f"the command (pid {child.pid}) did not exit within {grace:g}s: sending SIGKILL")
            _send(child, signal.SIGKILL)
            await exited
        return lost_status
    finally:
        ended.cancel()
        if not exited.done():
            # Only when this task itself is cancelled: never leave the child behind.
            _send(child, signal.SIGKILL)
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(exited)


async def _end_of(signal_: EndSignal) -> LostError | None:
    return await signal_


def _send(child: asyncio.subprocess.Process, signum: int) -> None:
    """Signal the child unless it has already ended."""
    with contextlib.suppress(ProcessLookupError):
        child.send_signal(signum)
