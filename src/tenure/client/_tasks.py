"""The numbers the client gives the tasks that ask for semaphores (deadlock detection).

A store that detects deadlocks (``Capability.DEADLOCK_DETECTION``) must know which
waiter and which hold belong to the same *task*: a session is shared by many tasks,
and one task of it may hold ``a`` while another waits for ``b`` without any
deadlock. So every acquire carries the number of the asyncio task that asks, and the
store keeps it with the hold the acquire becomes.

Numbers come from one counter of this process, starting at 1, and are never given
twice: a number that passed to a new task while a hold of the old one lives on
(a lease handed to another task) would make the store mistake one task for
another. In the sync face, the asking task is the calling *thread*: each call runs
in a task of the portal's loop, which :func:`adopt` gives the thread's number
(:func:`thread_number`), so that a thread's calls, one task each, are one task to
the store.

The number is kept in a context variable with the task it belongs to (a weak
reference: no cycle through the task's own context): one lookup on the mutex's hot
path. A task started by another inherits its context, sees a mark that is not its
own, and takes a number of its own.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import weakref
from contextvars import ContextVar
from typing import Any, Final

__all__ = ["adopt", "task_number", "thread_number"]

#: The next number (thread-safe: a C iterator, advanced under the GIL).
_numbers: Final = itertools.count(1)

#: The current task's mark: the task (weakly) and its number.
_mark: ContextVar[tuple[weakref.ref[asyncio.Task[Any]], int]] = ContextVar("tenure_task")

#: Each thread's number, made on first use.
_threads: Final = threading.local()


def task_number(task: asyncio.Task[Any] | None) -> int:
    """The number of ``task``, the current task (made on first use; 0 outside a task).

    Call it from within ``task``: the number is kept in its context.
    """
    if task is None:
        return 0
    mark = _mark.get(None)
    if mark is not None and mark[0]() is task:
        return mark[1]
    number = next(_numbers)
    _mark.set((weakref.ref(task), number))
    return number


def thread_number() -> int:
    """The number of the calling thread (made on first use), for the sync face."""
    number: int | None = getattr(_threads, "number", None)
    if number is None:
        number = _threads.number = next(_numbers)
    return number


def adopt(task: asyncio.Task[Any], number: int) -> None:
    """Make ``number`` the number of ``task``: call it in ``task``'s context
    (``context.run(adopt, task, number)``) before the task first runs."""
    _mark.set((weakref.ref(task), number))
