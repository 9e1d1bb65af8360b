"""Protocol version 6: the asking task of Acquire and AcquireAll, NodeDescription's
broken deadlocks, DEADLOCK; a version-5 peer is served the layouts it knows."""

from __future__ import annotations

from tenure._core import Acquire, AcquireAll, DescribeNode, NodeConfig, NodeDescription
from tenure._core.values import BrokenDeadlock
from tenure._protocol import Hello, Reply, Request, Welcome
from tenure._protocol.older_peers import for_version
from tenure.errors import (
    AcquireCancelledError,
    DeadlockError,
    ErrorCode,
    LostError,
    TenureError,
    code_of,
    error_from_code,
)
from tests.protocol.helpers import ConnectionPair, message_of, wire_of

ACQUIRE = Acquire(5, "a", 1, 9)
CYCLE = "session 5 (task 3) waits for 'b' held by session 7 (task 1), which waits ..."
DESCRIPTION = NodeDescription("n", NodeConfig(), 2, 3, (BrokenDeadlock(1.5e9, 5, 3, CYCLE),))


def test_an_acquire_of_no_known_task_is_byte_for_byte_version_5s() -> None:
    assert wire_of(Request(1, ACQUIRE)) == [2, 1, [21, 5, "a", 1, 9, b"", None, False, None, 0]]


def test_the_task_trails_acquire_and_acquire_all() -> None:
    task = Acquire(5, "a", 1, 9, task=3)
    assert wire_of(Request(1, task))[2][-2:] == [False, 3]  # keep_place, then task
    assert message_of(wire_of(Request(1, task))) == Request(1, task)
    all_or_none = AcquireAll(5, ("a", "b"), (0, 0), (1, 2), 1, task=4)
    assert wire_of(Request(2, all_or_none))[2][-1] == 4
    assert message_of(wire_of(Request(2, all_or_none))) == Request(2, all_or_none)
    plain = AcquireAll(5, ("a", "b"), (0, 0), (1, 2), 1)
    assert len(wire_of(Request(2, plain))[2]) == 10  # version 5's layout: no task


def test_a_version_5_peer_is_sent_no_task() -> None:
    task = Request(1, Acquire(5, "a", 1, 9, task=3))
    assert for_version(task, 5) == Request(1, ACQUIRE)
    assert for_version(task, 6) is task
    pair = ConnectionPair()
    pair.handshake(Hello(version=5), Welcome(version=5))
    [received] = pair.send(pair.client, task)
    assert received == Request(1, ACQUIRE)
    all_or_none = Request(2, AcquireAll(5, ("a",), (0,), (1,), 1, task=3))
    [received] = pair.send(pair.client, all_or_none)
    assert received == Request(2, AcquireAll(5, ("a",), (0,), (1,), 1))


def test_node_description_carries_the_broken_deadlocks() -> None:
    reply = Reply(1, DESCRIPTION)
    assert wire_of(reply)[2][-1] == [[1.5e9, 5, 3, CYCLE]]
    assert message_of(wire_of(reply)) == reply
    quiet = Reply(1, NodeDescription("n", NodeConfig(), 2, 3))
    assert len(wire_of(quiet)[2]) == 5  # [3, name, config, sessions, semaphores]


def test_a_version_5_peer_gets_the_description_it_knows() -> None:
    pair = ConnectionPair()
    pair.handshake(Hello(version=5), Welcome(version=5))
    pair.send(pair.client, Request(1, DescribeNode("n")))
    [received] = pair.send(pair.server, Reply(1, DESCRIPTION))
    assert received == Reply(1, NodeDescription("n", NodeConfig(), 2, 3))


def test_deadlock_is_code_27() -> None:
    assert int(ErrorCode.DEADLOCK) == 27
    error = error_from_code(27, CYCLE)
    assert type(error) is DeadlockError
    assert code_of(error) is ErrorCode.DEADLOCK
    # Its own branch of the tree: no handler of a withdrawn wait or of a loss takes it.
    assert not isinstance(error, AcquireCancelledError | LostError)
    assert isinstance(error, TenureError)
