"""How a shell block runs: each command with bash, in a directory of the block's own,
with the venv's ``bin`` first on ``PATH``, one after the other (an ``export`` holds
for the commands after it), against the servers its page names.

What the page says of a command (tests/docs/shell_pages.py) is a :class:`Line`: a
command that serves for ever (``tenure serve``, a ``--requeue`` leader) is started,
checked to work, and stopped at the block's end; one that must not run here (an
install from the package index) is skipped, saying why; the others must exit as the
page says and print what it says. The page's addresses are put in as written
(:class:`Places`), and every ``tenure serve`` listens on a free loopback port.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import tenure.sync
from tenure.errors import TenureError
from tests.ports import free_ports

#: How long one command may take, and a background one to show it works.
COMMAND_WAIT = 120.0
READY_WAIT = 60.0

BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class Line:
    """What the page says of the commands of a block that match ``match`` (a regular
    expression searched in the command as written)."""

    match: str
    #: Not run here, and why (the reason is part of the test's data).
    skip: str | None = None
    #: It runs until stopped: a regular expression of its output once it works...
    background: str | None = None
    #: ...or a command that exits 0 once it works (or, to spare a process per look,
    #: a check made from this process of the run's servers).
    ready: str | Callable[[Places], bool] | None = None
    #: ``{pid:LABEL}`` in a later command is its process id.
    label: str | None = None
    #: How it is stopped at the block's end, and what it then exits with (None: any).
    stop: int = signal.SIGTERM
    stopped: int | None = 0
    #: Its exit status, and a regular expression of its output (stdout and stderr).
    status: int = 0
    prints: str | None = None
    #: After it ran: a background command (by label) must print this (a regex).
    then: tuple[str, str] | None = None
    #: Added to the command: what this run needs beyond the page's words, and why.
    append: str = ""
    #: Stopped as soon as it works (the block's next line is another way to run it).
    once: bool = False


#: What holds for every page: installs are not run (tests/test_extras.py checks that
#: each extra they name exists), nor the test command itself; a server is started
#: in the background and its address is a free port.
EVERY_PAGE: tuple[Line, ...] = (
    Line(
        r"^pip install ",
        skip="installs from the package index into the environment: not in a test run "
        "(tests/test_extras.py checks that the extras it names exist)",
    ),
    Line(
        r"^scripts/bootstrap ",
        skip="installs into the checkout's .venv with pip: not in a test run "
        "(tests/test_extras.py checks that the extras it names exist)",
    ),
    Line(r"^scripts/test$", skip="the test command itself: it runs this test"),
    Line(r"^(\w+=\S* )*tenure serve\b", background=r'"msg": "listening"'),
)


@dataclass
class Places:
    """The values a block's templates name: servers' addresses (``{tenure}``), free
    ports kept for the run (``{port:6388}``), background processes' ids
    (``{pid:a}``), a name of the run's own (``{unique}``)."""

    servers: dict[str, str]
    ports: dict[str, int] = field(default_factory=dict)
    pids: dict[str, int] = field(default_factory=dict)
    unique: str = field(default_factory=lambda: f"docs-{uuid.uuid4().hex[:8]}")

    def port(self, key: str) -> int:
        """The run's free port for ``key`` (with the three above it free too, for
        ``--shards``)."""
        if key not in self.ports:
            self.ports[key] = free_ports(4)
        return self.ports[key]

    def fill(self, template: str) -> str:
        """``template`` with its ``{...}`` put in."""

        def value(match: re.Match[str]) -> str:
            kind, _, key = match[1].partition(":")
            if kind == "port":
                key, _, above = key.partition("+")
                return str(self.port(key) + int(above or 0))
            if kind == "pid":
                return str(self.pids[key])
            if kind == "unique":
                return self.unique
            return self.servers[kind]

        return re.sub(r"\{(\w+(?::[\w.+-]+)?)\}", value, template)


def commands(text: str) -> list[str]:
    """The commands of a block: its lines, continuations joined, comments (whole
    lines, and what follows a `` #`` outside quotes) and blank lines left out."""
    joined = re.sub(r"\\\n\s*", "", text)
    lines = [uncommented(line).strip() for line in joined.splitlines()]
    return [line for line in lines if line]


def uncommented(line: str) -> str:
    """``line`` without its comment: bash's ``#`` at a word's start, outside quotes."""
    quote = ""
    for at, char in enumerate(line):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (at == 0 or line[at - 1].isspace()):
            return line[:at]
    return line


def served(command: str, places: Places) -> str:
    """A ``tenure serve`` command as it runs here: each port it names (``--port``,
    ``--ydb-port``, ``--http-port``) a free one of the run's, ``--port`` added if it
    names none (the page's default, 6388, may be taken)."""
    command = re.sub(
        r"(--(?:ydb-|http-)?port)[ =](\d+)",
        lambda m: f"{m[1]} {{port:{m[2]}}}",
        command,
    )
    if not re.search(r"--port\b", command):
        command += " --port {port:6388}"
    return command


#: A command that starts a tenure server.
SERVE = re.compile(r"^(\w+=\S* )*tenure serve\b")


def answers(command: str) -> Callable[[Path], bool] | None:
    """What tells that the server ``command`` starts answers: a listing of its nodes,
    from this process (over TLS trusting the ca.pem beside its certificate, relative
    to the block's directory); with ``--shards N``, of every shard's (``--port`` + K,
    K below N: a block's check run once the first shard answered found the last one
    not listening yet)."""
    port = re.search(r"--port (\d+)", command)
    if port is None:
        return None
    shards = re.search(r"--shards (\d+)", command)
    ports = [int(port[1]) + shard for shard in range(int(shards[1]) if shards else 1)]
    cert = re.search(r"--tls-cert (\S+)", command)

    def listed(where: Path) -> bool:
        for each in ports:
            url = f"tenure://127.0.0.1:{each}?connect_timeout=5"
            if cert is not None:
                ca = (where / cert[1]).with_name("ca.pem")
                url = f"tenures://127.0.0.1:{each}?connect_timeout=5&ca={ca}"
            try:
                with tenure.sync.connect(url) as client:
                    client.list_nodes()
            except TenureError:
                return False
        return True

    return listed


def placed(command: str, substitutions: dict[str, str], places: Places) -> str:
    """``command`` with the page's substitutions and the run's ports
    (``127.0.0.1:6388`` is the run's server listening for 6388, if one does), its
    templates left to fill (:meth:`Places.fill`)."""
    for written, template in substitutions.items():
        command = command.replace(written, template)
    for key in list(places.ports):
        command = re.sub(rf"\b(127\.0\.0\.1|localhost):{key}\b", rf"\1:{{port:{key}}}", command)
    return command


@dataclass
class Started:
    """A command running in the background (in a process group of its own)."""

    command: str
    line: Line
    proc: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")


class BlockRun:
    """One block's run: its directory, environment, background commands, report."""

    def __init__(self, where: Path, env: dict[str, str], places: Places) -> None:
        self.where = where
        self.env = {**env, "PATH": f"{BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
        self.places = places
        self.exports: list[str] = []
        self.background: list[Started] = []
        self.report: list[str] = []

    def bash(self, command: str) -> list[str]:
        """bash running ``command`` after the block's exports."""
        return ["bash", "-c", "\n".join([*self.exports, command])]

    def run(self, command: str, line: Line) -> None:
        """Run one command as ``line`` says."""
        if line.background is not None or line.ready is not None:
            self.start(command, line)
            return
        done = subprocess.run(
            self.bash(command),
            cwd=self.where,
            env=self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=COMMAND_WAIT,
            check=False,
        )
        output = done.stdout + done.stderr
        self.report.append(f"$ {command}\n(exit {done.returncode})\n{output}")
        assert done.returncode == line.status, self.said(f"{command!r} exited {done.returncode}")
        if line.prints is not None:
            assert re.search(line.prints, output), self.said(
                f"{command!r} did not print /{line.prints}/"
            )
        if command.startswith("export "):
            self.exports.append(command)
        if line.then is not None:
            label, regex = line.then
            self.wait(
                lambda: re.search(regex, self.labelled(label).output()), f"{label} prints /{regex}/"
            )

    def start(self, command: str, line: Line) -> None:
        log = self.where / f"background-{len(self.background)}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                # exec: the signals that stop it reach the command itself (env: it may
                # begin with variables of its own, REPLICA=a python ...).
                self.bash(
                    f"exec env {command}" if re.match(r"\w+=", command) else f"exec {command}"
                ),
                cwd=self.where,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        probe = answers(command) if line.ready is None and SERVE.match(command) else None
        started = Started(command, line, proc, log)
        self.background.append(started)
        if line.label is not None:
            self.places.pids[line.label] = proc.pid
        self.report.append(f"$ {command} &  (pid {proc.pid})")

        def works() -> bool:
            assert proc.poll() is None, self.said(f"{command!r} ended (exit {proc.returncode})")
            if line.background is not None and not re.search(line.background, started.output()):
                return False
            if probe is not None:
                return probe(self.where)
            if line.ready is None:
                return True
            if not isinstance(line.ready, str):
                return line.ready(self.places)
            ready = self.places.fill(line.ready)
            done = subprocess.run(
                self.bash(ready),
                cwd=self.where,
                env=self.env,
                capture_output=True,
                text=True,
                timeout=COMMAND_WAIT,
                check=False,
            )
            answer[:] = [f"$ {ready}\n(exit {done.returncode})\n{done.stdout}{done.stderr}"]
            return done.returncode == 0

        answer: list[str] = []
        self.wait(works, lambda: f"{command!r} works {' '.join(answer)}")
        if line.once:
            self.halt(started)

    def halt(self, started: Started) -> str | None:
        """Stop ``started`` as its line says; why that went wrong, or None."""
        if started.proc.poll() is None:
            os.killpg(started.proc.pid, started.line.stop)
            try:
                started.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(started.proc.pid, signal.SIGKILL)
                started.proc.wait(10)
                return f"{started.command!r} did not stop on {started.line.stop!r}"
            expected = started.line.stopped
            if expected is not None and started.proc.returncode not in (
                expected,
                -started.line.stop,
            ):
                return f"{started.command!r} stopped with exit {started.proc.returncode}"
        self.report.append(f"$ {started.command}  (stopped)\n{started.output()[-3000:]}")
        return None

    def labelled(self, label: str) -> Started:
        return next(s for s in self.background if s.line.label == label)

    def wait(self, check: Callable[[], object], what: str | Callable[[], str]) -> None:
        """Until ``check()`` is true, within :data:`READY_WAIT`; else fail saying ``what``
        (a text, or what makes it once it is needed)."""
        deadline = time.monotonic() + READY_WAIT
        pause = 0.05
        while not check():
            if time.monotonic() > deadline:
                raise AssertionError(self.said(what if isinstance(what, str) else what()))
            time.sleep(pause)
            pause = min(2 * pause, 1.0)  # a check may start a process: not too often

    def stop(self) -> None:
        """Stop what runs in the background, each as its line says; check its exit."""
        failures = [why for started in reversed(self.background) if (why := self.halt(started))]
        assert not failures, self.said("; ".join(failures))

    def said(self, what: str) -> str:
        """``what`` went wrong, with what the block's commands did and printed."""
        running = [
            f"--- {started.command} (pid {started.proc.pid}) printed:\n{started.output()[-1500:]}"
            for started in self.background
        ]
        return "\n".join([what, "--- the block's run:", *self.report, *running])[-12000:]


def quoted(path: Path) -> str:
    return shlex.quote(str(path))
