"""Hand-offs: a held lease handed to another session (``lease.handoff()``,
``session.adopt()``), in one step and under a new, greater fencing token.

Every test needs ``Capability.HANDOFF``. The adopter is a session of another client
(another connection), as a worker process's would be; the old holder sees the loss
as any lost lease does, and a fence that saw the adopter's token refuses the old one.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import tenure
from tenure.errors import (
    FencedError,
    InvalidArgumentError,
    LeaseLostError,
    PreconditionFailedError,
)
from tenure.fencing import FileFence
from tenure.testing import FakeClock

from .harness import Expire
from .support import eventually, owners, spawn, wait_for_waiters, waiters, within
from .test_max_hold import BOUND, later

pytestmark = pytest.mark.requires(tenure.Capability.HANDOFF)


async def _lost(lease: tenure.Lease) -> None:
    """Wait until the old holder has heard its lease went (a push away)."""

    async def lost() -> bool:
        return lease.lost_reason is not None

    await eventually(lost, f"the lease of {lease.name!r} hears it was handed off")


async def test_a_worker_adopts_the_hold_with_a_greater_token_and_the_producer_is_fenced(
    client: tenure.Client, client2: tenure.Client, node: str, tmp_path: Path
) -> None:
    producer = await client.session(node)
    worker = await client2.session(node)
    fence = FileFence(tmp_path / "report")
    lock = await producer.mutex("job").lock(data=b"job-7")
    fence.write(lock.token, b"producer: started")
    text = await lock.handoff()
    assert isinstance(text, str)
    assert text.isascii()
    assert lock.held  # held until adopted

    adopted = await worker.adopt(text)

    assert isinstance(adopted, tenure.Lease)
    assert adopted.session is worker
    assert adopted.held
    assert adopted.token > lock.token
    assert (adopted.name, adopted.count, adopted.data) == ("job", lock.count, b"job-7")
    assert await owners(worker, "job") == [worker.id]
    await _lost(lock)
    assert isinstance(lock.lost_reason, LeaseLostError)
    assert not producer.closed  # the session lives on: only this hold moved
    fence.write(adopted.token, b"worker: finished")
    with pytest.raises(FencedError):
        fence.write(lock.token, b"producer: a late write")
    assert fence.read() == b"worker: finished"
    await adopted.release()
    assert await owners(worker, "job") == []


async def test_a_release_that_crossed_the_adoption_is_told_lost(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    producer = await client.session(node)
    worker = await client2.session(node)
    lock = await producer.mutex("job").lock()
    adopted = await worker.adopt(await lock.handoff())
    # Released in the turn the adoption was answered: whether the store's push of the
    # loss came first or the release crossed it on its way (the store holds nothing of
    # this hold), the producer is told it lost the hold (docs/guarantees.md 6g), and
    # its release takes nothing of the adopter's.
    await lock.release()
    assert isinstance(lock.lost_reason, LeaseLostError), lock.lost_reason
    assert await owners(worker, "job") == [worker.id]
    assert adopted.held
    await adopted.release()
    assert adopted.lost_reason is None


async def test_the_adopted_lease_guards_a_block_and_the_old_holders_block_is_cancelled(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    producer = await client.session(node)
    worker = await client2.session(node)
    lock = await producer.mutex("job").lock()
    entered = asyncio.Event()

    async def hold() -> None:
        async with lock:
            entered.set()
            await asyncio.sleep(3600)

    holding = spawn(hold())
    await within(entered.wait(), "the holder's block starts")
    adopted = await worker.adopt(await lock.handoff())
    with pytest.raises(LeaseLostError):
        await within(holding, "the old holder's block ends")
    async with adopted:
        assert adopted.held
    assert not adopted.held
    assert adopted.lost_reason is None


async def test_a_semaphore_hold_keeps_its_count_and_data_and_waiters_keep_their_order(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    holder = await client.session(node)
    adopter = await client2.session(node)
    await holder.semaphore("pool").create(limit=3)
    lease = await holder.semaphore("pool").acquire(2, data=b"two")
    first = await client.session(node)
    second = await client2.session(node)
    waiting_first = spawn(first.semaphore("pool").acquire(2))
    await wait_for_waiters(holder, "pool", 1)
    waiting_second = spawn(second.semaphore("pool").acquire(1))
    await wait_for_waiters(holder, "pool", 2)

    adopted = await adopter.adopt(await lease.handoff())

    assert (adopted.count, adopted.data) == (2, b"two")
    description = await adopter.semaphore("pool").describe(owners=True, waiters=True)
    assert description.count == 2
    assert [(o.session_id, o.count, o.data, o.token) for o in description.owners] == [
        (adopter.id, 2, b"two", adopted.token)
    ]
    assert await waiters(adopter, "pool") == [first.id, second.id]
    assert not waiting_first.done()
    assert not waiting_second.done()
    await adopted.release()
    granted_first = await within(waiting_first)
    granted_second = await within(waiting_second)
    assert adopted.token < granted_first.token < granted_second.token


async def test_a_hand_off_adopts_once(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    holder = await client.session(node)
    one = await client2.session(node)
    two = await client.session(node)
    lock = await holder.mutex("job").lock()
    text = await lock.handoff()
    adopted = await one.adopt(text)
    with pytest.raises(LeaseLostError, match="cannot be adopted"):
        await two.adopt(text)
    await _lost(lock)  # (its task holds "job" in its session until it hears)
    with pytest.raises(LeaseLostError):
        await holder.adopt(text)  # (not even by the session that offered it)
    assert adopted.held
    assert await owners(two, "job") == [one.id]


async def test_only_the_latest_hand_off_adopts(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    holder = await client.session(node)
    adopter = await client2.session(node)
    lock = await holder.mutex("job").lock()
    earlier = await lock.handoff()
    latest = await lock.handoff()
    assert earlier != latest
    with pytest.raises(LeaseLostError):
        await adopter.adopt(earlier)
    assert lock.held
    assert (await adopter.adopt(latest)).token > lock.token


async def test_a_released_lease_or_a_closed_session_cannot_be_adopted(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    holder = await client.session(node)
    adopter = await client2.session(node)
    lock = await holder.mutex("job").lock()
    text = await lock.handoff()
    await lock.release()
    with pytest.raises(LeaseLostError, match="cannot be adopted"):
        await adopter.adopt(text)
    with pytest.raises(PreconditionFailedError, match="released"):
        await lock.handoff()

    gone = await client.session(node)
    lease = await gone.mutex("other").lock()
    text = await lease.handoff()
    await gone.close()
    with pytest.raises(LeaseLostError):
        await adopter.adopt(text)
    assert await owners(adopter, "job") == []
    assert await owners(adopter, "other") == []


async def test_an_expired_holders_hand_off_cannot_be_adopted(
    client: tenure.Client, client2: tenure.Client, node: str, expire: Expire
) -> None:
    holder = await client.session(node, recovery_window=5.0)
    adopter = await client2.session(node)
    lock = await holder.mutex("job").lock()
    text = await lock.handoff()
    await expire(holder)
    with pytest.raises(LeaseLostError):
        await adopter.adopt(text)
    assert await owners(adopter, "job") == []


@pytest.mark.parametrize(
    "garble",
    [
        pytest.param(lambda text: "", id="empty"),
        pytest.param(lambda text: "not a hand-off", id="prose"),
        pytest.param(lambda text: text[:-8], id="truncated"),
        pytest.param(lambda text: text.replace(".", ":", 2), id="mangled"),
    ],
)
async def test_a_garbled_hand_off_is_refused_before_anything_is_sent(
    client: tenure.Client, client2: tenure.Client, node: str, garble: object
) -> None:
    holder = await client.session(node)
    adopter = await client2.session(node)
    lock = await holder.mutex("job").lock()
    text = await lock.handoff()
    assert callable(garble)
    with pytest.raises((InvalidArgumentError, LeaseLostError)):
        await adopter.adopt(garble(text))
    assert lock.held
    assert await owners(adopter, "job") == [holder.id]


async def test_a_forged_secret_or_token_is_refused_and_the_holder_keeps_its_lease(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    holder = await client.session(node)
    adopter = await client2.session(node)
    lock = await holder.mutex("job").lock()
    real = tenure.backends.Handoff.from_str(await lock.handoff())
    forgeries = [
        tenure.backends.Handoff(
            real.scheme, real.node, real.name, real.holder, real.holder_hold, real.token, b"\0" * 16
        ),
        tenure.backends.Handoff(
            real.scheme,
            real.node,
            real.name,
            real.holder,
            real.holder_hold,
            real.token + 1,
            real.secret,
        ),
    ]
    for forged in forgeries:
        with pytest.raises(LeaseLostError):
            await adopter.adopt(forged.to_str())
    other_node = tenure.backends.Handoff(
        real.scheme,
        real.node + "-x",
        real.name,
        real.holder,
        real.holder_hold,
        real.token,
        real.secret,
    )
    with pytest.raises(InvalidArgumentError, match="node"):
        await adopter.adopt(other_node.to_str())
    assert lock.held
    assert await owners(adopter, "job") == [holder.id]
    assert (await adopter.adopt(real.to_str())).held  # (the real one still adopts)


async def test_adopting_from_the_same_session_moves_the_hold_to_a_new_lease(
    client: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    lock = await session.mutex("job").lock()
    text = await lock.handoff()

    async def adopt() -> tenure.Lease:
        return await session.adopt(text)  # (another task: the caller holding "job" may not)

    adopted = await within(spawn(adopt()))
    assert adopted.token > lock.token
    assert adopted.session is session
    await _lost(lock)
    assert session.leases("job") == [adopted]


async def test_a_restate_in_place_keeps_the_hand_off_and_an_upgrade_withdraws_it(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    holder = await client.session(node)
    adopter = await client2.session(node)
    await holder.semaphore("pool").create(limit=3)
    lease = await holder.semaphore("pool").acquire(2, data=b"two")
    text = await lease.handoff()
    await lease.restate(1, data=b"one")  # (in place: the same token)
    adopted = await adopter.adopt(text)
    assert (adopted.count, adopted.data) == (1, b"one")

    other = await client.session(node)
    upgraded = await other.semaphore("pool").acquire(1)
    text = await upgraded.handoff()
    before = upgraded.token
    await upgraded.restate(2)  # (an upgrade: a new token, granted at once)
    assert upgraded.token > before
    with pytest.raises(LeaseLostError):
        await (await client2.session(node)).adopt(text)
    assert upgraded.held


@pytest.mark.requires(tenure.Capability.MAX_HOLD)
async def test_an_adopted_hold_keeps_the_max_hold_end_of_the_hold_it_took_over(
    client: tenure.Client, client2: tenure.Client, node: str, state_clock: FakeClock | None
) -> None:
    """A hand-off is no way past a max_hold: the adopter's grant ends when the offered
    one would have (here the node bounds nothing, so a grant that did not keep the
    end would be held for ever, and the wait below would time out)."""
    producer, worker = await client.session(node), await client2.session(node)
    lock = await producer.mutex("job", max_hold=1.0).lock()
    adopted = await worker.adopt(await lock.handoff())
    assert adopted.token > lock.token
    await later(state_clock, 1.0)
    async with asyncio.timeout(BOUND):
        reason = await adopted.lost
    assert isinstance(reason, LeaseLostError)
    assert "max_hold" in str(reason)
    assert not adopted.held
    assert worker.lost_reason is None  # the session lives on: only the lease ended
