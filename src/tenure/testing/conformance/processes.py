"""Clients in other processes: child interpreters a test starts, reads and kills.

What a crash does is only seen from another process: a ``kill -9`` ends a process
with its sockets closed by the kernel, no ``finally`` run, no goodbye sent. The
``processes`` fixture (:class:`Processes`) starts ``python -c SOURCE URL ARGS...``
children that reach the test's state by its URL (the harness says whether they
can: ``Harness.can_share_with_processes``; ``memory://`` cannot, its state lives
in the test's process), reads what they print, line by line, and kills whatever
is left at the test's end.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path

import tenure

from .support import PATIENCE

#: Where the children import tenure from: the directory that holds this package (a
#: source checkout's ``src``, or site-packages), ahead of whatever else they find.
_TENURE_HOME = str(Path(tenure.__file__).resolve().parent.parent)


class ChildInterpreter:
    """One child interpreter: its printed lines, and its end."""

    def __init__(self, process: asyncio.subprocess.Process, what: str) -> None:
        self.process = process
        self.pid = process.pid
        self._what = what
        self.lines: list[str] = []

    def __repr__(self) -> str:
        return f"<ChildInterpreter {self.pid} {self._what}>"

    async def line(self, prefix: str) -> str:
        """The next line it prints that starts with ``prefix`` (fails, with its stderr,
        if it ends first or prints none within a few seconds)."""
        assert self.process.stdout is not None
        try:
            async with asyncio.timeout(PATIENCE):
                while True:
                    raw = await self.process.stdout.readline()
                    if not raw:
                        break
                    line = raw.decode().rstrip("\n")
                    self.lines.append(line)
                    if line.startswith(prefix):
                        return line
        except TimeoutError:
            raise AssertionError(
                f"{self!r} printed no line starting with {prefix!r} within {PATIENCE}s "
                f"(so far: {self.lines})"
            ) from None
        raise AssertionError(
            f"{self!r} ended ({await self.process.wait()}) before printing {prefix!r}: "
            f"{self.lines}\n{await self.stderr()}"
        )

    async def stderr(self) -> str:
        """What it wrote to stderr (once it has ended)."""
        if self.process.stderr is None:
            return ""
        return (await self.process.stderr.read()).decode(errors="replace")

    async def kill(self) -> None:
        """``kill -9`` it and reap it."""
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGKILL)
        await self.process.wait()


class Processes:
    """Starts children that reach the test's state (the ``processes`` fixture)."""

    def __init__(self, url: str) -> None:
        #: The URL of the test's state, as the children get it (their first argument).
        self.url = url
        self._children: list[ChildInterpreter] = []

    async def python(self, source: str, *args: str, what: str = "") -> ChildInterpreter:
        """Start ``python -c source URL args...`` (this interpreter, this tenure)."""
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [_TENURE_HOME, env.get("PYTHONPATH")]))
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            source,
            self.url,
            *args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        child = ChildInterpreter(process, what or " ".join(args))
        self._children.append(child)
        return child

    async def aclose(self) -> None:
        """Kill every child still running (at the test's end)."""
        for child in self._children:
            if child.process.returncode is None:
                await child.kill()
