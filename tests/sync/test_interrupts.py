"""A Ctrl-C anywhere in a blocking call: raised, the call withdrawn, the portal alive.

Python raises a KeyboardInterrupt where the main thread next looks for a pending
signal, which is not always inside the blocking wait: on a loaded machine the loop
may queue a lock request, and a watcher send SIGINT, while the calling thread has not
yet reached its wait (tests/sync/test_mutex.py's interrupt test, which hung in CI).
Here a trace function raises KeyboardInterrupt at the n-th such place the calling
thread passes in the call, for every n until the call ends without one, and each
time the request must be withdrawn and the portal must still answer.
"""

from __future__ import annotations

import _thread
import dis
import inspect
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

import pytest

import tenure.sync
from tenure.testing import FakeClock

from .conftest import advance, wait_for_waiters

Tracer = Callable[[FrameType, str, Any], Any]


# Where CPython 3.11 looks for a pending signal (its "eval breaker"): on entering a
# function, after a call (CALL, CALL_FUNCTION_EX) and after a backward jump. Only
# there can a KeyboardInterrupt appear, e.g. not between a ``with`` taking its lock
# and the block's start (a tracer could raise there, a signal cannot).
_CHECKED_AFTER = frozenset({"CALL", "CALL_FUNCTION_EX", "JUMP_BACKWARD"})
_RESUMABLE = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


def interrupt_at(
    point: int, action: Callable[[], object], steps: list[int]
) -> tuple[bool, BaseException | None]:
    """Run ``action``, raising KeyboardInterrupt at its ``point``-th place where a signal can.

    Counts the places in every frame the calling thread runs (the library's and the
    standard library's alike), and every bytecode in ``steps[0]``. Returns whether it
    was raised, and what ``action`` raised.
    """
    seen = 0
    fired = False
    last: dict[FrameType, str] = {}

    def place() -> None:
        nonlocal seen, fired
        if seen == point:
            fired = True
            last.clear()
            raise KeyboardInterrupt  # (a trace function that raises is removed)
        seen += 1

    def per_opcode(frame: FrameType, event: str, arg: Any) -> Tracer | None:
        if event != "opcode" or fired:
            return per_opcode
        steps[0] += 1
        if last.get(frame) in _CHECKED_AFTER:
            place()
        last[frame] = dis.opname[frame.f_code.co_code[frame.f_lasti]]
        return per_opcode

    def per_call(frame: FrameType, event: str, arg: Any) -> Tracer | None:
        if fired:
            return None
        frame.f_trace_opcodes = True
        frame.f_trace_lines = False
        if not frame.f_code.co_flags & _RESUMABLE:  # (a generator's resumption is not)
            place()
        return per_opcode

    sys.settrace(per_call)
    try:
        action()
    except BaseException as error:
        return fired, error
    finally:
        sys.settrace(None)
        last.clear()
    return fired, None


def withdrawn_and_answering(mutex: tenure.sync.Mutex) -> str | None:
    """None once ``mutex`` has no waiters; else what is wrong, within 10 s."""
    problem: list[str] = ["the portal did not answer within 10 s (wedged)"]

    def check() -> None:
        deadline = time.monotonic() + 5
        while mutex.describe().waiters:
            if time.monotonic() > deadline:
                problem[0] = "the interrupted request was never withdrawn"
                return
            time.sleep(0.001)
        problem.clear()

    # In a thread of its own: a wedged portal must fail the test, not hang it.
    thread = threading.Thread(target=check, daemon=True)
    thread.start()
    thread.join(10)
    return problem[0] if problem else None


def test_an_interrupt_anywhere_in_a_blocked_lock_withdraws_it(
    client: tenure.sync.Client,
    clock: FakeClock,
    session: tenure.sync.Session,
    other: tenure.sync.Session,
) -> None:
    held = session.mutex("job").lock()
    mutex = other.mutex("job")
    point = 0
    while True:
        # The fake clock stands still, so an interrupted request is still queued unless
        # it was withdrawn. Not interrupted before its wait, the call blocks: then the
        # clock is moved past its timeout, and the walk goes on after the wait.
        left = threading.Event()
        steps = [0]

        def end_the_wait(left: threading.Event = left, steps: list[int] = steps) -> None:
            before = -1
            while not left.wait(0.05):
                if steps[0] == before:  # no bytecode ran for 50 ms: the call waits
                    advance(client, clock, 10)
                    return
                before = steps[0]

        timer = threading.Thread(target=end_the_wait)
        timer.start()
        try:
            fired, error = interrupt_at(point, lambda: mutex.lock(timeout=5), steps)
        finally:
            left.set()
            timer.join()
        expected = KeyboardInterrupt if fired else TimeoutError
        assert isinstance(error, expected), f"interrupted at place {point}: {error!r}"
        problem = withdrawn_and_answering(session.mutex("job"))
        assert problem is None, f"interrupted at place {point}: {problem}"
        if not fired:
            break
        point += 1
    assert point > 10  # it did walk the call
    held.release()
    assert other.mutex("job").try_lock() is not None


@pytest.mark.timeout(30)
def test_a_ctrl_c_that_came_before_the_wait_blocked_is_not_lost(
    session: tenure.sync.Session, other: tenure.sync.Session
) -> None:
    # _thread.interrupt_main() trips SIGINT's flag and sends no signal, so it wakes no
    # blocked wait: as a real SIGINT does not that lands after the main thread's last
    # look for signals and before its wait blocks (CPython runs the handler only when
    # the wait returns). The fake clock stands still: nothing but the interrupt can end
    # this wait, which the portal's main-thread wait looks past every SIGNAL_LOOK.
    held = session.mutex("job").lock()

    def interrupt_once_queued() -> None:
        wait_for_waiters(session, "job", 1)
        _thread.interrupt_main()

    thread = threading.Thread(target=interrupt_once_queued)
    thread.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            other.mutex("job").lock()
    finally:
        thread.join(10)
    problem = withdrawn_and_answering(session.mutex("job"))
    assert problem is None, problem
    held.release()
    assert other.mutex("job").try_lock() is not None
