"""tenure.testing.Recorder: the history it keeps, and assertions that can fail.

Its assertions pass on what tenure does (tasks contending on ``memory://``, the sync
face's threads, a hold lost and taken over) and fail on histories that break them:
two holds of a semaphore of two tokens at once (``assert_never_overlap``), and an
acquire overtaken, made here with two ``memory://`` states that share a node's and a
semaphore's name, so that the recorder sees one semaphore served out of order.
"""

from __future__ import annotations

import asyncio
import random
import threading

import pytest

import tenure
import tenure.sync
from tenure.errors import SessionExpiredError
from tenure.testing import FakeClock, Recorder, disconnect
from tenure.testing.conformance.support import settle, within


async def test_contending_tasks_hold_one_at_a_time_first_come_first_served() -> None:
    recorder = Recorder()
    random.seed(36)
    async with tenure.connect("memory://recorder", observers=[recorder]) as client:
        await client.create_node("app")
        sessions = [await client.session("app") for _ in range(6)]

        async def worker(session: tenure.Session) -> None:
            for _ in range(5):
                async with session.mutex("job"):
                    await settle(random.randint(0, 3))
                async with session.rwlock("doc").read():
                    await settle(random.randint(0, 2))
                await settle(random.randint(0, 2))

        await within(asyncio.gather(*(worker(session) for session in sessions)))
    assert len(recorder.holds("job")) == 30
    recorder.assert_never_overlap("job")
    recorder.assert_fifo()
    # Readers share "doc" rightly: it is left out by naming what to check.
    assert len(recorder.holds("doc")) == 30
    # lincheck's semaphore model over all of it: the mutex's holds take every token,
    # the readers one each; tokens grow in grant order.
    recorder.assert_linearizable()
    history = recorder.linearizable_history("job")
    assert [op.f for op in history.operations].count("release") == 30


async def test_two_holds_at_once_fail_assert_never_overlap() -> None:
    recorder = Recorder()
    async with tenure.connect("memory://", observers=[recorder]) as client:
        await client.create_node("app")
        async with client.session("app") as first, client.session("app") as second:
            # A semaphore of two tokens used as if it were a lock: both get in.
            await first.semaphore("printer").create(2)
            async with first.acquire("printer"), second.acquire("printer"):
                pass
            async with first.mutex("job"):
                pass
    recorder.assert_never_overlap("job")  # the mutex is fine
    with pytest.raises(AssertionError) as failed:
        recorder.assert_never_overlap()
    assert "two holds of 'printer' (node 'app') at once" in str(failed.value)
    assert "token 1 of session 1: #2..#6 released still held when" in str(failed.value)
    recorder.assert_fifo()  # (served in order all the same)
    recorder.assert_linearizable(limits={"printer": 2})  # two tokens held of two
    with pytest.raises(AssertionError) as failed:
        recorder.assert_linearizable(limits={"printer": 1})
    message = str(failed.value)
    assert "what the recorder saw is not linearizable" in message
    assert "key 'app/printer': not linearizable" in message
    assert "could not linearize" in message


async def test_an_acquire_overtaken_fails_assert_fifo() -> None:
    recorder = Recorder()
    clients = [tenure.connect(url, observers=[recorder]) for url in ("memory://a", "memory://b")]
    async with clients[0] as one, clients[1] as other:
        for client in (one, other):
            await client.create_node("app")
        async with one.session("app") as holder, one.session("app") as waiter:
            lock = await holder.mutex("job").lock()
            waiting = asyncio.create_task(waiter.mutex("job").lock())
            await settle()
            # Another state's "job" of a node "app": to the recorder, the same
            # semaphore, granted while the earlier acquire still waits.
            async with other.session("app") as late:
                await (await late.mutex("job").lock()).release()
            await lock.release()
            await (await within(waiting)).release()
    recorder.assert_never_overlap("nothing-else")
    with pytest.raises(AssertionError) as failed:
        recorder.assert_fifo()
    message = str(failed.value)
    assert "'job' (node 'app') was not granted first come, first served" in message
    assert "session 1: #4 granted #5 overtook" in message
    assert "#3 granted #8" in message
    recorder.assert_fifo("other")  # a name never acquired: nothing to check
    # Two holds of "job" at once, and the second state's token 1 after the first's 1.
    with pytest.raises(AssertionError, match="key 'app/job': not linearizable"):
        recorder.assert_linearizable()


async def test_a_lost_hold_ends_before_the_next_one_is_granted() -> None:
    recorder, clock = Recorder(), FakeClock()
    async with tenure.connect("memory://", clock=clock, observers=[recorder]) as client:
        await client.create_node("app")
        first = await client.session("app", recovery_window=5)
        await first.mutex("job").lock()
        async with client.session("app", recovery_window=60) as second:
            taking = asyncio.create_task(second.mutex("job").lock())
            disconnect(first)
            await clock.advance(6)
            await (await within(taking)).release()
    lost, taken = recorder.holds("job")
    assert isinstance(lost.lost, SessionExpiredError)
    assert taken.lost is None
    assert lost.ended is not None
    assert lost.ended < taken.granted
    recorder.assert_never_overlap()
    recorder.assert_fifo()
    recorder.assert_linearizable()  # the loss ended the first hold before the grant
    # In call order: a loss is called at its hold's grant (the store may end it from then).
    assert [op.f for op in recorder.linearizable_history().operations] == [
        "acquire",
        "lost",
        "acquire",
        "release",
    ]
    assert [str(record).split(":")[0] for record in recorder.acquires] == [
        f"Lock 'job' by session {first.id}",
        f"Lock 'job' by session {second.id}",
    ]
    recorder.clear()
    assert recorder.acquires == []
    assert recorder.holds() == []


def test_the_sync_face_threads_are_recorded_too() -> None:
    recorder = Recorder()
    tenure.add_observer(recorder)
    try:
        with tenure.sync.connect("memory://sync-recorder") as client:
            client.create_node("app")

            def worker() -> None:
                with client.session("app") as session:
                    for _ in range(10):
                        with session.mutex("job"):
                            pass

            threads = [threading.Thread(target=worker) for _ in range(4)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=60)
    finally:
        tenure.remove_observer(recorder)
    assert len(recorder.holds("job")) == 40
    recorder.assert_never_overlap()
    recorder.assert_fifo()
