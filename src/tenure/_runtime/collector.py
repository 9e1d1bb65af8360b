"""The cyclic garbage collector, paused while a step's short-lived objects are alive.

One change that a fleet watches makes a watch firing per watcher (and the server's
routing a pair per firing): 100,000 objects at once, alive until each is encoded
for its connection, a turn's room in the step and the rest over the next turns
(:mod:`tenure.server._net.later`). Collected meanwhile, they are walked by each
young collection, promoted, and then cost full collections of the whole state: in
one process, the engine's firing of 100,000 watches and their routing took about
400 ms with the collector running and 155 ms without, and a full
collection between two slices of the fan-out kept the loop as long as the step
had. They make no cycle: reference counting frees each once it is encoded, and
the collector's next run, after the pause, finds only what is left.

:func:`pause` and :func:`resume` nest (the host pauses while it routes a step's many
effects; the server's routing for as long as a fan-out's pushes wait): the
collector runs again when the last pause ends, if it ran before the first. gc's
state is the process's, and so is this count.

**Freezing what a long full collection left.** A full collection walks every object
the collector tracks (two a held mutex, a few dozen a connection) and runs each time
the long-lived ones have grown by a quarter, so while the state grows its pauses
grow with it: 0.56 s while a million holds were taken (docs/scale.md). After
:func:`freeze_after` ``(seconds)``, a full collection that took ``seconds`` or longer
moves what it left alive to the permanent generation (``gc.freeze``): the next ones
walk only what came after it, so their pauses stay near ``seconds`` however large
the state. What is frozen is still freed by reference counting when it dies; only
an object that dies in a reference cycle after it was frozen would never be freed.
The server's own paths leave no cycle (``tests/server/test_gc_cycles.py`` churns
them and counts what the collector finds); gRPC's calls (the YDB face) make a few
objects of cycle each, which young collections free unless a freeze comes while
the call is in flight. A freeze comes only after a long walk, so after the unfrozen
objects grew by tens of thousands: what can be kept is bounded by the state's
growth, not by the traffic.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Final

__all__ = [
    "DEFAULT_FREEZE_AFTER",
    "freeze_after",
    "freezes",
    "frozen",
    "pause",
    "paused",
    "resume",
]

#: ``--gc-freeze-after``'s default, in seconds: about 50,000 objects' walk here.
DEFAULT_FREEZE_AFTER: Final = 0.02

_pauses = 0
_was_enabled = False


def pause() -> None:
    """Stop the cyclic collector until as many :func:`resume` calls as pauses."""
    global _pauses, _was_enabled
    if _pauses == 0:
        _was_enabled = gc.isenabled()
        gc.disable()
    _pauses += 1


def resume() -> None:
    """End one :func:`pause`; the last one lets the collector run again (if it ran
    before the first)."""
    global _pauses
    if _pauses <= 0:
        raise RuntimeError("the collector was not paused")
    _pauses -= 1
    if _pauses == 0 and _was_enabled:
        gc.enable()


def paused() -> int:
    """How many pauses are in force (0: none)."""
    return _pauses


_freeze_after = 0.0
_clock: Callable[[], float] = time.perf_counter
_started: float | None = None
_freezes = 0


def freeze_after(seconds: float, clock: Callable[[], float] = time.perf_counter) -> None:
    """From now on, freeze what a full collection of ``seconds`` or longer (by
    ``clock``) left alive; 0: never (as before the first call). See the module."""
    global _freeze_after, _clock, _started
    if seconds < 0:
        raise ValueError(f"freeze_after takes seconds >= 0, not {seconds}")
    _freeze_after, _clock, _started = seconds, clock, None
    if _on_collection in gc.callbacks:
        gc.callbacks.remove(_on_collection)
    if seconds > 0:
        gc.callbacks.append(_on_collection)


def freezes() -> int:
    """How many full collections froze what they left (since the process started)."""
    return _freezes


def frozen() -> int:
    """How many objects are frozen now (the recovered state's included)."""
    return gc.get_freeze_count()


def _on_collection(phase: str, info: dict[str, int]) -> None:
    """gc's callback: times each full collection; a long one freezes what it left."""
    global _started, _freezes
    if info["generation"] != 2:
        return  # (a young collection: two calls that cost well under a microsecond)
    if phase == "start":
        _started = _clock()
    elif _started is not None:
        took, _started = _clock() - _started, None
        if took >= _freeze_after:
            gc.freeze()  # (the collection is over: its lists are whole again)
            _freezes += 1
