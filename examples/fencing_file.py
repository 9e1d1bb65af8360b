"""A paused lock holder cannot overwrite newer data: a file fenced with tenure.fencing.

Two report writers take turns on the mutex "report". Writer A takes it and writes
the report through a :class:`tenure.fencing.FileFence`, then pauses (think: a long
GC pause, a stopped VM): its connection is silent for longer than its session's
recovery window, so the session expires and writer B is granted the mutex, with a
greater fencing token, and writes. A wakes up still believing it holds the lock and
writes: the fence refuses its token, and the file keeps B's report.

The time here is a FakeClock, so the 5-second recovery window passes at once. The
same guard exists for PostgreSQL and Redis (docs/fencing.md).

Run it with::

    python examples/fencing_file.py
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import tenure
from tenure.errors import FencedError
from tenure.fencing import FileFence
from tenure.testing import FakeClock, disconnect, reconnect

NODE = "fencing-demo"
RECOVERY_WINDOW = 5.0


async def main() -> None:
    clock = FakeClock()
    with tempfile.TemporaryDirectory() as directory:
        fence = FileFence(Path(directory) / "report.txt")
        async with tenure.connect("memory://", clock=clock) as client:
            await client.create_node(NODE)
            writer_a = await client.session(NODE, recovery_window=RECOVERY_WINDOW)
            lock_a = await writer_a.mutex("report").lock()
            await fence.awrite(lock_a.token, b"report by writer A")
            print(f"writer A: holds 'report' with token {lock_a.token}, wrote the report")

            disconnect(writer_a, lose_pushes=True)  # A pauses: it hears nothing
            await clock.advance(RECOVERY_WINDOW + 1)
            print(f"writer A: paused for {RECOVERY_WINDOW + 1:.0f} s")

            async with (
                client.session(NODE) as writer_b,
                writer_b.mutex("report") as lock_b,
            ):
                await fence.awrite(lock_b.token, b"report by writer B")
                print(f"writer B: holds 'report' with token {lock_b.token}, wrote the report")

                print(f"writer A: wakes up, still believes it holds the lock: {lock_a.held}")
                try:
                    await fence.awrite(lock_a.token, b"stale report by writer A")
                    print("writer A: wrote the report (unexpected)")
                except FencedError as error:
                    print(f"fence: refused writer A: {error}")

            reconnect(writer_a)  # A hears what happened while it slept
            print(f"writer A: learns its lock was lost: {type(lock_a.lost_reason).__name__}")
        print(f"report.txt: {fence.read()!r}, highest token {fence.highest()}")


if __name__ == "__main__":
    asyncio.run(main())
