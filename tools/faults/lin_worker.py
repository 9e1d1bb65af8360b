"""A worker process of the ``linearizable`` scenario: its clients, until told to stop.

``python -m tools.faults.lin_worker CONFIG.json`` (:class:`~tenure.testing.workload.LinConfig`).
The first :attr:`~tenure.testing.workload.LinConfig.watchers` clients watch a
register (:mod:`tenure.testing.workload._watcher`); the others loop on random operations
(:mod:`tenure.testing.workload`; through dflockd's face too where the target serves
it: :mod:`tenure.testing.workload._dflockd`; and YDB's: :mod:`tools.faults.lin_ydb`). Every
operation goes to lincheck's files
(:mod:`tenure.testing.workload`); what is not an operation (a pause, a client's loop
dying of an unexpected error) to the suite's history as notes.

On SIGTERM the clients get :data:`STOP_GRACE` seconds to finish their step, then
they are cancelled (what was pending ends ``info``), their clients closed, the files
closed, and the process exits.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from tenure.testing.workload import DFLOCKD_STEPS, STEPS, Books, LinClient, LinConfig, watcher
from tools.faults.history import Recorder, now_ns
from tools.faults.lin_client import LoopPauses
from tools.faults.lin_ydb import YdbVisits
from tools.faults.worker import config_main

#: After SIGTERM, how long clients may finish their step before they are cancelled.
STOP_GRACE: Final = 3.0


async def run(config: LinConfig) -> None:
    """Run every client of the worker until SIGTERM (see the module docstring)."""
    recorder = Recorder(Path(config.history))
    books = Books(Path(config.out_dir), config.index, now_ns)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    pauses = LoopPauses(config, recorder)
    ydb = YdbVisits(config) if config.ydb else None
    steps = {**STEPS, **(DFLOCKD_STEPS if config.dflockd else {}), **(ydb.steps() if ydb else {})}
    runners = [
        watcher(config, n, books, recorder)
        if n < config.watchers
        else LinClient(config, n, books, pauses, recorder, steps)
        for n in range(config.clients)
    ]
    tasks = [asyncio.create_task(runner.run(stop)) for runner in runners]
    recorder.note(f"w{config.index}", "worker-start")
    try:
        await stop.wait()
        recorder.note(f"w{config.index}", "stop")
        _, pending = await asyncio.wait(tasks, timeout=STOP_GRACE)
        for task in pending:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        if ydb is not None:
            await ydb.aclose()
        recorder.note(f"w{config.index}", "worker-end")
        books.close()
        recorder.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: ``python -m tools.faults.lin_worker CONFIG.json``."""
    return config_main("tools.faults.lin_worker", argv, lambda path: run(LinConfig.read(path)))


if __name__ == "__main__":
    sys.exit(main())
