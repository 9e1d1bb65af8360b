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
"""

from __future__ import annotations

import gc

__all__ = ["pause", "paused", "resume"]

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
