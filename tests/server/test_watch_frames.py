"""A watch firing larger than the watcher's frames, on a real ``tenure serve``.

A WatchFired push is sent to a connection that announced its ``max_frame_size``
in its Hello. One whose state does not fit was dropped with a warning in the
server's log: the watcher silently missed a firing (docs/guarantees.md, promise 7:
watches show the latest state first). Now it is sent without the state (nil,
"describe to learn it": docs/protocol.md section 8), and the describe that reads
the latest state is refused with LIMIT_EXCEEDED naming the frame's size while it
is still too large: the Python client's watch iterator raises LimitExceededError.
Ordered and counted, never timed.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import tenure
from tenure._core import (
    Acquire,
    CreateNode,
    CreateSemaphore,
    CreateSession,
    DescribeSemaphore,
    NodeConfig,
    Release,
    WatchFired,
)
from tenure._protocol import MIN_MAX_FRAME_SIZE, Welcome
from tenure.errors import ErrorCode, LimitExceededError

from .wire import WAIT, Clients, ServerProcess

pytestmark = pytest.mark.timeout(120)

#: One owner's data: one fits a 64 KiB frame, two do not.
DATA = b"d" * (40 * 1024)


async def test_a_firing_too_large_for_the_watcher_s_frames_is_sent_bare(
    tmp_path: Path, wire: Clients
) -> None:
    with ServerProcess(tmp_path / "data", "--fsync", "off") as server:
        admin = await wire.connect(server.port)
        await admin.call(CreateNode("n"))
        first = (await admin.call(CreateSession("n", b"a"))).session_id
        second = (await admin.call(CreateSession("n", b"b"))).session_id
        await admin.call(CreateSemaphore(first, "s", 2))
        await admin.call(Acquire(first, "s", 1, request_id=1, data=DATA))
        # The watcher accepts frames of 64 KiB, the least a peer may announce.
        watcher = await wire.connect(server.port, hello=False)
        welcome = await watcher.hello(max_frame_size=MIN_MAX_FRAME_SIZE)
        assert isinstance(welcome, Welcome), welcome
        sid = (await watcher.call(CreateSession("n", b"w"))).session_id
        armed = await watcher.call(
            DescribeSemaphore(sid, "s", owners=True, watch_owners=True, watch_repeat=True)
        )
        assert [o.data for o in armed.description.owners] == [DATA]
        # A second owner: the state (two owners' data) no longer fits the watcher's frames.
        seen = len(watcher.pushes)
        await admin.call(Acquire(second, "s", 1, request_id=2, data=DATA))
        refused = await watcher.fail(DescribeSemaphore(sid, "s", owners=True))
        assert refused.code is ErrorCode.LIMIT_EXCEEDED
        assert "max_frame_size" in refused.message
        assert f"at most {MIN_MAX_FRAME_SIZE}" in refused.message, refused.message
        # It fits again (the second owner leaves): that firing carries the state. The
        # watcher is told of both changes, in order: the first without its state.
        await admin.call(Release(second, "s"))
        again = await watcher.next_push()
        assert watcher.pushes[seen:] == [WatchFired(sid, armed.watch_id, "s", None), again]
        assert type(again) is WatchFired
        assert again.description is not None
        assert [o.session_id for o in again.description.owners] == [first]
        assert "dropped a push" not in server.output()


async def test_the_client_s_watch_raises_limit_exceeded_naming_the_frame_size(
    tmp_path: Path,
) -> None:
    """The Python client (1 MiB frames): its watch raises, it is never left waiting."""
    big = b"o" * (600 * 1024)  # two owners' data: more than 1 MiB
    with ServerProcess(tmp_path / "data", "--fsync", "off") as server:
        async with tenure.connect(f"tenure://127.0.0.1:{server.port}") as client:
            await client.create_node("n", NodeConfig(max_data_size=len(big)))
            owner = await client.session("n")
            other = await client.session("n")
            watcher = await client.session("n")
            await owner.semaphore("s").create(2)
            await owner.semaphore("s").acquire(data=big)
            watch = watcher.semaphore("s").watch(owners=True)
            try:
                first = await asyncio.wait_for(anext(watch), WAIT)
                assert [o.data for o in first.owners] == [big]
                await other.semaphore("s").acquire(data=big)
                with pytest.raises(LimitExceededError, match="max_frame_size") as raised:
                    # (A bound on a hang, not on speed: before, the firing was dropped
                    # and nothing came.)
                    await asyncio.wait_for(anext(watch), WAIT)
                assert "at most 1048576" in str(raised.value)
            finally:
                await watch.aclose()
        assert "dropped a push" not in server.output()
