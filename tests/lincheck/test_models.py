"""Each model on small histories whose verdict is known by hand: what it allows, and
the anomaly of each kind it must catch (a stale read, a double grant, a token
regression, a lost add, a doubled cas...)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tenure.testing import lincheck


def history(*rows: tuple[Any, ...], header: dict[str, Any] | None = None) -> lincheck.History:
    """Events as ``(process, type, f, value)`` or ``(process, type, f, value, key)``
    tuples, in real-time order."""
    lines = [json.dumps(header)] if header else []
    for row in rows:
        event = {"process": row[0], "type": row[1], "f": row[2], "value": row[3]}
        if len(row) > 4:
            event["key"] = row[4]
        lines.append(json.dumps(event))
    return lincheck.read_jsonl(lines)


L, N = lincheck.LINEARIZABLE, lincheck.NOT_LINEARIZABLE

CASES: dict[str, tuple[str, lincheck.History, str]] = {
    # -- register
    "a read of a concurrent write may see it or not": (
        "register",
        history(
            (0, "invoke", "write", 1),
            (1, "invoke", "read", None),
            (1, "ok", "read", None),
            (0, "ok", "write", 1),
            (1, "invoke", "read", None),
            (1, "ok", "read", 1),
        ),
        L,
    ),
    "a stale read after a write completed": (
        "register",
        history(
            (0, "invoke", "write", 1),
            (0, "ok", "write", 1),
            (0, "invoke", "write", 2),
            (0, "ok", "write", 2),
            (1, "invoke", "read", None),
            (1, "ok", "read", 1),
        ),
        N,
    ),
    "a read that goes back in time (new, then old)": (
        "register",
        history(
            (0, "invoke", "write", 1),
            (1, "invoke", "read", None),
            (1, "ok", "read", 1),
            (1, "invoke", "read", None),
            (1, "ok", "read", None),
            (0, "ok", "write", 1),
        ),
        N,
    ),
    "a cas that swapped, and one that rightly did not": (
        "register",
        history(
            (0, "invoke", "write", 1),
            (0, "ok", "write", 1),
            (0, "invoke", "cas", [1, 2]),
            (0, "ok", "cas", [1, 2]),
            (1, "invoke", "cas", [1, 3]),
            (1, "fail", "cas", [1, 3]),
            (1, "invoke", "read", None),
            (1, "ok", "read", 2),
        ),
        L,
    ),
    "a cas applied twice (both swapped from the same value)": (
        "register",
        history(
            (0, "invoke", "write", 1),
            (0, "ok", "write", 1),
            (0, "invoke", "cas", [1, 2]),
            (0, "ok", "cas", [1, 2]),
            (1, "invoke", "cas", [1, 3]),
            (1, "ok", "cas", [1, 3]),
        ),
        N,
    ),
    "a cas that failed although the value matched": (
        "register",
        history(
            (0, "invoke", "write", 1),
            (0, "ok", "write", 1),
            (1, "invoke", "cas", [1, 3]),
            (1, "fail", "cas", [1, 3]),
        ),
        N,
    ),
    "an unknown write may show later, or never": (
        "register",
        history(
            (0, "invoke", "write", 1),
            (0, "info", "write", 1),
            (1, "invoke", "read", None),
            (1, "ok", "read", None),
            (1, "invoke", "read", None),
            (1, "ok", "read", 1),
        ),
        L,
    ),
    "an unknown write cannot be undone once seen": (
        "register",
        history(
            (0, "invoke", "write", 1),
            (0, "info", "write", 1),
            (1, "invoke", "read", None),
            (1, "ok", "read", 1),
            (1, "invoke", "read", None),
            (1, "ok", "read", None),
        ),
        N,
    ),
    "an invoke never completed is unknown": (
        "register",
        history(
            (0, "invoke", "write", 7),
            (1, "invoke", "read", None),
            (1, "ok", "read", 7),
        ),
        L,
    ),
    # -- counter
    "adds answering their totals": (
        "counter",
        history(
            (0, "invoke", "add", 2),
            (1, "invoke", "add", 3),
            (1, "ok", "add", 3),
            (0, "ok", "add", 5),
            (2, "invoke", "read", None),
            (2, "ok", "read", 5),
        ),
        L,
    ),
    "a lost add": (
        "counter",
        history(
            (0, "invoke", "add", 2),
            (0, "ok", "add", 2),
            (1, "invoke", "add", 3),
            (1, "ok", "add", 3),
        ),
        N,
    ),
    "a doubled add (a retry applied twice)": (
        "counter",
        history(
            (0, "invoke", "add", 2),
            (0, "ok", "add", 2),
            (1, "invoke", "read", None),
            (1, "ok", "read", 4),
        ),
        N,
    ),
    "an unknown add may have happened": (
        "counter",
        history(
            (0, "invoke", "add", 2),
            (0, "info", "add", 2),
            (1, "invoke", "add", 1),
            (1, "ok", "add", 3),
        ),
        L,
    ),
    # -- mutex
    "grants one after another, tokens growing": (
        "mutex",
        history(
            (0, "invoke", "acquire", None),
            (0, "ok", "acquire", 1),
            (1, "invoke", "acquire", None),
            (0, "invoke", "release", 1),
            (0, "ok", "release", 1),
            (1, "ok", "acquire", 2),
        ),
        L,
    ),
    "a double grant": (
        "mutex",
        history(
            (0, "invoke", "acquire", None),
            (0, "ok", "acquire", 1),
            (1, "invoke", "acquire", None),
            (1, "ok", "acquire", 2),
        ),
        N,
    ),
    "a token regression": (
        "mutex",
        history(
            (0, "invoke", "acquire", None),
            (0, "ok", "acquire", 5),
            (0, "invoke", "release", 5),
            (0, "ok", "release", 5),
            (1, "invoke", "acquire", None),
            (1, "ok", "acquire", 4),
        ),
        N,
    ),
    "a loss frees the lock somewhere in its window": (
        "mutex",
        history(
            (0, "invoke", "acquire", None),
            (0, "ok", "acquire", 1),
            (0, "invoke", "lost", 1),  # its last confirmation
            (1, "invoke", "acquire", None),
            (1, "ok", "acquire", 2),
            (0, "ok", "lost", 1),  # told later
        ),
        L,
    ),
    "a grant before the holder's last confirmation (etcd #11456's class)": (
        "mutex",
        history(
            (0, "invoke", "acquire", None),
            (0, "ok", "acquire", 1),
            (1, "invoke", "acquire", None),
            (1, "ok", "acquire", 2),
            (0, "invoke", "lost", 1),  # confirmed after the other was granted
            (0, "ok", "lost", 1),
        ),
        N,
    ),
    "a holder killed unheard: its loss left unknown": (
        "mutex",
        history(
            (0, "invoke", "acquire", None),
            (0, "ok", "acquire", 1),
            (0, "invoke", "lost", 1),
            (1, "invoke", "acquire", None),
            (1, "ok", "acquire", 2),
        ),
        L,
    ),
    "a release that failed while the lock was still held": (
        "mutex",
        history(
            (0, "invoke", "acquire", None),
            (0, "ok", "acquire", 1),
            (0, "invoke", "release", 1),
            (0, "fail", "release", 1),
        ),
        N,
    ),
    "the holder read while it holds, nobody after its release": (
        "mutex",
        history(
            (0, "invoke", "acquire", None),
            (0, "ok", "acquire", 1),
            (1, "invoke", "holders", None),
            (1, "ok", "holders", [1]),
            (0, "invoke", "release", 1),
            (0, "ok", "release", 1),
            (1, "invoke", "holders", None),
            (1, "ok", "holders", []),
        ),
        L,
    ),
    "a holder read after its release (a stale read)": (
        "mutex",
        history(
            (0, "invoke", "acquire", None),
            (0, "ok", "acquire", 1),
            (0, "invoke", "release", 1),
            (0, "ok", "release", 1),
            (1, "invoke", "holders", None),
            (1, "ok", "holders", [1]),
        ),
        N,
    ),
    "nobody read while a grant is held": (
        "mutex",
        history(
            (0, "invoke", "acquire", None),
            (0, "ok", "acquire", 1),
            (1, "invoke", "holders", None),
            (1, "ok", "holders", []),
        ),
        N,
    ),
    "a holder nobody heard of: an unknown grant, the last token": (
        "mutex",
        history(
            (0, "invoke", "acquire", None),
            (0, "ok", "acquire", 1),
            (0, "invoke", "release", 1),
            (0, "ok", "release", 1),
            (1, "invoke", "acquire", None),  # its answer lost
            (2, "invoke", "holders", None),
            (2, "ok", "holders", [2]),
            (3, "invoke", "acquire", None),
            (3, "ok", "acquire", 2),  # after the unknown grant 2: its token cannot be 2
        ),
        N,
    ),
    "a holder nobody heard of, then a later token": (
        "mutex",
        history(
            (0, "invoke", "acquire", None),
            (0, "ok", "acquire", 1),
            (0, "invoke", "release", 1),
            (0, "ok", "release", 1),
            (1, "invoke", "acquire", None),  # its answer lost
            (2, "invoke", "holders", None),
            (2, "ok", "holders", [2]),
            (3, "invoke", "acquire", None),
            (3, "ok", "acquire", 3),  # the unknown hold expired meanwhile
        ),
        L,
    ),
    "a holder nobody heard of, read twice": (
        "mutex",
        history(
            (1, "invoke", "acquire", None),  # its answer lost
            (2, "invoke", "holders", None),
            (2, "ok", "holders", [7]),
            (2, "invoke", "holders", None),
            (2, "ok", "holders", [7]),
        ),
        L,
    ),
    "a holder nobody heard of, seen again after it ended": (
        "mutex",
        history(
            (1, "invoke", "acquire", None),  # its answer lost
            (2, "invoke", "holders", None),
            (2, "ok", "holders", [7]),
            (2, "invoke", "holders", None),
            (2, "ok", "holders", []),
            (2, "invoke", "holders", None),
            (2, "ok", "holders", [7]),
        ),
        N,
    ),
    "a mutex read with two holders": (
        "mutex",
        history(
            (0, "invoke", "holders", None),
            (0, "ok", "holders", [3, 4]),
        ),
        N,
    ),
    # -- semaphore (limit 2)
    "two holders of a semaphore of two": (
        "semaphore",
        history(
            (0, "invoke", "acquire", 1),
            (0, "ok", "acquire", 1),
            (1, "invoke", "acquire", 1),
            (1, "ok", "acquire", 2),
            header={"limit": 2},
        ),
        L,
    ),
    "three tokens out of two": (
        "semaphore",
        history(
            (0, "invoke", "acquire", 1),
            (0, "ok", "acquire", 1),
            (1, "invoke", "acquire", 2),
            (1, "ok", "acquire", 2),
            header={"limit": 2},
        ),
        N,
    ),
    "the holders of a semaphore, one of them unheard of": (
        "semaphore",
        history(
            (0, "invoke", "acquire", 1),
            (0, "ok", "acquire", 1),
            (1, "invoke", "acquire", 1),  # its answer lost
            (2, "invoke", "holders", None),
            (2, "ok", "holders", [1, 2]),
            header={"limit": 2},
        ),
        L,
    ),
    "a semaphore's holder missing from a read": (
        "semaphore",
        history(
            (0, "invoke", "acquire", 1),
            (0, "ok", "acquire", 1),
            (1, "invoke", "acquire", 1),
            (1, "ok", "acquire", 2),
            (2, "invoke", "holders", None),
            (2, "ok", "holders", [2]),
            header={"limit": 2},
        ),
        N,
    ),
    # -- membership
    "members as joined and left": (
        "membership",
        history(
            (0, "invoke", "join", "a"),
            (0, "ok", "join", "a"),
            (1, "invoke", "join", "b"),
            (2, "invoke", "members", None),
            (2, "ok", "members", ["a"]),
            (1, "ok", "join", "b"),
            (0, "invoke", "leave", "a"),
            (0, "ok", "leave", "a"),
            (2, "invoke", "members", None),
            (2, "ok", "members", ["b"]),
        ),
        L,
    ),
    "a member seen after it left": (
        "membership",
        history(
            (0, "invoke", "join", "a"),
            (0, "ok", "join", "a"),
            (0, "invoke", "leave", "a"),
            (0, "ok", "leave", "a"),
            (2, "invoke", "members", None),
            (2, "ok", "members", ["a"]),
        ),
        N,
    ),
    # -- kv, and keys checked apart
    "keys are independent": (
        "kv",
        history(
            (0, "invoke", "put", "x", "k1"),
            (0, "ok", "put", "x", "k1"),
            (1, "invoke", "get", None, "k2"),
            (1, "ok", "get", "", "k2"),
            (1, "invoke", "append", "y", "k1"),
            (1, "ok", "append", "y", "k1"),
            (0, "invoke", "get", None, "k1"),
            (0, "ok", "get", "xy", "k1"),
        ),
        L,
    ),
    "an append lost on one key": (
        "kv",
        history(
            (0, "invoke", "put", "x", "k1"),
            (0, "ok", "put", "x", "k1"),
            (1, "invoke", "append", "y", "k1"),
            (1, "ok", "append", "y", "k1"),
            (0, "invoke", "get", None, "k1"),
            (0, "ok", "get", "x", "k1"),
        ),
        N,
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_verdict(case: str) -> None:
    model, events, expected = CASES[case]
    result = lincheck.check(events, model)
    assert result.verdict == expected, result.explain()


def test_a_violation_names_the_key_the_prefix_and_the_concurrent_operations() -> None:
    _, events, _ = CASES["an append lost on one key"]
    result = lincheck.check(events, "kv")
    explained = result.explain()
    assert "key 'k1': not linearizable" in explained
    assert "the longest linearizable prefix: 2 operation(s)" in explained
    assert 'could not linearize [line 5] p0 get() -> ok "x"' in explained
    data = result.to_dict()
    assert (data["verdict"], data["key"], data["checked_operations"]) == (N, "k1", 3)


def test_a_linearizable_history_comes_with_its_linearization() -> None:
    _, events, _ = CASES["a loss frees the lock somewhere in its window"]
    result = lincheck.check(events, "mutex")
    [key] = result.keys
    order = [(op.f, op.process) for op, _ in key.linearization]
    assert order == [("acquire", 0), ("lost", 0), ("acquire", 1)]
    assert key.linearization[-1][1] == (frozenset({(2, 1)}), 2, 1, None)
