"""Listings read sorted indexes: a page's work is its own size, however large the state.

Work is counted, not timed: each index's ``looked_at`` is the number of keys its
pages read (:mod:`tenure._core.sorted_keys`). A view whose pattern starts with a
wildcard (its range is every node) is read a budget of names at a time (issue 37).
The 100,000 nodes are made once for the module (``big``: the tests only read them;
``tests/tiers.py`` keeps the file on one xdist worker).
"""

from __future__ import annotations

import fnmatch
import random

import pytest

from tenure._core import (
    CloseSession,
    CreateNode,
    CreateSemaphore,
    CreateSession,
    DeleteSemaphore,
    DropNode,
    Engine,
    ListNodes,
    ListSemaphores,
    ListSessions,
    NodeConfig,
    Release,
)
from tenure._core.handlers.listing import visible_node_page, visible_node_slice
from tenure._core.invariants import check_invariants
from tenure._core.snapshot import dump, load
from tenure._core.sorted_keys import SortedKeys

from .support import KEY, acquire

BIG = 100_000
LIMIT = 10
#: A page of LIMIT keys reads at most this many: the page, and the key that ends it.
WORK_PER_PAGE = LIMIT + 1


@pytest.fixture(scope="module")
def big() -> Engine:
    """100,000 nodes (created in a shuffled order), and on node ``big`` 100,000
    semaphores and 2,000 sessions."""
    engine = Engine(max_nodes=BIG + 1)
    names = [f"n{i:06d}" for i in range(BIG)]
    random.Random(7).shuffle(names)
    for name in names:
        engine.apply(CreateNode(name), 0.0)
    engine.apply(CreateNode("big", NodeConfig(max_semaphores=BIG, max_sessions=2_000)), 0.0)
    sid = 0
    for _ in range(2_000):
        sid = engine.apply(CreateSession("big", KEY), 0.0).session_id
    semaphores = [f"s{i:06d}" for i in range(BIG)]
    random.Random(8).shuffle(semaphores)
    for name in semaphores:
        engine.apply(CreateSemaphore(sid, name, 1), 0.0)
    return engine


def test_a_node_page_reads_its_page_only(big: Engine) -> None:
    index = big.node_index
    for after in ("", "n000000", "n050000", "n099990", "n099999", "zzz"):
        before = index.looked_at
        page = big.apply(ListNodes(after, LIMIT), 0.0).names
        assert index.looked_at - before <= WORK_PER_PAGE
        assert list(page) == sorted(name for name in big.nodes if name > after)[:LIMIT]


def test_a_semaphore_page_reads_its_page_only_with_or_without_a_prefix(big: Engine) -> None:
    index = big.nodes["big"].semaphore_index
    cases = [("", ""), ("", "s050000"), ("s0500", ""), ("s0500", "s05005"), ("s0999", "s099995")]
    cases += [("s1", ""), ("t", ""), ("s0500", "s0501")]
    for prefix, after in cases:
        before = index.looked_at
        page = big.apply(ListSemaphores("big", prefix, after, LIMIT), 0.0).semaphores
        assert index.looked_at - before <= WORK_PER_PAGE, (prefix, after)
        expected = sorted(n for n in big.nodes["big"].semaphores if n > after)
        names = [summary.name for summary in page]
        assert names == [n for n in expected if n.startswith(prefix)][:LIMIT], (prefix, after)


def test_a_session_page_reads_its_page_only(big: Engine) -> None:
    index = big.nodes["big"].session_index
    ids = sorted(big.nodes["big"].sessions)
    for after in (0, ids[1_000], ids[-3], ids[-1]):
        before = index.looked_at
        page = big.apply(ListSessions("big", after, LIMIT), 0.0).sessions
        assert index.looked_at - before <= WORK_PER_PAGE
        assert [s.session_id for s in page] == [sid for sid in ids if sid > after][:LIMIT]


def test_a_limited_view_reads_the_ranges_of_its_patterns_only(big: Engine) -> None:
    # A token limited to n04999* and n077777 sees 11 of 100,000 nodes: a page of 1
    # reads at most 2 names, and paging through its whole view reads each name of
    # those ranges once (not the 100,000 nodes once per page).
    patterns = ("n04999*", "n077777")
    prefixes = ("n04999", "n077777")

    def may_see(name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, p) for p in patterns)

    index = big.node_index
    before = index.looked_at
    seen: list[str] = []
    after = ""
    while True:
        start = index.looked_at
        page = visible_node_page(big, after, 1, prefixes, may_see).names
        assert index.looked_at - start <= 2
        if not page:
            break
        seen += page
        after = page[-1]
    assert seen == [f"n04999{i}" for i in range(10)] + ["n077777"]
    assert index.looked_at - before <= 2 * (len(seen) + 1)


def test_a_wildcard_led_view_of_100000_nodes_is_read_a_budget_of_names_at_a_time(
    big: Engine,
) -> None:
    # "*7777": its prefix is "", the range of every node (issue 37: a token's view
    # like "*-jobs"). Each slice looks at no more than the budget's names; the slices,
    # joined, are the page one read would give.
    def may_see(name: str) -> bool:
        return fnmatch.fnmatchcase(name, "*7777")

    expected = sorted(name for name in big.nodes if may_see(name))
    assert len(expected) == 10  # n007777 ... n097777, spread over the whole range
    index = big.node_index
    budget = 1_000
    for limit in (1, 5, 1000):
        seen: list[str] = []
        after = ""
        while True:
            found: list[str] = []
            while True:  # one page, a slice at a time
                before = index.looked_at
                names, resume = visible_node_slice(
                    big, after, limit - len(found), ("",), may_see, budget
                )
                assert index.looked_at - before <= budget
                found += names
                if resume is None:
                    break
                after = resume
            assert len(found) <= limit
            seen += found
            if len(found) < limit:
                break
            after = found[-1]
        assert seen == expected, limit
        assert tuple(seen) == visible_node_page(big, "", 1000, ("",), may_see).names


def test_a_limited_view_is_what_its_patterns_match_whatever_they_are() -> None:
    # Overlapping, nested and wildcard-led patterns: the view is exactly the names
    # fnmatch lets through, sorted, and its pages join up.
    engine = Engine()
    names = ["a", "ab", "abc", "acb", "b", "jobs", "jobs-1", "jobs-12", "jobsx", "x[1]", "zz"]
    for name in names:
        engine.apply(CreateNode(name), 0.0)
    for patterns in (
        ("jobs", "jobs-*"),
        ("jobs*", "jobs-1*"),
        ("a*b", "x[[]*"),
        ("*b*",),
        ("?",),
        ("zz", "a", "nope*"),
    ):
        prefixes = tuple(p.split("*")[0].split("?")[0].split("[")[0] for p in patterns)

        def may_see(name: str, patterns: tuple[str, ...] = patterns) -> bool:
            return any(fnmatch.fnmatchcase(name, p) for p in patterns)

        expected = sorted(n for n in engine.nodes if may_see(n))
        for limit in (1, 2, 1000):
            seen: list[str] = []
            after = ""
            while page := visible_node_page(engine, after, limit, prefixes, may_see).names:
                assert len(page) <= limit
                seen += page
                after = page[-1]
            assert seen == expected, (patterns, limit)


def test_the_indexes_follow_every_change_and_a_restore() -> None:
    engine = Engine()
    for name in ("b", "a", "c"):
        engine.apply(CreateNode(name), 0.0)
    engine.apply(DropNode("b"), 0.0)
    sessions = [engine.apply(CreateSession("a", KEY), 0.0).session_id for _ in range(4)]
    engine.apply(CloseSession(sessions[1]), 0.0)
    sid = sessions[0]
    for name in ("m", "k", "z"):
        engine.apply(CreateSemaphore(sid, name, 1), 0.0)
    engine.apply(DeleteSemaphore(sid, "k"), 0.0)
    acquire(engine, sid, "lock", ephemeral=True)  # an ephemeral semaphore comes...
    assert engine.nodes["a"].semaphore_index.keys == ["lock", "m", "z"]
    engine.apply(Release(sid, "lock"), 0.0)  # ...and goes
    check_invariants(engine)
    assert engine.node_index.keys == ["a", "c"]
    assert engine.nodes["a"].semaphore_index.keys == ["m", "z"]
    assert engine.nodes["a"].session_index.keys == [sessions[0], *sessions[2:]]
    restored = load(dump(engine))
    check_invariants(restored)
    assert restored.node_index.keys == ["a", "c"]
    names = restored.apply(ListSemaphores("a", "", "", 10), 0.0).semaphores
    assert [s.name for s in names] == ["m", "z"]
    listed = restored.apply(ListSessions("a", 0, 10), 0.0).sessions
    assert [s.session_id for s in listed] == [sessions[0], *sessions[2:]]


def test_sorted_keys_add_and_discard_keep_order_and_ignore_repeats() -> None:
    keys: SortedKeys[int] = SortedKeys([5, 1])
    for key in (3, 9, 3, 0, 9):
        keys.add(key)
    keys.discard(4)
    keys.discard(5)
    assert keys.keys == [0, 1, 3, 9]
    assert keys.page(1, 2) == [3, 9]
    assert len(keys) == 4


def test_sorted_keys_agree_with_a_sorted_list_through_many_changes() -> None:
    # Enough keys for many runs (splits, emptied runs dropped), changed at random.
    rng = random.Random(3)
    keys: SortedKeys[int] = SortedKeys(rng.sample(range(20_000), 6_000))
    expected = set(keys.keys)
    for _ in range(30_000):
        key = rng.randrange(20_000)
        if rng.random() < 0.5:
            keys.add(key)
            expected.add(key)
        else:
            keys.discard(key)
            expected.discard(key)
    ordered = sorted(expected)
    assert keys.keys == ordered
    assert len(keys) == len(ordered)
    for after in (-1, 0, 777, 10_000, 19_999, 20_000):
        assert keys.page(after, 50) == [key for key in ordered if key > after][:50]


def test_sorted_keys_under_a_prefix_from_a_key_on_read_one_at_a_time() -> None:
    # What a walk that decides as it goes reads (the YDB face's resource scan): the
    # keys under a prefix from a bound, with it or after it, each counted as taken.
    keys: SortedKeys[str] = SortedKeys(["a", "a-b", "a/b", "a/c", "a0", "b"])
    assert list(keys.under("a/", "a/b")) == ["a/c"]
    assert list(keys.under("a/", "a/b", inclusive=True)) == ["a/b", "a/c"]
    assert list(keys.under("a", "a0", inclusive=True)) == ["a0"]
    assert list(keys.under("a/", "")) == ["a/b", "a/c"]  # (a bound before the range)
    keys.looked_at = 0
    walk = keys.under("", "")
    assert next(walk) == "a"
    assert keys.looked_at == 1  # nothing read ahead of what was taken
