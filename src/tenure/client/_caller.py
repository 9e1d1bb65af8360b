"""Who asks: the asyncio task, or, for the sync face, the thread a call runs for.

A session refuses a caller that asks again for a semaphore it holds (it would wait
behind itself), and a reentrant mutex lets its holder nest: both need to know who
the caller is. In asyncio code that is the current task. The sync face runs each
blocking call as a task of its own on the portal's loop, so there the caller is the
thread that made the call: :func:`start_for_thread` starts that task marked as
acting for its thread, and :func:`current_caller` reads the mark.

The mark holds the task it was made for, so the tasks that task starts (which copy
its context) are callers of their own, as any child task is. A call that its thread
withdrew (:func:`withdraw`: the thread was interrupted and left without the outcome)
acts for nobody but itself from then on, while it winds down on the loop.

**Numbers.** A store that detects deadlocks (``Capability.DEADLOCK_DETECTION``) must
know which waiter and which hold belong to the same caller: a session is shared by
many tasks, and one of them may hold ``a`` while another waits for ``b`` without any
deadlock. So every acquire carries its caller's number (:func:`caller_number`), and
the store keeps it with the hold the acquire becomes. Numbers come from one counter
of this process, starting at 1, and are never given twice: a number passed on to a
new caller while a hold of the old one lives on (a lease handed to another task)
would make the store mistake one caller for another. A thread keeps its number on
its :class:`ThreadCaller`, so that a thread's calls, one task each, are one caller to
the store; a task keeps its number in a context variable with the task it belongs to
(a weak reference: no cycle through the task's own context), one lookup on the
mutex's hot path. A task started by another inherits its context, sees a mark that
is not its own, and takes a number of its own.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import threading
import weakref
from collections.abc import Coroutine
from typing import Any, Final, TypeAlias, TypeVar

T = TypeVar("T")

#: The next caller number (thread-safe: a C iterator, advanced under the GIL).
_numbers: Final = itertools.count(1)


class ThreadCaller:
    """A thread of the sync face, as a caller: one object per thread (:func:`this_thread`).

    An object, not the thread's ident: Python recycles the ident of a thread that
    has ended, and a new thread must not inherit what an ended one left held.
    """

    __slots__ = ("ident", "number")

    def __init__(self) -> None:
        #: The thread's ``threading.get_ident()`` (for reprs).
        self.ident = threading.get_ident()
        #: The thread's number, as a store that detects deadlocks knows it.
        self.number = next(_numbers)

    def __repr__(self) -> str:
        return f"<thread {self.ident}>"


#: A caller: the task that asks (None outside any task), or the sync face's thread.
Caller: TypeAlias = "asyncio.Task[Any] | ThreadCaller | None"

#: Set by the sync face in the context of each call's task: (the calling thread, that task).
_ACTING_FOR: contextvars.ContextVar[tuple[ThreadCaller, asyncio.Task[Any]] | None] = (
    contextvars.ContextVar("tenure_acting_for", default=None)
)

#: The current task's number mark: the task (weakly) and its number.
_MARK: contextvars.ContextVar[tuple[weakref.ref[asyncio.Task[Any]], int]] = contextvars.ContextVar(
    "tenure_task_number"
)

#: Sync calls' tasks that their thread withdrew (see :func:`withdraw`).
_WITHDRAWN: weakref.WeakSet[asyncio.Task[Any]] = weakref.WeakSet()

_threads = threading.local()


def this_thread() -> ThreadCaller:
    """The calling thread, as a caller (the same object for every call it makes)."""
    caller: ThreadCaller | None = getattr(_threads, "caller", None)
    if caller is None:
        caller = _threads.caller = ThreadCaller()
    return caller


def current_caller(task: asyncio.Task[Any] | None) -> Caller:
    """The caller running ``task`` (the current task): its thread if the sync face started
    it for one, else the task itself."""
    acting = _ACTING_FOR.get()
    if acting is not None and acting[1] is task and task not in _WITHDRAWN:
        return acting[0]
    return task


def task_number(task: asyncio.Task[Any] | None) -> int:
    """The number of ``task``, the current task (made on first use; 0 outside a task).

    Call it from within ``task``: the number is kept in its context.
    """
    if task is None:
        return 0
    mark = _MARK.get(None)
    if mark is not None and mark[0]() is task:
        return mark[1]
    number = next(_numbers)
    _MARK.set((weakref.ref(task), number))
    return number


def caller_number(caller: Caller) -> int:
    """The number of ``caller``, the current caller, as a store that detects deadlocks
    knows it (0: not known, outside any task)."""
    if isinstance(caller, ThreadCaller):
        return caller.number
    if caller is None:  # (task_number's, inline: one call per acquire, not two)
        return 0
    mark = _MARK.get(None)
    if mark is not None and mark[0]() is caller:
        return mark[1]
    return task_number(caller)


def withdraw(task: asyncio.Task[Any]) -> None:
    """The thread that a sync call's ``task`` acts for left without its outcome (it was
    interrupted): the task, cancelled, acts for nobody but itself from now on, so what
    it still holds or asks for while it winds down is not the thread's (:func:`withdrawn`)."""
    _WITHDRAWN.add(task)


def withdrawn(task: asyncio.Task[Any]) -> bool:
    """Whether ``task`` is a sync call that its thread withdrew (:func:`withdraw`)."""
    return task in _WITHDRAWN


def named(caller: Caller) -> str:
    """How an error names the caller: "this task" or "this thread"."""
    return "this thread" if isinstance(caller, ThreadCaller) else "this task"


def start_for_thread(
    loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T], thread: ThreadCaller
) -> asyncio.Task[T]:
    """Run ``coro`` as a task of ``loop`` that acts for ``thread`` (a sync call's task).

    Call it on the loop's thread: the task is marked before its first step runs.
    """
    context = contextvars.copy_context()
    task = loop.create_task(coro, context=context)
    context.run(_ACTING_FOR.set, (thread, task))
    return task
