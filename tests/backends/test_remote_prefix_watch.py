"""A prefix cache on tenure:// across lost pushes: the re-attach is a reset.

Pushes written to a connection that then dies are lost, and a restarted server keeps
no watches: after each re-attach the client cancels its prefix watches, arms new
ones, and only then tells the cache to list again (backends/_engine.py). Here the
proxy throws away the WatchFired pushes of changes, with and without a ``kill -9``.
"""

from __future__ import annotations

import asyncio

import pytest

import tenure
from tenure.testing.conformance.support import eventually, within
from tests.backends.test_remote_lost_pushes import Server, client, cut_off, direct, server

__all__ = ["client", "server"]  # (the fixtures, used by name)


@pytest.mark.parametrize("crash", [False, True], ids=["drop", "kill-9"])
async def test_changes_whose_pushes_were_lost_are_listed_again(
    server: Server, client: tenure.Client, crash: bool
) -> None:
    async with direct(server) as other:
        writer = await other.session("n")
        await writer.semaphore("config/a").create(1, b"1")
        await writer.semaphore("config/b").create(1, b"1")
    async with client.cache("n", prefix="config/") as cache:
        changes = cache.changes()
        async with direct(server) as other:
            writer = await other.session("n")
            server.proxy.lose_downstream()
            await writer.semaphore("config/a").update(b"2")  # its WatchFired is lost
            await writer.semaphore("config/b").delete()
            await writer.semaphore("config/c").create(1, b"c")
            await asyncio.sleep(0.2)  # the pushes are written, and thrown away
            assert cache.get("config/a").data == b"1"  # type: ignore[union-attr]
        await cut_off(server, client, crash=crash)

        told: dict[str, bytes | None] = {}
        while len(told) < 3:
            change = await within(anext(changes), "the cache listing again")
            told[change.name] = None if change.view is None else change.view.data
        assert told == {"config/a": b"2", "config/b": None, "config/c": b"c"}

        async with direct(server) as other:  # (a restarted server listens elsewhere)
            writer = await other.session("n")
            await writer.semaphore("config/a").update(b"3")  # the new watch pushes it

            async def pushed() -> bool:
                view = cache.get("config/a")
                return view is not None and view.data == b"3"

            await eventually(pushed, "the change after the re-attach")
