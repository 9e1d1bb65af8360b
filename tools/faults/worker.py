"""A worker process of a fault run: a few tenure clients doing the workload, recorded.

``python -m tools.faults.worker CONFIG.json``. Each client (its own connection and
session, process label ``w<index>c<n>``) loops until the worker is told to stop
(SIGTERM):

1. take one of the mutexes (``acquire``: ok with its token, or fail);
2. run the critical section (``section``) as ``async with lock:``: a fenced write
   with the token, then work in a thread: a hold of a random length and a second
   fenced write. A thread cannot be cancelled, so when the lease is lost meanwhile
   (a pause, a partition) the body is cancelled but the thread's write still
   happens, late, with the old token: only the fence stops it (Kleppmann's
   scenario). The section ends
   ``released``, ``lost`` (the body was cancelled with the loss error, as tenure
   promises), ``lost-not-cancelled`` (the body ran to its end although the lease
   was lost while it ran: a broken promise 5), ``lost-after-body`` (the loss came
   after the body had ended, before the release landed: nothing was running to
   cancel), or ``release-failed`` (the body ran to its end,
   then the release raised, e.g. ``UnavailableError`` on a backend it could not
   reach; the client goes on with the same session, as an application would).
   Its end's time is the body's end; when the block's exit returned (the release
   answered, or the loss told) is ``returned`` (lincheck's histories need both:
   :mod:`tools.faults.lin_events`);
3. write the next number into its own persistent semaphore's data (``update``),
   the register the durability check reads back.

With ``probe_every`` (the hostile-tenant scenario) each session also runs a probe
beside that loop: every ``probe_every`` seconds it reads its register's description
(``probe``, a read that touches no disk), so that the history holds how long the
server took to answer an honest client, all through the run.

A lost session (``SessionExpiredError`` and friends) is recorded and replaced by a
new one. Every wait is bounded by the stop: after SIGTERM the clients get a grace
period to finish their step, then they are cancelled (what was pending ends
``info``), closed, and the process exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import select
import signal
import sys
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

import tenure
from tenure.errors import LostError, TenureError
from tools.faults.fence import FenceClient
from tools.faults.history import Recorder, now

#: After SIGTERM, how long clients may finish their step before they are cancelled.
STOP_GRACE: Final = 3.0
#: Bound of closing the clients at the end (a dead server makes closing wait).
CLOSE_WAIT: Final = 10.0


@dataclass
class WorkerConfig:
    """Everything one worker process needs (written as JSON by the harness)."""

    index: int
    url: str
    node: str
    keys: list[str]
    clients: int
    window: float
    hold: tuple[float, float]
    history: str
    fence_port: int
    seed: int
    registers: bool = True
    pause_between: tuple[float, float] = (0.0, 0.02)
    connect_timeout: float = 2.0
    mutant: str | None = None
    extra: dict[str, str] = field(default_factory=dict)
    #: Seconds between two probes of a client (0: no probe; see :meth:`Client._probe`).
    probe_every: float = 0.0

    def labels(self) -> list[str]:
        """The process labels of this worker's clients."""
        return [label(self.index, n) for n in range(self.clients)]

    def dump(self, path: Path) -> None:
        """Write the config as JSON."""
        path.write_text(json.dumps(asdict(self)))

    @classmethod
    def read(cls, path: Path) -> WorkerConfig:
        """Read a config written by :meth:`dump`."""
        data = json.loads(path.read_text())
        data["hold"] = tuple(data["hold"])
        data["pause_between"] = tuple(data["pause_between"])
        return cls(**data)


def label(index: int, client: int) -> str:
    """The process label of client ``client`` of worker ``index``."""
    return f"w{index}c{client}"


def register_of(process: str) -> str:
    """The name of the semaphore whose data is ``process``'s register."""
    return f"reg-{process}"


class SessionGoneError(Exception):
    """The client's session ended: open a new one."""


class Client:
    """One client's loop (see the module docstring)."""

    def __init__(self, config: WorkerConfig, process: str, recorder: Recorder) -> None:
        self.config = config
        self.process = process
        self.rec = recorder
        self.rng = random.Random(f"{config.seed}-{process}")
        self.fence = FenceClient(config.fence_port)
        self.seq = 0
        self.created = False

    async def run(self, stop: asyncio.Event) -> None:
        """Connect (retrying while the server is down), then loop on sessions until ``stop``."""
        client: tenure.Client | None = None
        try:
            while client is None and not stop.is_set():
                try:
                    client = await tenure.connect(
                        self.config.url, connect_timeout=self.config.connect_timeout
                    )
                except (TenureError, OSError) as error:
                    self.rec.note(self.process, "connect-failed", error=repr(error))
                    await _sleep_unless(stop, self.rng.uniform(0.2, 0.5))
            while client is not None and not stop.is_set():
                await self._one_session(client, stop)
        except Exception as error:
            # The workload itself broke (a bug of the harness, or an error tenure must
            # never raise): said in the history, so the checker reports it as such.
            self.rec.note(self.process, "client-error", error=repr(error))
            raise
        finally:
            self.fence.close()
            if client is not None:
                with contextlib.suppress(TenureError, OSError, TimeoutError):
                    async with asyncio.timeout(CLOSE_WAIT):
                        await client.aclose()

    async def _one_session(self, client: tenure.Client, stop: asyncio.Event) -> None:
        op = self.rec.invoke(self.process, "session-open")
        try:
            session = await client.session(self.config.node, recovery_window=self.config.window)
        except asyncio.CancelledError:
            self.rec.complete(self.process, op, "info", error="stopped")
            raise
        except (TenureError, OSError) as error:
            self.rec.complete(self.process, op, "info", error=repr(error))
            await _sleep_unless(stop, self.rng.uniform(0.1, 0.3))
            return
        self.rec.complete(self.process, op, "ok", session=session.id)
        probe = None
        if self.config.probe_every > 0:
            probe = asyncio.create_task(self._probe(session, stop))
        try:
            while not stop.is_set() and not session.closed:
                await self._step(session)
                await _pause(self.rng.uniform(*self.config.pause_between))
        except SessionGoneError:
            pass
        finally:
            if probe is not None:
                probe.cancel()
                await asyncio.gather(probe, return_exceptions=True)
            reason = session.lost_reason
            if reason is not None:
                self.rec.note(self.process, "session-lost", session=session.id, error=repr(reason))
            with contextlib.suppress(TenureError, OSError, TimeoutError):
                async with asyncio.timeout(CLOSE_WAIT):
                    await session.close()

    async def _probe(self, session: tenure.Session, stop: asyncio.Event) -> None:
        """Read the register's description every ``probe_every`` s (module docstring)."""
        semaphore = session.semaphore(register_of(self.process))
        while not stop.is_set() and not session.closed:
            op = self.rec.invoke(self.process, "probe", session=session.id)
            try:
                await semaphore.describe()
            except asyncio.CancelledError:
                self.rec.complete(self.process, op, "info", error="stopped")
                raise
            except (TenureError, OSError) as error:
                self.rec.complete(self.process, op, "info", error=repr(error))
                if isinstance(error, LostError):
                    return  # the session's loop sees the loss too, and opens a new one
            else:
                self.rec.complete(self.process, op, "ok")
            await asyncio.sleep(self.config.probe_every)

    async def _step(self, session: tenure.Session) -> None:
        if self.config.registers and not self.created:
            await self._create_register(session)
        key = self.rng.choice(self.config.keys)
        lock = await self._acquire(session, key)
        await self._section(session, key, lock)
        if self.config.registers and self.created:
            await self._update(session)

    async def _acquire(self, session: tenure.Session, key: str) -> tenure.Lock:
        op = self.rec.invoke(self.process, "acquire", key=key, session=session.id)
        try:
            lock = await session.mutex(key).lock()
        except asyncio.CancelledError:
            self.rec.complete(self.process, op, "info", error="stopped")
            raise
        except LostError as error:
            self.rec.complete(self.process, op, "fail", error=repr(error))
            raise SessionGoneError from error
        except (TenureError, OSError) as error:
            self.rec.complete(self.process, op, "info", error=repr(error))
            raise SessionGoneError from error
        self.rec.complete(self.process, op, "ok", token=lock.token)
        return lock

    async def _section(self, session: tenure.Session, key: str, lock: tenure.Lock) -> None:
        token = lock.token
        op = self.rec.invoke(self.process, "section", key=key, session=session.id, token=token)
        body_end: float | None = None
        # When the loss was told (the signal's callbacks run as it ends): a loss told
        # after the body ended is no broken promise 5, one told while it ran is.
        lost_at: list[float] = []
        lock.lost.add_callback(lambda reason: lost_at.append(now()) if reason else None)
        try:
            async with lock:
                await self._write(session, key, token, op)
                hold = self.rng.uniform(*self.config.hold)
                await asyncio.to_thread(self._late_write, session.id, key, token, op, hold)
                body_end = now()
        except asyncio.CancelledError:
            self.rec.complete(self.process, op, "info", error="stopped")
            raise
        except LostError as error:
            self.rec.complete(self.process, op, "lost", error=repr(error))
            if session.closed:
                raise SessionGoneError from error
            return
        except (TenureError, OSError) as error:
            # Only the release at the block's end can raise here (the body catches
            # its own errors): the body ran to its end, and the section ends there.
            end = now() if body_end is None else body_end
            self.rec.complete(self.process, op, "release-failed", t=end, error=repr(error))
            return
        # When the block's exit (the release) returned: the section's time is its body's end.
        returned = now()
        reason = lock.lost_reason
        if reason is None:
            self.rec.complete(self.process, op, "released", t=body_end, returned=returned)
        else:
            late = body_end is not None and bool(lost_at) and lost_at[0] > body_end
            outcome = "lost-after-body" if late else "lost-not-cancelled"
            self.rec.complete(
                self.process, op, outcome, t=body_end, error=repr(reason), lost_at=lost_at[:1],
                returned=returned,
            )  # fmt: skip

    async def _write(self, session: tenure.Session, key: str, token: int, section: int) -> None:
        op = self.rec.invoke(
            self.process, "write", key=key, session=session.id, token=token, section=section
        )
        try:
            ok = await self.fence.write(key, token, self.process, op)
        except asyncio.CancelledError:
            self.rec.complete(self.process, op, "info", error="cancelled")
            raise
        except (OSError, TimeoutError) as error:
            self.rec.complete(self.process, op, "info", error=repr(error))
            return
        self.rec.complete(self.process, op, "ok" if ok else "rejected")

    def _late_write(self, session: int, key: str, token: int, section: int, hold: float) -> None:
        """The thread's part of the body: hold, then the second fenced write."""
        # Not time.sleep: under libfaketime with FAKETIME_DONT_FAKE_MONOTONIC it fails
        # with EINVAL; nor a timed lock wait: with the monotonic clock faked, its
        # deadline is a faked time the kernel waits for (decades). A relative select
        # timeout works under both.
        select.select([], [], [], hold)
        op = self.rec.invoke(
            self.process, "write", key=key, session=session, token=token, section=section
        )
        try:
            ok = self.fence.write_blocking(key, token, self.process, op)
        except OSError as error:
            self.rec.complete(self.process, op, "info", error=repr(error))
            return
        self.rec.complete(self.process, op, "ok" if ok else "rejected")

    async def _create_register(self, session: tenure.Session) -> None:
        name = register_of(self.process)
        op = self.rec.invoke(self.process, "create", key=name, session=session.id, value=0)
        try:
            await session.semaphore(name).create(limit=1, data=b"0", exist_ok=True)
        except asyncio.CancelledError:
            self.rec.complete(self.process, op, "info", error="stopped")
            raise
        except (TenureError, OSError) as error:
            self.rec.complete(self.process, op, "info", error=repr(error))
            raise SessionGoneError from error
        self.rec.complete(self.process, op, "ok")
        self.created = True

    async def _update(self, session: tenure.Session) -> None:
        self.seq += 1
        name = register_of(self.process)
        op = self.rec.invoke(self.process, "update", key=name, session=session.id, value=self.seq)
        try:
            await session.semaphore(name).update(str(self.seq).encode())
        except asyncio.CancelledError:
            self.rec.complete(self.process, op, "info", error="stopped")
            raise
        except (TenureError, OSError) as error:
            # Lost with its connection, or its session ended meanwhile: it may have
            # been applied (never "fail": that would claim it certainly was not).
            self.rec.complete(self.process, op, "info", error=repr(error))
            raise SessionGoneError from error
        self.rec.complete(self.process, op, "ok")


async def _pause(seconds: float) -> None:
    """Pause between two steps: a relative ``select`` timeout in a thread, not a loop timer.

    The pause must not hang on the worker's faked clock. When the clock nemesis moved
    a faked monotonic clock back, a loop timer set while the clock was ahead was an
    hour away once it was true again: a client caught in this pause would have slept
    through the rest of the run. The nemesis now only leaps that clock forward
    (nemesis.clock), which leaves no timer stranded; the pause stays independent of
    the faked clocks all the same.
    """
    if seconds > 0:
        await asyncio.to_thread(select.select, [], [], [], seconds)


async def _sleep_unless(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await stop.wait()


async def run(config: WorkerConfig) -> None:
    """Run every client of the worker until SIGTERM (see the module docstring)."""
    recorder = Recorder(Path(config.history))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    # The clock nemesis wakes the loop once its faked clock has moved (nemesis.clock).
    loop.add_signal_handler(signal.SIGUSR1, lambda: None)
    clients = [Client(config, process, recorder) for process in config.labels()]
    tasks = [asyncio.create_task(client.run(stop)) for client in clients]
    recorder.note(f"w{config.index}", "worker-start", mutant=config.mutant)
    try:
        await stop.wait()
        recorder.note(f"w{config.index}", "stop")
        _, pending = await asyncio.wait(tasks, timeout=STOP_GRACE)
        for task in pending:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        recorder.note(f"w{config.index}", "worker-end")
        recorder.close()


def config_main(
    module: str, argv: Sequence[str] | None, start: Callable[[Path], Coroutine[Any, Any, None]]
) -> int:
    """A worker process's entry point: ``python -m MODULE CONFIG.json`` runs
    ``start(CONFIG.json)`` (2: a usage error)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print(f"usage: python -m {module} CONFIG.json", file=sys.stderr)
        return 2
    asyncio.run(start(Path(args[0])))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: ``python -m tools.faults.worker CONFIG.json``."""
    return config_main("tools.faults.worker", argv, lambda path: run(WorkerConfig.read(path)))


if __name__ == "__main__":
    sys.exit(main())
