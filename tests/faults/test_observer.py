"""The fault suite's observer: one process of the history, one operation at a time.

The harness asks for a last read of the registers while the observer's own loop may
still be reading them; both record as the one process ``observer``, which lincheck
requires to be sequential (a CI run once failed on a history where it was not).
"""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

import tenure
from tests.server.wire import ServerProcess
from tools.faults.history import Recorder, load
from tools.faults.observer import OBSERVER, Observer


async def test_a_last_read_while_the_loop_reads_keeps_the_observer_sequential(
    tmp_path: Path, tenure_server: ServerProcess
) -> None:
    url = f"tenure://127.0.0.1:{tenure_server.port}"
    registers = [f"reg-w{i}c0" for i in range(4)]
    async with await tenure.connect(url) as client:
        await client.create_node("faults")
        session = await client.session("faults")
        for number, name in enumerate(registers):
            await session.semaphore(name).create(limit=1, data=str(number).encode())
        rec = Recorder(tmp_path / "observer.jsonl")
        observer = Observer(url, "faults", [], registers, rec, interval=0.0, reads_every=1)
        stop = asyncio.Event()
        loop = asyncio.create_task(observer.run(stop))
        # Asked for while the loop reads: each must wait its turn, not interleave.
        await asyncio.gather(*(observer.read_registers() for _ in range(5)))
        stop.set()
        await loop
        rec.close()
    reads = [op for op in load([tmp_path / "observer.jsonl"]).ops if op.process == OBSERVER]
    assert len(reads) >= 5 * len(registers)
    assert {op.value for op in reads} == {0, 1, 2, 3}
    for earlier, later in itertools.pairwise(reads):
        assert earlier.t1 is not None
        assert earlier.t1 <= later.t0, (earlier, later)
