"""The leader runner: ``client.lead(node, name, work)`` keeps leading through losses.

Each ``work`` the tests hand a runner records its term (its runner, token, session,
when it started and ended, and how: returned or cancelled, with the leadership's
loss), and waits until the test lets it return. What they check: a term ends with
the loss of its leadership or session (``work`` cancelled at once) and the runner
campaigns again, in a new session if the old one is gone, with a greater token; no
runner ever runs two terms at once, and two runners' terms overlap only where the
earlier one was lost (it learns of that later than the store decided it, and its
smaller token is what a fenced resource refuses); ``work`` returning resigns, and
then the runner campaigns again behind the others (``requeue``) or returns; ``work``
raising resigns and propagates; cancelling the runner resigns and closes its
session; a runner killed by ``kill -9`` in another process is followed once its
session's recovery window has passed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import pytest

import tenure
from tenure.errors import (
    InvalidArgumentError,
    LeaderChangedError,
    LeaseLostError,
    LostError,
    SessionExpiredError,
)

from .harness import Expire, MakeClient
from .processes import Processes
from .support import PATIENCE, eventually, spawn, wait_for_waiters, waiters, within

#: The recovery window of the node in the ``kill -9`` test, seconds (etcd's least).
SHORT_WINDOW = 2.0

#: A runner in a child process: prints "leading TOKEN SESSION" when a term starts.
CHILD_RUNNER = """
import asyncio, sys
import tenure

async def main():
    url, node, name = sys.argv[1:4]
    async with tenure.connect(url) as client:
        async def work(leadership):
            print("leading", leadership.token, leadership.session.id, flush=True)
            await asyncio.Event().wait()
        await client.lead(node, name, work, data=b"child")

asyncio.run(main())
"""


@dataclass
class Term:
    """One term of one runner, as its ``work`` saw it."""

    runner: str
    leadership: tenure.Leadership
    started: float
    ended: float | None = None
    #: "returned" (the test let it) or "cancelled" (a loss, or the runner's cancel).
    how: str = ""
    #: The leadership's loss when its work was cancelled (None: not lost).
    lost: LostError | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def token(self) -> int:
        return self.leadership.token

    @property
    def session(self) -> tenure.Session:
        session = self.leadership.session
        assert isinstance(session, tenure.Session)
        return session

    def finish(self) -> None:
        """Let its work return."""
        self.done.set()


class TermRecorder:
    """The terms of every runner of a test, in the order they started."""

    def __init__(self) -> None:
        self.terms: list[Term] = []
        self._grew = asyncio.Event()  # set (and replaced) when a term starts

    def work(self, runner: str) -> Callable[[tenure.Leadership], Awaitable[None]]:
        """A ``work`` for the runner named ``runner``: records its term, waits for finish()."""
        loop = asyncio.get_running_loop()

        async def work(leadership: tenure.Leadership) -> None:
            term = Term(runner, leadership, loop.time())
            self.terms.append(term)
            self._grew.set()
            self._grew = asyncio.Event()
            try:
                await term.done.wait()
                term.how = "returned"
            except asyncio.CancelledError:
                term.how, term.lost = "cancelled", leadership.lost_reason
                raise
            finally:
                term.ended = loop.time()

        return work

    async def term(self, number: int, patience: float = PATIENCE) -> Term:
        """The ``number``-th term (from 1), once it has started."""
        try:
            async with asyncio.timeout(patience):
                while len(self.terms) < number:
                    await self._grew.wait()
        except TimeoutError:
            raise AssertionError(f"term {number} did not start: {self.terms}") from None
        return self.terms[number - 1]

    async def ended(self, term: Term) -> None:
        """Until ``term``'s work has ended."""

        async def over() -> bool:
            return term.ended is not None

        await eventually(over, f"the end of {term.runner}'s term {term.token}")

    def check(self) -> None:
        """Tokens grow term by term; a runner's terms never overlap; two runners' terms
        overlap only where the earlier one was lost."""
        tokens = [term.token for term in self.terms]
        assert tokens == sorted(set(tokens)), f"tokens must grow from term to term: {tokens}"
        for earlier_index, earlier in enumerate(self.terms):
            for later in self.terms[earlier_index + 1 :]:
                if earlier.ended is not None and earlier.ended <= later.started:
                    continue
                assert earlier.runner != later.runner, f"one runner ran two terms: {earlier}"
                overlap = (
                    f"{later.runner}'s term {later.token} started while {earlier.runner}'s "
                    f"term {earlier.token} ran, and that one was not lost"
                )
                assert earlier.how == "cancelled", overlap
                assert earlier.lost is not None, overlap


async def stop(runner: asyncio.Task[None]) -> None:
    """Cancel a runner and wait until it has resigned and closed its session."""
    runner.cancel()
    with pytest.raises(asyncio.CancelledError):
        await within(runner, "the runner's end")


async def live_sessions(client: tenure.Client, node: str) -> list[int]:
    return [summary.session_id for summary in await client.list_sessions(node)]


async def test_work_runs_while_leader_and_without_requeue_lead_returns_after_it(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    recorder = TermRecorder()
    work = recorder.work("a")
    running = spawn(client.lead(node, "scheduler", work, data=b"host-a", requeue=False))
    term = await recorder.term(1)
    observer = await client2.session(node)
    leader = await observer.election("scheduler").leader()
    assert leader is not None
    assert (leader.data, leader.session_id) == (b"host-a", term.session.id)
    assert leader.token == term.token

    term.finish()

    await within(running)  # it returns
    assert term.how == "returned"
    assert await observer.election("scheduler").leader() is None  # it resigned
    assert term.session.closed
    assert term.session.id not in await live_sessions(client2, node)


@pytest.mark.requires(tenure.Capability.FENCING_TOKENS, tenure.Capability.FIFO)
async def test_requeue_resigns_and_campaigns_again_behind_the_next_candidate(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    recorder = TermRecorder()
    observer = await client2.session(node)
    a = spawn(client.lead(node, "scheduler", recorder.work("a"), data=b"a"))
    first = await recorder.term(1)
    b = spawn(client2.lead(node, "scheduler", recorder.work("b"), data=b"b"))
    await wait_for_waiters(observer, "scheduler", 1)

    first.finish()  # a's work returns: it resigns, b leads, a waits behind b
    second = await recorder.term(2)
    assert (second.runner, first.how) == ("b", "returned")
    assert second.token > first.token
    assert await wait_for_waiters(observer, "scheduler", 1) == [first.session.id]

    second.finish()
    third = await recorder.term(3)
    assert (third.runner, third.session.id) == ("a", first.session.id)  # the same session
    assert third.token > second.token
    await stop(a)
    await stop(b)
    recorder.check()


async def test_a_killed_session_cancels_work_and_the_runner_leads_again_in_a_new_session(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    recorder = TermRecorder()
    running = spawn(client.lead(node, "scheduler", recorder.work("a"), requeue=False))
    first = await recorder.term(1)

    await client2.kill_session(node, first.session.id)

    second = await recorder.term(2)
    assert first.how == "cancelled"
    assert isinstance(first.lost, SessionExpiredError)
    assert second.session.id != first.session.id
    assert second.token > first.token
    # A loss is not the end of work: without requeue the runner went on until now.
    assert not running.done()
    second.finish()
    await within(running)  # it returns
    recorder.check()


async def test_an_expired_session_cancels_work_and_the_runner_leads_again_in_a_new_session(
    client: tenure.Client, node: str, expire: Expire
) -> None:
    recorder = TermRecorder()
    running = spawn(client.lead(node, "scheduler", recorder.work("a"), recovery_window=15.0))
    first = await recorder.term(1)
    assert first.session.recovery_window == 15.0

    await expire(first.session)

    second = await recorder.term(2)
    assert (first.how, type(first.lost)) == ("cancelled", SessionExpiredError)
    assert second.session.id != first.session.id
    assert second.session.recovery_window == 15.0
    assert second.token > first.token
    await stop(running)
    recorder.check()


async def test_a_forced_delete_of_the_election_ends_the_term_and_it_campaigns_again(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    recorder = TermRecorder()
    running = spawn(client.lead(node, "scheduler", recorder.work("a")))
    first = await recorder.term(1)
    admin = await client2.session(node)

    await admin.semaphore("scheduler").delete(force=True)

    second = await recorder.term(2)
    assert (first.how, type(first.lost)) == ("cancelled", LeaderChangedError)
    assert second.session.id == first.session.id  # the session lived on
    assert second.token > first.token
    await stop(running)


@pytest.mark.requires(tenure.Capability.FENCING_TOKENS)
async def test_never_two_works_at_once_through_handovers_and_killed_sessions(
    client: tenure.Client, make_client: MakeClient, node: str
) -> None:
    recorder = TermRecorder()
    clients = [client, await make_client(), await make_client()]
    observer = await client.session(node)
    runners = [
        spawn(each.lead(node, "scheduler", recorder.work(f"r{i}"), data=f"r{i}".encode()))
        for i, each in enumerate(clients)
    ]
    for number in range(1, 10):
        term = await recorder.term(number)
        # The two others wait (the last leader queued again) before this term ends.
        await wait_for_waiters(observer, "scheduler", 2)
        if number % 3 == 0:
            await client.kill_session(node, term.session.id)  # a loss
            await recorder.ended(term)  # its work cancelled (by the loss, check() says)
        else:
            term.finish()  # a handover
    await recorder.term(10)
    for runner in runners:
        await stop(runner)

    recorder.check()
    losses = [term for term in recorder.terms if term.how == "cancelled" and term.lost]
    assert [term.token for term in losses] == [recorder.terms[i].token for i in (2, 5, 8)]
    assert all(isinstance(term.lost, SessionExpiredError) for term in losses)
    if tenure.Capability.FIFO in client.capabilities:
        # Each candidate leads once in turn: one that resigned or lost waits behind
        # the two others, who were waiting already.
        # (The ten terms driven: stopping the runners may grant one or two more.)
        names = [term.runner for term in recorder.terms[:10]]
        seen = [(t.runner, t.token, t.session.id, t.how) for t in recorder.terms]
        assert names[3:] == names[:-3], "; ".join(map(str, seen))


async def test_work_raising_resigns_and_the_error_propagates(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    recorder = TermRecorder()
    observer = await client2.session(node)
    fail = asyncio.Event()

    async def failing(leadership: tenure.Leadership) -> None:
        await fail.wait()
        raise ValueError(f"a bug in term {leadership.token}")

    a = spawn(client.lead(node, "scheduler", failing, data=b"a"))
    await eventually(lambda: _leads(observer, b"a"), "a leading")
    b = spawn(client2.lead(node, "scheduler", recorder.work("b")))
    await wait_for_waiters(observer, "scheduler", 1)

    fail.set()

    with pytest.raises(ValueError, match="a bug in term"):
        await within(a)
    second = await recorder.term(1)  # a resigned: the next candidate leads
    assert second.runner == "b"
    await eventually(lambda: _gone(client2, node, observer, second), "a's session closed")
    await stop(b)


async def test_a_loss_of_something_else_work_holds_is_its_error_not_the_terms_end(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    admin = await client2.session(node)
    holding = asyncio.Event()

    async def work(leadership: tenure.Leadership) -> None:
        async with client.session(node) as own, own.mutex("job"):
            holding.set()
            await asyncio.Event().wait()  # until the lock is lost

    running = spawn(client.lead(node, "scheduler", work))
    await within(holding.wait(), "work holding its lock")

    await admin.semaphore("job").delete(force=True)

    # Its lock's loss raised out of work while leadership lived: work failed.
    with pytest.raises(LeaseLostError):
        await within(running)
    assert await admin.election("scheduler").leader() is None  # it resigned


async def test_cancelling_the_runner_resigns_and_closes_its_session(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    recorder = TermRecorder()
    observer = await client2.session(node)
    a = spawn(client.lead(node, "scheduler", recorder.work("a")))
    first = await recorder.term(1)
    b = spawn(client2.lead(node, "scheduler", recorder.work("b")))
    await wait_for_waiters(observer, "scheduler", 1)

    await stop(a)  # while leading

    assert (first.how, first.lost) == ("cancelled", None)  # cancelled, not lost
    second = await recorder.term(2)
    assert second.runner == "b"
    assert first.session.closed
    assert first.session.id not in await live_sessions(client2, node)

    c = spawn(client.lead(node, "scheduler", recorder.work("c")))
    await wait_for_waiters(observer, "scheduler", 1)
    await stop(c)  # while campaigning: its campaign is withdrawn

    await eventually(lambda: _no_waiters(observer), "c's campaign withdrawn")
    assert len(recorder.terms) == 2
    await stop(b)


async def test_a_runner_killed_by_sigkill_is_followed_after_the_recovery_window(
    client: tenure.Client, client2: tenure.Client, node: str, processes: Processes
) -> None:
    await client.alter_node(node, recovery_window=SHORT_WINDOW)
    child = await processes.python(CHILD_RUNNER, node, "scheduler", what="a runner")
    _, child_token, child_session = (await child.line("leading")).split()
    recorder = TermRecorder()
    follower = spawn(client2.lead(node, "scheduler", recorder.work("follower")))
    observer = await client.session(node)
    await wait_for_waiters(observer, "scheduler", 1)

    await child.kill()

    term = await recorder.term(1, patience=SHORT_WINDOW + 2 * PATIENCE)
    assert term.token > int(child_token)
    assert int(child_session) not in await live_sessions(client, node)
    leader = await observer.election("scheduler").leader()
    assert leader is not None
    assert (leader.session_id, leader.token) == (term.session.id, term.token)
    await stop(follower)


async def test_bad_arguments_are_refused_before_anything_is_sent(
    client: tenure.Client, node: str
) -> None:
    async def work(leadership: tenure.Leadership) -> None:
        return None

    bad: list[tuple[dict[str, object], str]] = [
        ({"work": "not a function"}, "work"),
        ({"name": ""}, "semaphore name"),
        ({"node": ""}, "node name"),
        ({"data": "text"}, "data"),
        ({"requeue": "yes"}, "requeue"),
        ({"recovery_window": -1.0}, "recovery_window"),
        ({"description": 7}, "description"),
    ]
    for changes, named in bad:
        arguments: dict[str, object] = {"node": node, "name": "scheduler", "work": work, **changes}
        with pytest.raises(InvalidArgumentError, match=named):
            client.lead(**arguments).close()  # type: ignore[arg-type]
    assert await live_sessions(client, node) == []

    def not_async(leadership: tenure.Leadership) -> None:
        return None

    with pytest.raises(InvalidArgumentError, match="async"):
        await within(client.lead(node, "scheduler", not_async))  # type: ignore[arg-type]
    assert await live_sessions(client, node) == []  # it resigned and closed


async def _leads(session: tenure.Session, data: bytes) -> bool:
    leader = await session.election("scheduler").leader()
    return leader is not None and leader.data == data


async def _no_waiters(session: tenure.Session) -> bool:
    return await waiters(session, "scheduler") == []


async def _gone(client: tenure.Client, node: str, observer: tenure.Session, term: Term) -> bool:
    """Only ``term``'s session and the observer's are left."""
    return sorted(await live_sessions(client, node)) == sorted({observer.id, term.session.id})
