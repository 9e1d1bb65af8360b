"""Running the installed ``tenure`` executable from the CLI tests.

Each test runs ``.venv/bin/tenure`` (the console script pip installed next to this
interpreter) as a subprocess, as a user would; every wait is bounded.
"""

from __future__ import annotations

import os
import select
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

#: The console script under test (installed by scripts/bootstrap with the cli extra).
TENURE = Path(sys.executable).with_name("tenure")
#: Upper bound of one command's run in these tests, in seconds.
RUN_TIMEOUT = 30.0
#: How a command's child program here ends its run: it waits to be stopped (SIGTERM,
#: passed on by its ``tenure``, or :func:`stop`), and ends by itself only once its
#: ``tenure`` is gone (killed: the child is another's then) or after 600 s, a bound
#: against a leak, not a measure: a child that ended by itself after 20 s let its
#: lock go while a test on a loaded machine still looked at it.
UNTIL_STOPPED = (
    "import os as _os, time as _time\n"
    "_parent, _deadline = _os.getppid(), _time.monotonic() + 600\n"
    "while _os.getppid() == _parent and _time.monotonic() < _deadline: _time.sleep(0.05)\n"
)


def python(script: str, *args: str) -> list[str]:
    """A command (a CMD for tenure to run) that runs the Python ``script`` with ``args``."""
    return [sys.executable, "-c", script, *args]


def tenure_env(url: str | None = None, **extra: str) -> dict[str, str]:
    """The environment for a ``tenure`` run: TENURE_URL set (or removed) as asked."""
    env = {key: value for key, value in os.environ.items() if key != "TENURE_URL"}
    if url is not None:
        env["TENURE_URL"] = url
    return {**env, **extra}


def run_tenure(
    *args: str, url: str | None = None, timeout: float = RUN_TIMEOUT, **extra: str
) -> subprocess.CompletedProcess[str]:
    """Run ``tenure ARGS`` to its end (bounded), with ``TENURE_URL=url``; its result."""
    return subprocess.run(
        [str(TENURE), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        env=tenure_env(url, **extra),
        check=False,
    )


def start_tenure(*args: str, url: str | None = None, **extra: str) -> subprocess.Popen[str]:
    """Start ``tenure ARGS`` in the background (the test waits for it and kills it)."""
    return subprocess.Popen(
        [str(TENURE), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
        env=tenure_env(url, **extra),
    )


class OnTerminal:
    """``tenure ARGS`` run as at a terminal: the session leader of a new session whose
    controlling terminal is a pseudo-terminal, in its foreground process group (what
    a shell does with a command it runs in the foreground). ``interrupt`` types ^C."""

    def __init__(self, *args: str, url: str | None = None) -> None:
        self.terminal, follower = os.openpty()
        try:
            # setsid(1) --ctty makes the pseudo-terminal (its stdin) the controlling one.
            self.proc = subprocess.Popen(
                ["setsid", "--ctty", str(TENURE), *args],
                stdin=follower,
                stdout=follower,
                stderr=follower,
                env=tenure_env(url),
            )
        finally:
            os.close(follower)
        self.seen = ""

    def wait_for(self, text: str, *, timeout: float = 10.0) -> str:
        """Read the terminal until ``text`` shows (bounded); everything read so far."""
        deadline = time.monotonic() + timeout
        while text not in self.seen:
            left = deadline - time.monotonic()
            assert left > 0, f"{text!r} never shown; the terminal shows {self.seen!r}"
            ready, _, _ = select.select([self.terminal], [], [], left)
            if not ready:
                continue
            try:
                chunk = os.read(self.terminal, 4096)
            except OSError:  # EIO: every process of the terminal has gone
                chunk = b""
            assert chunk, f"{text!r} never shown; the terminal closed after {self.seen!r}"
            self.seen += chunk.decode(errors="replace")
        return self.seen

    def interrupt(self) -> None:
        """Type ^C: the terminal sends SIGINT to its foreground process group."""
        os.write(self.terminal, b"\x03")

    def close(self) -> int:
        """Wait (bounded) for ``tenure`` to end, killing it if it will not, and read what
        is left on the terminal (into ``seen``); its status."""
        try:
            status = self.proc.wait(timeout=RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"tenure did not end; the terminal shows {self.seen!r}") from None
        finally:
            self._drain()
            os.close(self.terminal)
        return status

    def _drain(self) -> None:
        # What the processes wrote stays readable after they end, then reads fail (EIO).
        while select.select([self.terminal], [], [], 0)[0]:
            try:
                chunk = os.read(self.terminal, 4096)
            except OSError:
                return
            if not chunk:
                return
            self.seen += chunk.decode(errors="replace")


def one_error_line(result: subprocess.CompletedProcess[str] | tuple[str, str]) -> str:
    """The single line a failed command wrote on stderr (asserting it is one, no traceback)."""
    stderr = result[1] if isinstance(result, tuple) else result.stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


def wait_for_line(proc: subprocess.Popen[str], text: str, *, timeout: float = 10.0) -> str:
    """Read ``proc``'s stdout until a line containing ``text`` (bounded); that line."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    seen: list[str] = []
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if not selector.select(timeout=max(0.0, deadline - time.monotonic())):
                break
            line = proc.stdout.readline()
            if not line:
                break
            seen.append(line)
            if text in line:
                return line
    ended = proc.poll()
    why = (
        "" if ended is None or proc.stderr is None else f"; it exited {ended}: {proc.stderr.read()}"
    )
    raise AssertionError(f"{text!r} never printed; got {seen!r}{why}")


def finish(proc: subprocess.Popen[str], timeout: float = RUN_TIMEOUT) -> tuple[int, str, str]:
    """Wait (bounded) for a background ``tenure``; its status, stdout and stderr."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"tenure did not end within {timeout}s: {out} {err}") from None
    return proc.returncode, out, err


def stop(proc: subprocess.Popen[str]) -> None:
    """End a background ``tenure`` (and so its command) for good, whatever state it is in.

    SIGTERM first: ``tenure`` passes it on to its command and waits for it, so no
    command is left behind holding the pipes open; SIGKILL if that takes too long.
    """
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.communicate(timeout=RUN_TIMEOUT / 3)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()


__all__: Sequence[str] = [
    "TENURE",
    "UNTIL_STOPPED",
    "OnTerminal",
    "tenure_env",
    "finish",
    "one_error_line",
    "run_tenure",
    "start_tenure",
    "stop",
    "wait_for_line",
]
