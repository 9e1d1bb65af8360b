"""The sync leader runner: ``client.lead(node, name, work)`` with a plain ``work`` run in the
calling thread; a loss sets ``leadership.lost``, and the runner campaigns again once
``work`` has returned."""

from __future__ import annotations

import threading

import pytest

import tenure.sync
from tenure.errors import InvalidArgumentError, SessionExpiredError

from .conftest import wait_for_waiters

NODE = "app"


class StopLeadingError(Exception):
    """What a test's work raises to end its runner."""


def test_work_runs_in_the_calling_thread_and_without_requeue_lead_returns(
    shared_url: str,
) -> None:
    with tenure.sync.connect(shared_url) as client, tenure.sync.connect(shared_url) as other:
        client.create_node(NODE)
        observer = other.session(NODE)
        seen: list[tuple[int, int, object]] = []

        def work(leadership: tenure.sync.Leadership) -> None:
            assert isinstance(leadership, tenure.sync.Leadership)
            leader = observer.election("scheduler").leader()
            seen.append((threading.get_ident(), leadership.token, leader))

        client.lead(NODE, "scheduler", work, data=b"host-a", requeue=False)

        [(thread, token, leader)] = seen
        assert thread == threading.get_ident()
        assert isinstance(leader, tenure.LeaderState)
        assert (leader.data, leader.token, leader.is_me) == (b"host-a", token, False)
        assert observer.election("scheduler").leader() is None  # it resigned
        assert [s.session_id for s in other.list_sessions(NODE)] == [observer.id]


def test_a_loss_sets_lost_and_the_runner_leads_again_until_work_raises(shared_url: str) -> None:
    with tenure.sync.connect(shared_url) as client, tenure.sync.connect(shared_url) as admin:
        client.create_node(NODE)
        terms: list[tenure.sync.Leadership] = []

        def work(leadership: tenure.sync.Leadership) -> None:
            terms.append(leadership)
            if len(terms) == 1:
                admin.kill_session(NODE, leadership.session.id)
                # What a sync work does: watch the event (here, wait for it).
                assert leadership.lost.wait(10)
                assert isinstance(leadership.lost_reason, SessionExpiredError)
                return  # after a loss: the term counts as lost, not as done
            raise StopLeadingError(leadership.token)

        with pytest.raises(StopLeadingError):
            client.lead(NODE, "scheduler", work, requeue=False)

        first, second = terms
        assert second.token > first.token
        assert second.session.id != first.session.id  # a new session after the loss
        assert second.ended
        assert second.lost_reason is None  # resigned, not lost
        assert admin.list_sessions(NODE) == []


def test_requeue_hands_over_between_runners_in_two_threads(shared_url: str) -> None:
    with tenure.sync.connect(shared_url) as one, tenure.sync.connect(shared_url) as two:
        one.create_node(NODE)
        observer = two.session(NODE)
        order: list[tuple[str, int]] = []
        guard = threading.Lock()

        def runner(client: tenure.sync.Client, name: str) -> None:
            def work(leadership: tenure.sync.Leadership) -> None:
                with guard:
                    order.append((name, leadership.token))
                    count = len(order)
                if count >= 6:
                    raise StopLeadingError
                # Returning resigns: the other candidate, waiting, leads next.
                wait_for_waiters(observer, "scheduler", 1)

            with pytest.raises(StopLeadingError):
                client.lead(NODE, "scheduler", work)

        threads = [
            threading.Thread(target=runner, args=(one, "a")),
            threading.Thread(target=runner, args=(two, "b")),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert not any(thread.is_alive() for thread in threads)
        names = [name for name, _ in order]
        assert names[:6] in (["a", "b"] * 3, ["b", "a"] * 3), names
        # The sixth term's StopLeadingError ended one runner; the other led once more, alone.
        assert len(order) == 7
        tokens = [token for _, token in order]
        assert tokens == sorted(set(tokens))


def test_interrupt_in_work_resigns_and_closes(shared_url: str) -> None:
    with tenure.sync.connect(shared_url) as client:
        client.create_node(NODE)
        held: list[tenure.sync.Leadership] = []

        def work(leadership: tenure.sync.Leadership) -> None:
            held.append(leadership)
            raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            client.lead(NODE, "scheduler", work)
        assert held[0].ended
        session = held[0].session
        assert isinstance(session, tenure.sync.Session)
        assert session.closed
        assert client.list_sessions(NODE) == []


def test_bad_arguments_are_refused_at_once(client: tenure.sync.Client) -> None:
    with pytest.raises(InvalidArgumentError, match="work"):
        client.lead(NODE, "scheduler", "not a function")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="requeue"):
        client.lead(NODE, "scheduler", lambda leadership: None, requeue=1)  # type: ignore[arg-type]
    assert client.list_sessions(NODE) == []
