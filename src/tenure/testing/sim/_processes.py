"""Simulated processes in one event loop: each can pause (SIGSTOP, a GC pause) and crash.

A :class:`SimProcess` is a name (its host on the network) and an incarnation: a
restarted server is a new process of the same host. Everything a process runs carries
it in a context variable (:data:`PROCESS`): :meth:`ProcessTable.spawn` starts a task in
a context where it is set, and asyncio copies a task's context into every callback,
timer and task made from it, so the loop can tell whose a ready callback is.

* **Pause**: the loop's ready queue (:class:`HeldReady`) holds back the callbacks of a
  paused process, in order, and the selector does not report its sockets: its timers
  fire late, what reaches it waits in its sockets, as in a stopped process. Resuming
  puts what was held back in the queue, in order.
* **Crash**: its callbacks are dropped from then on, and its host's connections are
  reset (the network's :meth:`~tenure.testing.sim._network.SimNetwork.crash`): its tasks
  never run again and no ``finally`` of theirs runs, as a ``kill -9`` would leave them.
  A new incarnation of the host starts from what its disk kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import gc
import itertools
import warnings
import weakref
from collections import deque
from collections.abc import Coroutine, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = ["PROCESS", "HeldReady", "ProcessTable", "SimProcess"]

T = TypeVar("T")


@dataclass(frozen=True, eq=False)
class SimProcess:
    """One incarnation of a process on host ``name`` (module docstring). One object per
    incarnation (:meth:`ProcessTable.new`): it is its own identity, hashed as an object
    (every ready callback asks whether its process is paused or crashed)."""

    name: str
    incarnation: int

    def __str__(self) -> str:
        return f"{self.name}#{self.incarnation}"


#: The process whose code is running (None: the simulation's own, never paused).
PROCESS: contextvars.ContextVar[SimProcess | None] = contextvars.ContextVar(
    "tenure_sim_process", default=None
)


def process_of(handle: asyncio.Handle) -> SimProcess | None:
    """The process a ready callback belongs to (its context's :data:`PROCESS`)."""
    context = getattr(handle, "_context", None)
    return None if context is None else context.get(PROCESS)


class ProcessTable:
    """Which processes run, are paused or crashed (module docstring)."""

    def __init__(self) -> None:
        self._incarnations: dict[str, int] = {}
        self.paused: set[SimProcess] = set()
        self.crashed: set[SimProcess] = set()
        self.held: dict[SimProcess, list[asyncio.Handle]] = {}
        #: Each host's running incarnation.
        self.current: dict[str, SimProcess] = {}
        #: What crashed processes left: the callbacks they would have run and the tasks
        #: buried, kept until the run ends (:meth:`forget_the_dead`) so that nothing of
        #: theirs is collected, and warns, mid-run.
        self.graveyard: list[object] = []
        self._tasks: weakref.WeakKeyDictionary[asyncio.Task[Any], SimProcess] = (
            weakref.WeakKeyDictionary()
        )
        #: Each task's place in the order the run made them (:meth:`in_order`).
        self._born: weakref.WeakKeyDictionary[asyncio.Task[Any], int] = weakref.WeakKeyDictionary()
        self._births = itertools.count()

    def make_task(
        self,
        loop: asyncio.AbstractEventLoop,
        coro: Coroutine[Any, Any, Any],
        context: contextvars.Context | None = None,
    ) -> asyncio.Task[Any]:
        """The loop's task factory: a task, and whose it is (asyncio's C tasks do not
        show their context)."""
        task = asyncio.Task(coro, loop=loop, context=context)
        self._born[task] = next(self._births)
        process = PROCESS.get() if context is None else context.get(PROCESS)
        if process is not None:
            self._tasks[task] = process
        return task

    def new(self, name: str) -> SimProcess:
        """A new incarnation of host ``name`` (the one before, if any, must have crashed)."""
        before = self.current.get(name)
        if before is not None and before not in self.crashed:
            raise RuntimeError(f"{before} is still running")
        number = self._incarnations.get(name, 0) + 1
        self._incarnations[name] = number
        process = SimProcess(name, number)
        self.current[name] = process
        return process

    def spawn(self, process: SimProcess, coro: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        """Run ``coro`` as a task of ``process``: what it starts is the process's too."""
        context = contextvars.copy_context()
        context.run(PROCESS.set, process)
        return asyncio.get_running_loop().create_task(coro, context=context)

    def runs(self, host: str) -> bool:
        """Whether ``host``'s sockets may be served now (not paused; a crashed host's
        sockets were reset)."""
        process = self.current.get(host)
        return process is None or process not in self.paused

    def pause(self, process: SimProcess) -> None:
        """Hold back everything of ``process`` until :meth:`resume`."""
        if process not in self.crashed:
            self.paused.add(process)

    def resume(self, process: SimProcess, ready: deque[asyncio.Handle]) -> None:
        """Let ``process`` run again: what was held back goes to ``ready``, in order."""
        self.paused.discard(process)
        for handle in self.held.pop(process, []):
            if not handle.cancelled():
                ready.append(handle)

    def crash(
        self, process: SimProcess, ready: deque[asyncio.Handle], skipped: asyncio.Handle
    ) -> None:
        """``process`` never runs again (module docstring): what of it is in ``ready``
        (the loop's queue, maybe half run this turn) is put in the graveyard, each in
        its place ``skipped``, a cancelled callback that the loop passes over (the queue
        keeps its length: the loop counted it)."""
        self.crashed.add(process)
        self.paused.discard(process)
        self.graveyard += self.held.pop(process, [])
        for place, handle in enumerate(ready):
            if process_of(handle) is process:
                self.graveyard.append(handle)
                ready[place] = skipped

    def forget_the_dead(self) -> None:
        """Let what crashed processes left be collected (the run is over): a coroutine
        of theirs never awaited is their death's doing, not a bug of the code (the
        warning the collection gives is not shown)."""
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", r"coroutine .* was never awaited", RuntimeWarning)
            self.graveyard.clear()
            gc.collect()

    def in_order(self, tasks: Iterable[asyncio.Task[Any]]) -> list[asyncio.Task[Any]]:
        """``tasks`` in the order the run made them: ``asyncio.all_tasks()`` is a set,
        ordered by the objects' addresses, which a process that ran other seeds first
        lays out otherwise (a run's end went another way in a batch: cluster seed 2354)."""
        return sorted(tasks, key=lambda task: self._born.get(task, -1))

    def of_task(self, task: asyncio.Task[Any]) -> SimProcess | None:
        """The process ``task`` belongs to."""
        return self._tasks.get(task)

    def bury(self, task: asyncio.Task[Any]) -> None:
        """Close the coroutine of a crashed process's ``task`` now: its ``finally``
        blocks run while the loop is open (what they schedule is dropped), not when
        the collector finds it, after the run."""
        coro = task.get_coro()
        # In its process's context: what its finally blocks schedule is dropped (it is
        # dead); what they raise concerns nobody, nor a coroutine they make and cannot
        # await while closing (a kill -9 runs no finally block at all).
        context = contextvars.copy_context()
        context.run(PROCESS.set, self._tasks.get(task))
        with contextlib.suppress(BaseException), warnings.catch_warnings():
            warnings.filterwarnings("ignore", r"coroutine .* was never awaited", RuntimeWarning)
            context.run(coro.close)
        self.graveyard.append(task)  # (its collection's "destroyed pending" is expected)

    def keep(self, handle: asyncio.Handle) -> bool:
        """Whether ``handle`` may go to the ready queue now (else it was held or dropped)."""
        if not (self.paused or self.crashed):
            return True  # (nearly every call: nobody is paused or dead)
        process = process_of(handle)
        if process is None:
            return True
        if process in self.crashed:
            self.graveyard.append(handle)
            return False
        if process in self.paused:
            self.held.setdefault(process, []).append(handle)
            return False
        return True

    def alive(self) -> Iterable[SimProcess]:
        """The running incarnations (paused or not)."""
        return [p for p in self.current.values() if p not in self.crashed]


class HeldReady(deque[asyncio.Handle]):
    """The loop's ready queue, which holds back a paused process's callbacks and drops a
    crashed one's (module docstring): asyncio appends every ready callback here."""

    def __init__(self, table: ProcessTable) -> None:
        super().__init__()
        self.table = table

    def append(self, handle: asyncio.Handle) -> None:
        """Queue ``handle`` unless its process is paused (held) or crashed (dropped)."""
        if self.table.keep(handle):
            super().append(handle)
