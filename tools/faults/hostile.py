"""One hostile phase of the tenant scenario, in a process of its own.

``python -m tools.faults.hostile URL SEED PHASE SECONDS HISTORY HTTP_PORT YDB_PORT``:
the abuses of :mod:`tools.faults.abuses` of its phase at once (:func:`of_phase`: issue
37's in even phases, issue 47's, :mod:`tools.faults.abuses_surfaces`, in odd ones) against
the ``tenure://`` server at
``URL`` (its HTTP endpoint and YDB face on those ports), for
``SECONDS`` (each also bounded by its own count, and undone after), recorded in the
history file ``HISTORY`` (process label ``tenant``): an ``abuse`` note per abuse
(what it got back) and a ``phase`` note (``hostile``, from the abuses' start to their
end). Exits 0 once every abuse has returned.

It runs at :data:`NICE`: on a real deployment the hostile tenant's client runs on a
machine of its own, and here, on two shared cores, its client-side work (encoding and
decoding tens of thousands of requests) would otherwise take the CPU from the honest
clients' processes and be measured as the server's doing. The server's work for it
is untouched (the server runs at the normal priority), and that is what the scenario
judges.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from tenure.errors import TenureError
from tools.faults.abuse_kit import EVIDENCE, Ports
from tools.faults.abuses import ABUSES, Tally, Tenant
from tools.faults.abuses_surfaces import SURFACES
from tools.faults.history import Recorder, now

#: The hostile tenant's process label in the history.
TENANT: Final = "tenant"
#: The niceness the phase's process runs at (module docstring).
NICE: Final = 10


def of_phase(phase: int) -> list[str]:
    """The abuses of hostile phase ``phase``: issue 37's in even phases, issue 47's
    (:data:`~tools.faults.abuses_surfaces.SURFACES`) in odd ones, so a run of two phases
    has each once. All fifteen at once made one phase carry twice the tenant's load of
    either: on two cores shared with three other test workers, the honest p99 of a
    short run's two phases passed the scenario's bound (2 x the quiet one, at least 100
    ms) by its own scheduling (110.8 ms, no probe over 0.5 s, no stall), though a
    3-minute run passed it with a wide margin (40 ms)."""
    odd = phase % 2 == 1
    return [name for name in ABUSES if (name in SURFACES) == odd]


async def run(
    url: str, seed: int, phase: int, seconds: float, recorder: Recorder, ports: Ports
) -> None:
    """The phase's abuses at once until ``seconds`` from now, each noted (module docstring)."""
    tenant = Tenant(url, random.Random(seed), ports)
    start = now()
    deadline = start + seconds

    async def one(name: str) -> None:
        tally = Tally(evidence=EVIDENCE.get(name))
        try:
            await ABUSES[name](tenant, tally, deadline)
        except (TenureError, OSError, TimeoutError) as error:
            # Outside one counted request (its client's connect, say): counted too.
            tally.failed[f"abuse ended: {type(error).__name__}"] += 1
        recorder.note(TENANT, "abuse", abuse=name, phase=phase, **tally.fields())

    await asyncio.gather(*(one(name) for name in of_phase(phase)))
    recorder.note(TENANT, "phase", phase="hostile", start=start, end=now())


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point (module docstring)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 7:
        print(
            "usage: python -m tools.faults.hostile URL SEED PHASE SECONDS HISTORY HTTP_PORT "
            "YDB_PORT",
            file=sys.stderr,
        )
        return 2
    url, seed, phase, seconds, history, http_port, ydb_port = args
    ports = Ports(http=int(http_port), ydb=int(ydb_port))
    os.nice(NICE)
    recorder = Recorder(Path(history))
    try:
        asyncio.run(run(url, int(seed), int(phase), float(seconds), recorder, ports))
    finally:
        recorder.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
