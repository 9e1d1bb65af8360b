"""An asyncio event loop on simulated time, whose network is a :class:`SimNetwork`.

:class:`SimLoop` is asyncio's own selector event loop (its transports, its servers,
its timers: the code under test runs on what it runs on in production, but for the
selector) with two things replaced:

* **time**: :meth:`SimLoop.time` is a number that moves only when the loop has
  nothing ready: :class:`SimSelector`'s ``select(timeout)`` moves it on by
  ``timeout`` (to the next timer) instead of waiting. A simulated hour takes what its
  work takes. A loop with nothing ready, no timer and nothing in flight would wait
  for ever: it raises :class:`SimDeadlockError` instead;
* **the order among ready tasks**: before each round the steps of tasks made ready
  are shuffled among themselves by the seeded generator (the other callbacks keep
  their places and their order: asyncio's transports rely on theirs, e.g. a
  protocol's ``connection_made`` before the waiter of ``create_connection``).

``create_connection`` and ``create_server`` with a host and port, and
``open_connection``/``start_server`` over them, reach the simulated network (a
connection is made from the host of the process that makes it, else the loop's own,
:attr:`SimLoop.host`); ``getaddrinfo`` answers every name with itself. Processes
(:mod:`tenure.testing.sim._processes`) run, pause and crash in the loop:
:attr:`SimLoop.processes`. No thread: ``run_in_executor`` (and so
``asyncio.to_thread``) runs the function at once, on the loop, and
``call_soon_threadsafe`` from another thread is refused.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import heapq
import random
import selectors
import socket
import threading
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any, Final

from tenure.testing.sim._clocks import EPOCH, Clocks, HostClock
from tenure.testing.sim._network import SimNetwork
from tenure.testing.sim._processes import PROCESS, HeldReady, ProcessTable, SimProcess
from tenure.testing.sim._sockets import SimSocket

__all__ = ["LIVELOCK_TURNS", "SimDeadlockError", "SimLivelockError", "SimLoop", "SimSelector"]

#: The loop's clock resolution: timers due within it of now run now.
RESOLUTION: Final = 1e-9
_READ: Final = selectors.EVENT_READ
_WRITE: Final = selectors.EVENT_WRITE


class SimDeadlockError(RuntimeError):
    """The simulated loop has nothing ready, no timer and nothing in flight."""


class SimLivelockError(RuntimeError):
    """The simulated loop turned :data:`LIVELOCK_TURNS` times at one instant: something
    re-arms itself for now for ever (on real time, it would spin until the clock moved)."""


#: Turns of the loop at one simulated instant that make a livelock.
LIVELOCK_TURNS: Final = 200_000


class SimSelector(selectors.BaseSelector):
    """The selector of a :class:`SimLoop`: readiness of simulated sockets, and time."""

    def __init__(self, processes: ProcessTable) -> None:
        self.processes = processes
        self._keys: dict[int, selectors.SelectorKey] = {}
        # The numbers to look at: those touched (registered, or their socket's state
        # changed) and those found ready the last time (readiness is level-triggered).
        self._watch: set[int] = set()
        #: The simulated sockets by number (the network's): the loop registers numbers.
        self.sockets: dict[int, SimSocket] = {}
        self.now = 0.0
        #: How many selects moved time on (each a wait a real selector would have made).
        self.waits = 0

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        """Watch ``fileobj`` (a number, or what has ``fileno()``) for ``events``."""
        fd = fileobj if isinstance(fileobj, int) else fileobj.fileno()
        if fd in self._keys:
            raise KeyError(f"{fileobj!r} is already registered")
        key = selectors.SelectorKey(fileobj, fd, events, data)
        self._keys[fd] = key
        self._watch.add(fd)
        return key

    def touch(self, fd: int) -> None:
        """Look at ``fd`` at the next select (its socket's state may have changed)."""
        self._watch.add(fd)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        """Stop watching ``fileobj``."""
        fd = fileobj if isinstance(fileobj, int) else fileobj.fileno()
        return self._keys.pop(fd)

    def get_map(self) -> dict[int, selectors.SelectorKey]:  # type: ignore[override]
        """What is watched, by number."""
        return self._keys

    def get_key(self, fileobj: Any) -> selectors.SelectorKey:
        """How ``fileobj`` is watched (``KeyError``: it is not)."""
        fd = fileobj if isinstance(fileobj, int) else fileobj.fileno()
        try:
            return self._keys[fd]
        except KeyError:
            raise KeyError(f"{fileobj!r} is not registered") from None

    def ready(self) -> list[tuple[selectors.SelectorKey, int]]:
        """The keys whose simulated socket is ready for what they wait for."""
        found: list[tuple[selectors.SelectorKey, int]] = []
        watch = self._watch
        if not watch:
            return found
        keys, sockets, runs = self._keys, self.sockets, self.processes.runs
        for fd in sorted(watch) if len(watch) > 1 else list(watch):
            key = keys.get(fd)
            sock = sockets.get(fd)
            if key is None or sock is None:
                watch.discard(fd)  # (the loop's self-pipe: nothing writes to it)
                continue
            if not runs(sock.local[0]):
                continue  # its process is paused: what arrived waits in the socket
            events = 0
            if key.events & _READ and sock.readable():
                events |= _READ
            if key.events & _WRITE and sock.writable():
                events |= _WRITE
            if events:
                found.append((key, events))
            else:
                watch.discard(fd)
        return found

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        """What is ready now; if nothing, the clock moves on by ``timeout`` (to the
        loop's next timer) and what is ready then (module docstring)."""
        found = self.ready()
        if found or timeout == 0:
            return found
        if timeout is None:
            raise SimDeadlockError("nothing is ready, no timer is set and nothing is in flight")
        self.now += timeout
        self.waits += 1
        return self.ready()

    def close(self) -> None:
        """Watch nothing more."""
        self._keys.clear()


class SimLoop(asyncio.SelectorEventLoop):
    """The simulated loop (module docstring): ``seed`` decides the order among ready
    tasks and the network's jitter; ``host`` names the loop's own host."""

    def __init__(
        self, seed: int, *, host: str = "client", network: SimNetwork | None = None
    ) -> None:
        #: Its processes: which run, are paused or crashed.
        self.processes = ProcessTable()
        #: Its selector: readiness and the simulated clock (``waits``: how often the
        #: clock moved on instead of the loop waiting).
        self.selector = SimSelector(self.processes)
        super().__init__(self.selector)
        self._ready: deque[asyncio.Handle] = HeldReady(self.processes)
        self.set_task_factory(self.processes.make_task)  # type: ignore[arg-type]
        self._instant = (-1.0, 0)  # the time of the last turn, and turns at it
        #: The hosts' clocks (:mod:`._clocks`), and the timers set on one: (host, when).
        self.clocks = Clocks()
        self._local_timers: weakref.WeakKeyDictionary[
            asyncio.TimerHandle, tuple[str | None, float]
        ] = weakref.WeakKeyDictionary()
        self._clock_resolution = RESOLUTION
        self.seed = seed
        self.rng = random.Random(seed)
        self.host = host
        self.network = network or SimNetwork(self, random.Random(f"{seed}-network"))
        self.selector.sockets = self.network.sockets
        self.network.on_touch = self.selector.touch
        self._thread_of_loop = threading.get_ident()

    def now(self) -> float:
        """Simulated seconds since the loop was made (what the network, the histories
        and the nemesis go by)."""
        return self.selector.now

    def time(self) -> float:
        """The clock of the process running now (its host's: :mod:`._clocks`), else
        :meth:`now`."""
        process = PROCESS.get()
        if process is None or not self.clocks.clocks:  # (a clock of its own is rare)
            return self.selector.now
        clock = self.clocks.of(process.name)
        return self.selector.now if clock is None else clock.local(self.selector.now)

    def wall_time(self) -> float:
        """The UNIX time of the process running now: :data:`~._clocks.EPOCH` plus its
        host's clock (what ``time.time()`` reads in a run: :mod:`._chance`)."""
        return EPOCH + self.time()

    # -- timers on a host's clock ---------------------------------------------------------

    def _clock_of(self, context: Any) -> tuple[str | None, HostClock | None]:
        """The host whose clock a timer of ``context`` (None: the current one) runs on."""
        if not self.clocks.clocks:
            return None, None  # (no host has a clock of its own yet: most of a run)
        process = PROCESS.get() if context is None else context.get(PROCESS)
        host = None if process is None else process.name
        return host, self.clocks.of(host)

    def call_later(  # type: ignore[override]
        self, delay: float, callback: Callable[..., object], *args: Any, context: Any = None
    ) -> asyncio.TimerHandle:
        """``callback`` once ``delay`` seconds passed on the clock of the process it is
        for (``context``'s, else the current one's)."""
        _, clock = self._clock_of(context)
        now = self.selector.now if clock is None else clock.local(self.selector.now)
        return self.call_at(now + delay, callback, *args, context=context)

    def call_at(  # type: ignore[override]
        self, when: float, callback: Callable[..., object], *args: Any, context: Any = None
    ) -> asyncio.TimerHandle:
        """``callback`` once the clock of the process it is for reads ``when``."""
        host, clock = self._clock_of(context)
        if clock is None:
            return super().call_at(when, callback, *args, context=context)
        timer = super().call_at(clock.simulated(when), callback, *args, context=context)
        self._local_timers[timer] = (host, when)
        return timer

    def jump_clock(self, host: str, seconds: float) -> None:
        """``host``'s clock jumps ``seconds`` forward: its timers fire by its new time."""
        self.clocks.jump(host, seconds, self.selector.now)
        self._rearm(host)

    def drift_clock(self, host: str, rate: float) -> None:
        """``host``'s clock runs at ``rate`` from now on."""
        self.clocks.drift(host, rate, self.selector.now)
        self._rearm(host)

    def _rearm(self, host: str) -> None:
        clock = self.clocks.of(host)
        assert clock is not None
        scheduled: list[asyncio.TimerHandle] = self._scheduled  # type: ignore[attr-defined]
        for timer in scheduled:
            found = self._local_timers.get(timer)
            if found is None and _host_of(timer) == host:  # (armed before its clock moved)
                found = self._local_timers[timer] = (host, timer.when())
            if found is not None and found[0] == host:
                # (asyncio's own field: the timer is the object its owner may cancel)
                timer._when = clock.simulated(found[1])  # type: ignore[attr-defined]
        heapq.heapify(scheduled)

    def _host(self) -> str:
        """The host of the process running now (the loop's own outside any)."""
        process = PROCESS.get()
        return self.host if process is None else process.name

    # -- processes ------------------------------------------------------------------------

    def pause(self, host: str) -> None:
        """Stop ``host``'s running process until :meth:`resume` (a SIGSTOP, a GC pause)."""
        self.processes.pause(self.processes.current[host])

    def resume(self, host: str) -> None:
        """Let ``host``'s process run again: what it missed runs now, in order."""
        self.processes.resume(self.processes.current[host], self._ready)
        for fd, sock in self.network.sockets.items():
            if sock.local[0] == host:
                self.selector.touch(fd)

    def crash(self, host: str) -> None:
        """Kill ``host``'s process: it never runs again, its connections are reset."""
        self._crash(self.processes.current[host])
        self.network.crash(host)
        self._drop_transports(host)

    def crash_all(self) -> None:
        """Kill every process (a run that cannot go on: what spun stops with them)."""
        for process in list(self.processes.alive()):
            self._crash(process)

    def _crash(self, process: SimProcess) -> None:
        skipped = asyncio.Handle(_nothing, (), self)
        skipped.cancel()  # (in the place of each of its callbacks already queued)
        self.processes.crash(process, self._ready, skipped)

    def _drop_transports(self, host: str) -> None:
        """Forget the transports of ``host``'s sockets as a dead process's kernel does:
        no reader or writer left, nothing to close when they are collected (their
        sockets were closed by the crash)."""
        transports: Any = self._transports  # type: ignore[attr-defined]
        for fd, transport in list(transports.items()):
            sock = getattr(transport, "_sock", None)
            if isinstance(sock, SimSocket) and sock.local[0] == host:
                self._remove_reader(fd)  # type: ignore[attr-defined]
                self._remove_writer(fd)  # type: ignore[attr-defined]
                # (asyncio's own: what its collection, and its stream writer's, would
                # close, or warn of, after the run; and a write from a finally block of
                # the dead, closed by the run's end, is dropped as after a lost
                # connection, not a write to no socket at all: an error of nobody's)
                transport._sock = None
                transport._closing = True
                transport._conn_lost = 1
                transports.pop(fd, None)

    # -- the order among ready tasks ------------------------------------------------------

    def _run_once(self) -> None:
        now, turns = self._instant
        self._instant = (now, turns + 1) if now == self.selector.now else (self.selector.now, 1)
        if turns > LIVELOCK_TURNS:
            self._instant = (now, 0)  # (counted again: what follows may end it)
            raise SimLivelockError(f"{turns} turns of the loop at {now:.9f}s")
        self._to_due_timers()
        ready: deque[asyncio.Handle] = self._ready
        if len(ready) > 1:
            places = [i for i, handle in enumerate(ready) if _is_task_step(handle)]
            if len(places) > 1:
                steps = [ready[i] for i in places]
                self.rng.shuffle(steps)
                for i, handle in zip(places, steps, strict=True):
                    ready[i] = handle
        super()._run_once()  # type: ignore[misc]

    def _to_due_timers(self) -> None:
        """Move the clock on to the latest timer this turn runs: asyncio runs those due
        within its clock's resolution of now, early. A real clock moves on meanwhile;
        this one would not, and a callback that finds its time not come re-arms for
        the same instant, for ever (etcd's keepalive writer did, seed 74 of the cluster
        target: its due time some femtoseconds ahead)."""
        scheduled: list[asyncio.TimerHandle] = self._scheduled  # type: ignore[attr-defined]
        bound = self.selector.now + RESOLUTION
        if not scheduled or scheduled[0].when() >= bound:
            return  # (nearly every turn)
        latest, places = self.selector.now, [0]
        while places:  # (the heap's entries under the bound: a subtree at its root)
            place = places.pop()
            if place < len(scheduled) and scheduled[place].when() < bound:
                if not scheduled[place].cancelled():
                    latest = max(latest, scheduled[place].when())
                places += (2 * place + 1, 2 * place + 2)
        self.selector.now = latest

    # -- no threads -------------------------------------------------------------------

    def call_soon_threadsafe(  # type: ignore[override]
        self, callback: Callable[..., object], *args: Any, context: Any = None
    ) -> asyncio.Handle:
        """``call_soon``, from the loop's own thread only (a simulation has no other)."""
        if threading.get_ident() != self._thread_of_loop:
            raise RuntimeError("a simulated loop takes no callback from another thread")
        return self.call_soon(callback, *args, context=context)

    def run_in_executor(  # type: ignore[override]
        self, executor: Any, func: Callable[..., Any], *args: Any
    ) -> asyncio.Future[Any]:
        """``func(*args)`` run now, on the loop: its outcome in a future (no thread)."""
        future: asyncio.Future[Any] = self.create_future()
        try:
            future.set_result(func(*args))
        except BaseException as error:  # (handed to the awaiting task, as an executor does)
            future.set_exception(error)
        return future

    def set_default_executor(self, executor: concurrent.futures.Executor) -> None:
        """Refused: a simulated loop runs functions on itself (:meth:`run_in_executor`)."""
        raise RuntimeError("a simulated loop runs no executor")

    # -- the network ----------------------------------------------------------------------

    async def getaddrinfo(
        self,
        host: Any,
        port: Any,
        *,
        family: int = 0,
        type: int = 0,
        proto: int = 0,
        flags: int = 0,
    ) -> list[tuple[Any, ...]]:
        """Every name is its own address: the network's hosts are names."""
        name = host.decode() if isinstance(host, bytes) else str(host)
        return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (name, int(port)))]

    async def create_connection(  # type: ignore[override]
        self, protocol_factory: Callable[[], asyncio.BaseProtocol], host: str | None = None,
        port: int | None = None, *, sock: Any = None, ssl: Any = None, **kwargs: Any,
    ) -> tuple[asyncio.Transport, asyncio.BaseProtocol]:  # fmt: skip
        if ssl:
            raise NotImplementedError("TLS is not simulated (docs/testing.md)")
        kwargs.pop("server_hostname", None)
        if sock is None:
            if host is None or port is None:
                raise ValueError("host and port, or sock, must be given")
            sock = self.network.connect(self._host(), (host, int(port)))
        return await super().create_connection(protocol_factory, sock=sock, **kwargs)

    async def create_server(
        self, protocol_factory: Callable[[], asyncio.BaseProtocol], host: Any = None,
        port: int | None = None, *, sock: Any = None, ssl: Any = None, **kwargs: Any,
    ) -> asyncio.Server:  # fmt: skip
        if ssl:
            raise NotImplementedError("TLS is not simulated (docs/testing.md)")
        kwargs.pop("reuse_address", None)
        kwargs.pop("reuse_port", None)
        if sock is None:
            sock = self.network.listen(self._host() if host in (None, "") else str(host), port or 0)
        return await super().create_server(protocol_factory, sock=sock, **kwargs)


def _nothing() -> None:
    """What a skipped callback would run (it never does: it is cancelled)."""


def _host_of(handle: asyncio.Handle) -> str | None:
    """The host of the process a callback is for (None: the simulation's own)."""
    context = getattr(handle, "_context", None)
    process = None if context is None else context.get(PROCESS)
    return None if process is None else process.name


def _is_task_step(handle: asyncio.Handle) -> bool:
    """Whether ``handle`` runs a task's next step (a task made ready)."""
    callback = getattr(handle, "_callback", None)
    return isinstance(getattr(callback, "__self__", None), asyncio.Task)
