"""Deadlock detection: the acquire that would close a cycle of tasks waiting on each
other fails at once with DeadlockError naming the cycle; the others keep waiting.

Who waits is a *task*, not a session: a session's tasks may hold and wait apart, so
a task of a session that waits behind another task of it, or for a holder whose
task is free, is no deadlock. Each test is marked ``requires(DEADLOCK_DETECTION)``:
a backend without it lets such acquires wait (until their timeouts), as before.
"""

from __future__ import annotations

import asyncio
import random
import re
import threading

import pytest

import tenure
import tenure.sync
from tenure._core.limits import (
    MAX_DEADLOCK_LINKS,
    MAX_DEADLOCK_NAME_BYTES,
    MAX_DEADLOCKS_SHOWN,
    MAX_NAME_BYTES,
)
from tenure.client import Opening
from tenure.errors import DeadlockError

from .harness import Harness
from .support import spawn, wait_for_waiters, waiters, within

DEADLOCKS = pytest.mark.requires(tenure.Capability.DEADLOCK_DETECTION)


def cycle(*steps: tuple[tenure.Session, str]) -> str:
    """The pattern of DeadlockError's message for the cycle through ``steps``: each
    (session, the semaphore it waits for, held by the next), back to the first."""
    ids = [session.id for session, _ in steps] + [steps[0][0].id]
    task = r" \(task \d+\)"
    text = f"session {ids[0]}{task}"
    for i, (_, name) in enumerate(steps):
        which = "" if i == 0 else ", which"
        text += f"{which} waits for {re.escape(repr(name))} held by session {ids[i + 1]}{task}"
    return text


def _opening(session: tenure.Session, name: str, count: int | None) -> Opening[tenure.Lease]:
    """The mutex ``name`` (``count`` None), or ``count`` tokens of the semaphore ``name``."""
    if count is None:
        return session.acquire(name, tenure.MAX_COUNT, ephemeral=True)  # (a mutex's hold)
    return session.acquire(name, count)


async def holding_then_waiting(
    session: tenure.Session,
    held: str,
    wanted: str,
    *,
    held_count: int | None = None,
    wanted_count: int | None = None,
) -> asyncio.Task[list[int]]:
    """A task of ``session`` that holds ``held``, then waits for ``wanted`` (mutexes,
    or counts of semaphores); once granted it releases both and returns their
    tokens. Returns once the task holds ``held``."""
    holds = asyncio.Event()

    async def run() -> list[int]:
        async with _opening(session, held, held_count) as first:
            holds.set()
            async with _opening(session, wanted, wanted_count) as second:
                return [first.token, second.token]

    task = spawn(run())
    await within(holds.wait(), f"a task of session {session.id} holding {held!r}")
    return task


async def holding_until(
    session: tenure.Session, name: str, count: int, go: asyncio.Event
) -> asyncio.Task[None]:
    """A task of ``session`` that holds ``count`` of ``name`` and waits for nothing but
    ``go`` (a free task: it releases on its own); returns once it holds."""
    holds = asyncio.Event()

    async def run() -> None:
        async with session.acquire(name, count):
            holds.set()
            await go.wait()

    task = spawn(run())
    await within(holds.wait(), f"a task of session {session.id} holding {name!r}")
    return task


@DEADLOCKS
async def test_two_sessions_the_closing_acquire_fails_naming_the_cycle(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    one, two = await client.session(node), await client2.session(node)
    b = await two.mutex("b").lock()  # this task of two holds b...
    first = await holding_then_waiting(one, "a", "b")  # ...one's task holds a, waits b
    await wait_for_waiters(two, "b", 1)
    with pytest.raises(DeadlockError) as refused:
        await within(two.mutex("a").lock())  # ...and waiting for a would close it
    assert re.search(cycle((two, "a"), (one, "b")), str(refused.value)), str(refused.value)
    assert await waiters(two, "a") == []  # nothing queued
    assert not first.done()  # the other keeps waiting, and goes on once b is let go
    await b.release()
    tokens = await within(first, "the other task, once b was released")
    assert tokens[1] > b.token


@DEADLOCKS
async def test_three_sessions_the_third_acquire_fails(
    client: tenure.Client, client2: tenure.Client, node: str, make_client: object
) -> None:
    third_client = await make_client()  # type: ignore[operator]
    one, two = await client.session(node), await client2.session(node)
    three = await third_client.session(node)
    c = await three.mutex("c").lock()
    second = await holding_then_waiting(two, "b", "c")
    await wait_for_waiters(one, "c", 1)
    first = await holding_then_waiting(one, "a", "b")
    await wait_for_waiters(one, "b", 1)
    with pytest.raises(DeadlockError) as refused:
        await within(three.mutex("a").lock(timeout=60))  # a timeout changes nothing
    assert re.search(cycle((three, "a"), (one, "b"), (two, "c")), str(refused.value))
    await c.release()  # the chain unwinds: two gets c, releases b; one gets b
    await within(asyncio.gather(first, second), "the chain, once c was released")


@DEADLOCKS
async def test_two_tasks_of_one_session_in_a_cycle_with_another(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    one, two = await client.session(node), await client2.session(node)
    c = await one.mutex("c").lock()  # this task of one holds c
    second = await holding_then_waiting(two, "b", "c")  # two: b, then c
    await wait_for_waiters(one, "c", 1)
    first = await holding_then_waiting(one, "a", "b")  # another task of one: a, then b
    await wait_for_waiters(one, "b", 1)
    with pytest.raises(DeadlockError) as refused:
        await within(one.mutex("a").lock())  # one's first task waits for its other
    assert re.search(cycle((one, "a"), (one, "b"), (two, "c")), str(refused.value))
    await c.release()
    await within(asyncio.gather(first, second))


@DEADLOCKS
async def test_a_holder_whose_task_is_free_is_no_deadlock_even_in_one_session(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    one, two = await client.session(node), await client2.session(node)
    a = await one.mutex("a").lock()  # this task of one holds a, and waits for nothing
    b = await two.mutex("b").lock()
    first = await holding_then_waiting(one, "x", "b")  # another task of one waits for b
    await wait_for_waiters(one, "b", 1)
    taking = spawn(two.mutex("a").lock())  # two's b-holder waits for a: not a deadlock
    await wait_for_waiters(one, "a", 1)
    await a.release()
    got = await within(taking)
    await got.release()
    await b.release()
    await within(first)


@DEADLOCKS
async def test_a_task_behind_its_own_sessions_other_task_waits(
    client: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    held = await session.mutex("m").lock()
    behind = spawn(session.mutex("m").lock())  # another task of the same session
    await wait_for_waiters(session, "m", 1)
    assert not behind.done()
    await held.release()
    lock = await within(behind)
    await lock.release()


@DEADLOCKS
async def test_a_set_waiting_ahead_is_waited_for(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    if tenure.Capability.ALL_OR_NONE not in client.capabilities:
        pytest.skip("the backend has no lock_all (ALL_OR_NONE)")
    one, two = await client.session(node), await client2.session(node)
    b = await two.mutex("b").lock()
    locking = spawn(one.lock_all(["a", "b"]))  # queued in a's queue and in b's
    await wait_for_waiters(two, "b", 1)
    with pytest.raises(DeadlockError) as refused:
        await within(two.mutex("a").lock())  # a is free, but the set is ahead of it
    expected = rf"waits for 'a' queued behind session {one.id} \(task \d+\), which waits for 'b'"
    assert re.search(expected, str(refused.value))
    await b.release()
    held = await within(locking)
    await held.release()


@DEADLOCKS
async def test_counting_semaphores_a_free_holder_breaks_no_cycle_stuck_ones_do(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    one, two = await client.session(node), await client2.session(node)
    await one.semaphore("pool").create(2)
    x = await two.mutex("x").lock()  # this task of two holds x
    go = asyncio.Event()
    free = await holding_until(one, "pool", 1, go)  # a token held by a free task
    stuck = await holding_then_waiting(one, "pool", "x", held_count=1)
    await wait_for_waiters(one, "x", 1)
    # A cycle (two waits for pool, held by a task waiting for two's x), but the other
    # token's task is free: it will release it, so this waits.
    taking = spawn(two.acquire("pool", 1))
    await wait_for_waiters(one, "pool", 1)
    go.set()
    token = await within(taking, "the token the free task let go")
    await within(free)
    await token.release()
    # Both tokens held by tasks waiting for x: asking for one now is a deadlock.
    other = await holding_then_waiting(one, "pool", "x", held_count=1)
    await wait_for_waiters(one, "x", 2)
    with pytest.raises(DeadlockError) as refused:
        await within(two.acquire("pool", 1))
    assert re.search(cycle((two, "pool"), (one, "x")), str(refused.value))
    await x.release()
    await within(asyncio.gather(stuck, other), "the tasks waiting for x")


def _long_name(i: int) -> tuple[str, str]:
    """The ``i``-th name of a long cycle, MAX_NAME_BYTES long, and what a cycle's text
    shows of it: a quote and a backslash (quoted as Python's ``repr`` quotes them),
    then 3-byte characters, so the cut at MAX_DEADLOCK_NAME_BYTES falls inside one (it
    is left out whole), then ``...``."""
    head = f"{i}'\\"
    body = "\N{EURO SIGN}" * ((MAX_NAME_BYTES - len(head)) // 3)
    name = head + body + "x" * (MAX_NAME_BYTES - len((head + body).encode()))
    assert len(name.encode()) == MAX_NAME_BYTES
    fits = (MAX_DEADLOCK_NAME_BYTES - len(head)) // 3
    assert (len(head) + 3 * fits) % MAX_DEADLOCK_NAME_BYTES  # (a cut inside a character)
    return name, repr(head + "\N{EURO SIGN}" * fits) + "..."


@DEADLOCKS
async def test_a_long_cycle_of_long_names_is_named_bounded_the_same_everywhere(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    # A cycle of more waits than a text names, each on a name of the longest kind:
    # the text names the first MAX_DEADLOCK_LINKS, each name cut, and counts the rest
    # (whole, it would be the names' many KiB, kept by the node and sent to every
    # client that describes it).
    length = MAX_DEADLOCK_LINKS + 2
    names, shown = zip(*(_long_name(i) for i in range(length)), strict=True)
    one, two = await client.session(node), await client2.session(node)
    closer = await two.mutex(names[0]).lock()  # this task of two holds the first name
    tasks = []
    for i in reversed(range(1, length)):  # task i of one: names[i], then the next one
        tasks.append(await holding_then_waiting(one, names[i], names[(i + 1) % length]))
        await wait_for_waiters(one, names[(i + 1) % length], 1)
    refusals = []
    for _ in range(MAX_DEADLOCKS_SHOWN + 1):  # (the node keeps the latest only)
        with pytest.raises(DeadlockError) as refused:
            await within(two.mutex(names[1]).lock())
        refusals.append(str(refused.value))
    task = r" \(task (\d+)\)"
    links = [
        f"waits for {re.escape(shown[i])} held by session {one.id} \\(task \\d+\\)"
        for i in range(1, MAX_DEADLOCK_LINKS + 1)
    ]
    expected = (
        f"session {two.id}{task} "
        + ", which ".join(links)
        + f", and {length - MAX_DEADLOCK_LINKS} more waits back to session {two.id}"
        + rf" \(task \1\): a cycle of {length}"
    )
    prefix = "refused: waiting would deadlock: "
    message = refusals[-1]
    assert message.startswith(prefix), message
    assert re.fullmatch(expected, message[len(prefix) :]), message
    assert len(set(refusals)) == 1
    # Bounded: the names shown, the labels and the words, not the names' KiB.
    assert len(message.encode()) < MAX_DEADLOCK_LINKS * (MAX_DEADLOCK_NAME_BYTES + 96) + 128
    kept = (await client.describe_node(node)).deadlocks
    assert len(kept) == MAX_DEADLOCKS_SHOWN
    assert {d.cycle for d in kept} == {message[len(prefix) :]}
    assert {(d.session_id, d.task) for d in kept} == {(two.id, kept[0].task)}
    await closer.release()  # the cycle unwinds from the last task to the first
    await within(asyncio.gather(*tasks), "the tasks of the cycle, once its first was let go")


@DEADLOCKS
async def test_two_upgrades_of_one_semaphore_deadlock(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    one, two = await client.session(node), await client2.session(node)
    await one.semaphore("rw").create(2)
    reader1 = await one.acquire("rw", 1)
    reader2 = await two.acquire("rw", 1)
    upgrading = spawn(reader1.restate(2))  # one reader would write: waits for the other
    await wait_for_waiters(one, "rw", 1)
    with pytest.raises(DeadlockError):
        await within(reader2.restate(2))  # both would wait for each other for ever
    assert reader2.held  # the refused upgrade left its hold as it was
    assert reader2.count == 1
    await reader2.release()
    await within(upgrading)
    assert reader1.count == 2
    await reader1.release()


@DEADLOCKS
async def test_random_waits_in_one_order_never_deadlock(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    # Every task takes its names in one global order: no cycle can form, and no
    # acquire may be refused (no false positive), counting semaphores included.
    sessions = [await c.session(node) for c in (client, client2)]
    await sessions[0].semaphore("n1").create(2)
    names = ["n0", "n1", "n2", "n3"]
    done: list[int] = []

    async def worker(session: tenure.Session, seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(4):
            chosen = sorted(rng.sample(names, rng.randint(1, 3)))
            held = []
            for name in chosen:
                held.append(await _opening(session, name, 1 if name == "n1" else None))
                await asyncio.sleep(0)
            for lease in reversed(held):
                await lease.release()
            done.append(seed)

    rng = random.Random(35)
    await within(
        asyncio.gather(*(worker(sessions[i % 2], rng.randrange(2**32)) for i in range(6))),
        "24 rounds of ordered acquires",
    )
    assert len(done) == 24


@DEADLOCKS
def test_threads_of_the_sync_face_are_its_tasks(backend: Harness, state_name: str) -> None:
    with tenure.sync.connect(backend.url(state_name), **backend.options(None)) as client:
        node = f"{state_name}-sync"
        client.create_node(node, exist_ok=True)
        try:
            with client.session(node) as one, client.session(node) as two:
                b = two.mutex("b").lock()  # this thread holds b for two
                holding = threading.Event()
                outcome: list[int] = []

                def first() -> None:  # a thread of one: a, then b
                    with one.mutex("a"):
                        holding.set()
                        with one.mutex("b") as got:
                            outcome.append(got.token)

                thread = threading.Thread(target=first)
                thread.start()
                assert holding.wait(30)
                _wait_sync(lambda: len(one.semaphore("b").describe(waiters=True).waiters) == 1)
                with pytest.raises(DeadlockError):
                    two.mutex("a").lock()  # this thread would wait for the other
                b.release()
                thread.join(30)
                assert outcome == [outcome[0]]
                assert outcome[0] > b.token
        finally:
            client.drop_node(node, force=True)


def _wait_sync(check: object) -> None:
    """Poll ``check()`` (a sync call) until true, for at most 30 seconds."""
    import time

    deadline = time.monotonic() + 30
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "never happened"
        time.sleep(0.01)
