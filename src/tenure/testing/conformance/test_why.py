"""Who blocks whom: ``client.why(node, name)`` on every backend.

Every backend shows a name's holders in grant order and its waiters in the order they
will be served (a page of them); one that knows what each holder waits for
(Capability.WAIT_CHAINS) also shows each holder's own waits, the chain of holders that
wait across names, and its roots; elsewhere those are None, not guessed.
"""

from __future__ import annotations

import pytest

import tenure
from tenure.errors import InvalidArgumentError, NotFoundError

from .harness import DropAtEnd, unique
from .support import spawn, wait_for_owner, wait_for_waiters, within


async def hold_then_wait(session: tenure.Session, held: str, wanted: str) -> None:
    """Lock ``held``, then, in the same task, wait for ``wanted`` (until cancelled)."""
    async with session.mutex(held), session.mutex(wanted):
        pass


async def test_a_name_shows_its_holder_and_its_waiters_in_order(
    client: tenure.Client, node: str
) -> None:
    name = unique("why")
    async with (
        client.session(node, description="the holder") as holder,
        client.session(node, description="first behind") as first,
        client.session(node, description="second behind") as second,
        holder.mutex(name),
    ):
        spawn(first.mutex(name).lock())
        await wait_for_waiters(holder, name, 1)
        spawn(second.mutex(name).lock())
        await wait_for_waiters(holder, name, 2)

        report = await within(client.why(node, name))

        assert (report.node, report.name) == (node, name)
        assert [(h.session_id, h.description) for h in report.holders] == [
            (holder.id, "the holder")
        ]
        assert report.holders[0].token > 0
        assert [(w.session_id, w.position) for w in report.waiters] == [
            (first.id, 1), (second.id, 2),
        ]  # fmt: skip
        assert (report.holders_total, report.waiters_total) == (1, 2)
        assert all(w.waiting_for is None or w.waiting_for >= 0 for w in report.waiters)
        page = await within(client.why(node, name, after=1, limit=1))
        assert [(w.session_id, w.position) for w in page.waiters] == [(second.id, 2)]
        if tenure.Capability.WAIT_CHAINS in client.capabilities:
            assert report.holders[0].waiting_for == ()
            assert [(x.name, x.session_id) for x in report.chain or ()] == [(name, holder.id)]
            assert [x.session_id for x in report.roots or ()] == [holder.id]
        else:  # (not known: said so, never guessed)
            assert report.holders[0].waiting_for is None
            assert (report.chain, report.roots) == (None, None)


@pytest.mark.requires(tenure.Capability.WAIT_CHAINS)
async def test_a_chain_of_three_names_the_root(client: tenure.Client, node: str) -> None:
    # C's holder waits for nothing; B's holder waits on C; A's holder waits on B.
    a_name, b_name, c_name = (unique(f"why-{x}") for x in "abc")
    async with (
        client.session(node, description="job a") as a,
        client.session(node, description="job b") as b,
        client.session(node, description="job c") as c,
        c.mutex(c_name),
    ):
        spawn(hold_then_wait(b, b_name, c_name))
        await wait_for_waiters(c, c_name, 1)
        spawn(hold_then_wait(a, a_name, b_name))
        await wait_for_waiters(c, b_name, 1)
        await wait_for_owner(c, a_name, a)

        report = await within(client.why(node, a_name))

        (holder,) = report.holders
        assert holder.session_id == a.id
        assert [(w.name, w.position) for w in holder.waiting_for or ()] == [(b_name, 1)]
        assert [(x.name, x.session_id) for x in report.chain or ()] == [
            (a_name, a.id), (b_name, b.id), (c_name, c.id),
        ]  # fmt: skip
        assert [(r.name, r.session_id, r.description) for r in report.roots or ()] == [
            (c_name, c.id, "job c")
        ]


async def hold_here_wait_there(
    here: tenure.Session, held: str, there: tenure.Session, wanted: str
) -> None:
    """Lock ``held`` through ``here``, then, in the same task, wait for ``wanted``
    through ``there`` (a session of another node; until cancelled)."""
    async with here.mutex(held), there.mutex(wanted):
        pass


@pytest.mark.requires(tenure.Capability.WAIT_CHAINS)
async def test_a_chain_crosses_nodes_through_one_tasks_sessions(
    client: tenure.Client, node: str, drop_at_end: DropAtEnd
) -> None:
    # One task of this process holds A through its session of one node and waits on B
    # through its session of another, where B's holder waits for nothing.
    other_node = drop_at_end(unique("why-other"))
    await client.create_node(other_node)
    a_name, b_name = unique("why-a"), unique("why-b")
    async with (
        client.session(node, description="worker here") as here,
        client.session(other_node, description="worker there") as there,
        client.session(other_node, description="b's holder") as holder,
        holder.mutex(b_name),
    ):
        spawn(hold_here_wait_there(here, a_name, there, b_name))
        await wait_for_waiters(holder, b_name, 1)

        report = await within(client.why(node, a_name))

        (held,) = report.holders
        assert held.session_id == here.id
        assert held.waiting_for == (tenure.WhyWait(other_node, b_name, 1),)
        assert report.chain == (
            tenure.WhyLink(node, a_name, here.id, (), (tenure.WhyWait(other_node, b_name, 1),)),
            tenure.WhyLink(other_node, b_name, holder.id, (), ()),
        )
        assert [(r.node, r.name, r.session_id) for r in report.roots or ()] == [
            (other_node, b_name, holder.id)
        ]


async def test_bad_input_is_refused(client: tenure.Client, node: str) -> None:
    with pytest.raises(NotFoundError):
        await client.why(node, unique("never-made"))
    with pytest.raises(InvalidArgumentError):
        await client.why(node, "m", limit=0)
    with pytest.raises(InvalidArgumentError):
        await client.why(node, "m", after=-1)
