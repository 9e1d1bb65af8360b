"""Every source of chance in a run, fixed by its seed (and given back after it).

A simulated run must draw every number from its seed. tenure's code draws from:

* its modules' own generators (:data:`GENERATORS`: a reconnect's jitter, a leader's
  backoff, postgres's pause), each a ``random.Random()`` made at import, seeded from
  the system: reseeded for the run;
* :mod:`secrets` (session keys, claim ids, hand-off secrets) and :func:`os.urandom`
  (instance ids): replaced, for the run, by a generator of its seed;
* its process-wide counters (:data:`COUNTERS`: the client's task numbers), which go on
  from where the process's last run left them: started again for each run.

And the cyclic garbage collector, which runs when allocations pass a count that
depends on everything the process did before: what it finalizes (a transport closing
its socket) would happen at a different step of each run. It is off for the run (and
collects before and after); reference counting frees the rest where the code does.

:func:`seeded` does all three, and gives everything back when the run ends. (The
order of a set of strings or bytes also depends on ``PYTHONHASHSEED``: the command
line fixes it, :mod:`tenure.testing.sim._cli`.)
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import itertools
import os
import random
import secrets
from collections.abc import Iterator
from typing import Any, Final

__all__ = ["COUNTERS", "GENERATORS", "seeded"]

#: The modules' own generators: (module, attribute).
GENERATORS: Final = (
    ("tenure.backends._link", "_JITTER"),
    ("tenure.client._leader", "_JITTER"),
    ("tenure.backends.postgres._calls", "_JITTER"),
)

#: The process-wide counters: (module, attribute), each an ``itertools.count(1)``.
COUNTERS: Final = (("tenure.client._caller", "_numbers"),)


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
    }
    for module, name in COUNTERS:
        replaced[(importlib.import_module(module), name)] = itertools.count(1)
    originals = {place: getattr(*place) for place in replaced}
    collecting = gc.isenabled()
    gc.collect()
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
        if collecting:
            gc.enable()
        gc.collect()
