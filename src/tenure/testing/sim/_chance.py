"""Every source of chance in a run, fixed by its seed (and given back after it).

A simulated run must draw every number from its seed. tenure's code draws from:

* its modules' own generators (:data:`GENERATORS`: a reconnect's jitter, a leader's
  backoff, postgres's pause), each a ``random.Random()`` made at import, seeded from
  the system: reseeded for the run;
* :mod:`secrets` (session keys, claim ids, hand-off secrets) and :func:`os.urandom`
  (instance ids): replaced, for the run, by a generator of its seed;
* its process-wide counters (:data:`COUNTERS`: the client's task numbers), which go on
  from where the process's last run left them: started again for each run;
* the machine: a client tells the server its host name and process id (their bytes
  differ from machine to machine, from process to process): in a run, its simulated
  host's name and a number of its incarnation;
* the wall clock (:func:`time.time`: a cluster member's record, a claim's time): on
  the simulated loop, the process's host's (:meth:`SimLoop.wall_time
  <tenure.testing.sim._loop.SimLoop.wall_time>`).

And the cyclic garbage collector, which runs when allocations pass a count that
depends on everything the process did before: what it finalizes (a transport closing
its socket) would happen at a different step of each run. It is off for the run (and
collects before and after); reference counting frees the rest where the code does.
What lived before the run is frozen for it (``gc.freeze``), so that the collections at
its end walk only what the run made (each full walk of a process that imported
everything took about 35 ms, three a run: a tenth of a short cluster run's CPU), and
tenure's own freezes (a leader's takeover, a standby's load: what keeps a long-lived
state from being walked) do nothing in a run: with the collector off they change
nothing but what the end's collection could free.

:func:`seeded` does all of these, and gives everything back when the run ends. (The
order of a set of strings or bytes also depends on ``PYTHONHASHSEED``, and that of a
set of objects on their addresses: nothing a run's schedule depends on may iterate
one, and ``tests/sim/test_sim_cli.py`` runs a seed under two hash seeds. A step
down's set of connections did: ``Reception.conns`` is an ordered dict since.)
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import importlib
import itertools
import os
import random
import secrets
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any, Final

from tenure.testing.sim._processes import PROCESS

__all__ = ["COUNTERS", "GENERATORS", "seeded"]

#: The modules' own generators: (module, attribute).
GENERATORS: Final = (
    ("tenure.backends._link", "_JITTER"),
    ("tenure.client._leader", "_JITTER"),
    ("tenure.backends.postgres._calls", "_JITTER"),
)

#: The process-wide counters: (module, attribute), each an ``itertools.count(1)``.
COUNTERS: Final = (("tenure.client._caller", "_numbers"),)


def _simulated_identity(real: Callable[[object], Any]) -> Callable[[object], Any]:
    """``identity_of_this_process`` as the simulated process running it would say it."""

    def identity(client_name: object) -> Any:
        found = real(client_name)  # (its checks of the name)
        process = PROCESS.get()
        host = "sim" if process is None else process.name
        pid = 0 if process is None else 1000 + process.incarnation
        return dataclasses.replace(found, host=host, pid=pid)

    return identity


def _simulated_wall(real: Callable[[], float]) -> Callable[[], float]:
    """``time.time`` as the simulated process running it reads it (``real`` outside a
    simulated loop)."""

    def wall() -> float:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # (no loop runs: the harness's own reads)
            return real()
        read: Callable[[], float] | None = getattr(loop, "wall_time", None)
        return real() if read is None else read()

    return wall


def _no_freeze() -> None:
    """``gc.freeze`` in a run (module docstring): nothing."""


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Draw every number of tenure's code from ``seed`` until the block ends."""
    saved: list[tuple[random.Random, Any]] = []
    for number, (module, name) in enumerate(GENERATORS):
        try:
            generator: random.Random = getattr(importlib.import_module(module), name)
        except ImportError:  # (an extra not installed: its module cannot run either)
            continue
        saved.append((generator, generator.getstate()))
        generator.seed(f"{seed}-{number}")
    chance = random.Random(f"{seed}-secrets")
    replaced: dict[tuple[Any, str], Any] = {
        (secrets, "token_bytes"): lambda n=32: chance.randbytes(n),
        (secrets, "token_hex"): lambda n=32: chance.randbytes(n).hex(),
        (secrets, "randbits"): chance.getrandbits,
        (secrets, "randbelow"): lambda n: chance.randrange(n),
        (os, "urandom"): chance.randbytes,
        (time, "time"): _simulated_wall(time.time),
        (gc, "freeze"): _no_freeze,
    }
    for module, name in COUNTERS:
        replaced[(importlib.import_module(module), name)] = itertools.count(1)
    listing = importlib.import_module("tenure.client._listing")
    replaced[(listing, "identity_of_this_process")] = _simulated_identity(
        listing.identity_of_this_process
    )
    originals = {place: getattr(*place) for place in replaced}
    collecting = gc.isenabled()
    gc.collect()
    gc.freeze()  # (module docstring: the run's collections walk only what it made)
    gc.disable()
    try:
        for (owner, name), value in replaced.items():
            setattr(owner, name, value)
        yield
    finally:
        for (owner, name), value in originals.items():
            setattr(owner, name, value)
        for generator, state in saved:
            generator.setstate(state)
        with warnings.catch_warnings():  # (a crashed process's coroutines: not a bug)
            warnings.filterwarnings("ignore", r"coroutine .* was never awaited", RuntimeWarning)
            gc.collect()
            gc.unfreeze()  # (what lived before the run, its own again)
        if collecting:
            gc.enable()
