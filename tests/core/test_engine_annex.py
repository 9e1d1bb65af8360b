"""A node's annex: opaque bytes kept with a node under a key (SetNodeAnnex, GetNodeAnnex)."""

from __future__ import annotations

import random

import pytest

from tenure._core import (
    CreateNode,
    DescribeNode,
    DropNode,
    Engine,
    GetNodeAnnex,
    NodeConfig,
    SetNodeAnnex,
)
from tenure._core.invariants import check_invariants
from tenure._core.snapshot import dump, load
from tenure._core.values import MAX_ANNEX_BYTES, MAX_ANNEX_KEY_BYTES, MAX_ANNEX_KEYS
from tenure.errors import InvalidArgumentError, LimitExceededError, NotFoundError, TenureError

from .support import NODE, make_engine, open_session


def get(engine: Engine, key: str, node: str = NODE) -> bytes:
    return engine.apply(GetNodeAnnex(node, key), 0.0)


def test_set_get_overwrite_and_remove_with_empty_bytes() -> None:
    engine = make_engine()
    assert get(engine, "ydb") == b""  # unset reads as empty
    assert engine.apply(SetNodeAnnex(NODE, "ydb", b"\x00settings"), 0.0) is None
    assert get(engine, "ydb") == b"\x00settings"
    engine.apply(SetNodeAnnex(NODE, "ydb", b"other"), 0.0)
    assert get(engine, "ydb") == b"other"
    engine.apply(SetNodeAnnex(NODE, "more", b"m"), 0.0)
    engine.apply(SetNodeAnnex(NODE, "ydb", b""), 0.0)
    assert (get(engine, "ydb"), get(engine, "more")) == (b"", b"m")
    engine.apply(SetNodeAnnex(NODE, "more", b""), 0.0)
    assert engine.nodes[NODE].annex is None  # the last key gone: no dict kept
    engine.apply(SetNodeAnnex(NODE, "never-set", b""), 0.0)  # removing nothing is fine
    assert engine.nodes[NODE].annex is None
    check_invariants(engine)


def test_a_bytes_like_value_is_kept_as_bytes() -> None:
    engine = make_engine()
    engine.apply(SetNodeAnnex(NODE, "k", bytearray(b"ab")), 0.0)  # type: ignore[arg-type]
    value = get(engine, "k")
    assert type(value) is bytes
    assert value == b"ab"


def test_each_node_has_its_own_annex_and_describe_is_unchanged() -> None:
    engine = make_engine()
    engine.apply(CreateNode("other"), 0.0)
    before = engine.apply(DescribeNode(NODE), 0.0)
    engine.apply(SetNodeAnnex(NODE, "k", b"mine"), 0.0)
    assert get(engine, "k", "other") == b""
    assert engine.apply(DescribeNode(NODE), 0.0) == before


@pytest.mark.parametrize(
    "command", [SetNodeAnnex("missing", "k", b"v"), GetNodeAnnex("missing", "k")]
)
def test_a_missing_node_is_not_found(command: SetNodeAnnex | GetNodeAnnex) -> None:
    with pytest.raises(NotFoundError, match="missing"):
        make_engine().apply(command, 0.0)


@pytest.mark.parametrize(
    "key",
    ["", "a\nb", "\x00", 7, None, b"k", "k" * (MAX_ANNEX_KEY_BYTES + 1), "é" * 33, "\ud800"],
)
def test_a_bad_key_is_invalid_for_set_and_get(key: object) -> None:
    engine = make_engine()
    with pytest.raises(InvalidArgumentError, match="annex key"):
        engine.apply(SetNodeAnnex(NODE, key, b"v"), 0.0)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="annex key"):
        engine.apply(GetNodeAnnex(NODE, key), 0.0)  # type: ignore[arg-type]
    assert engine.nodes[NODE].annex is None


def test_a_key_of_exactly_the_longest_length_is_taken() -> None:
    engine = make_engine()
    ascii_key, wide_key = "k" * MAX_ANNEX_KEY_BYTES, "é" * (MAX_ANNEX_KEY_BYTES // 2)
    for key in (ascii_key, wide_key, "with space"):
        engine.apply(SetNodeAnnex(NODE, key, b"v"), 0.0)
        assert get(engine, key) == b"v"


@pytest.mark.parametrize("value", ["text", None, 5, [1]])
def test_a_value_that_is_not_bytes_is_invalid(value: object) -> None:
    engine = make_engine()
    with pytest.raises(InvalidArgumentError, match="must be bytes"):
        engine.apply(SetNodeAnnex(NODE, "k", value), 0.0)  # type: ignore[arg-type]


def test_the_value_size_limit_at_and_past_it() -> None:
    engine = make_engine()
    engine.apply(SetNodeAnnex(NODE, "k", b"x" * MAX_ANNEX_BYTES), 0.0)
    with pytest.raises(LimitExceededError, match=str(MAX_ANNEX_BYTES)):
        engine.apply(SetNodeAnnex(NODE, "k", b"y" * (MAX_ANNEX_BYTES + 1)), 0.0)
    assert get(engine, "k") == b"x" * MAX_ANNEX_BYTES  # rule 1: the failure changed nothing


def test_the_key_count_limit_at_and_past_it() -> None:
    engine = make_engine()
    for i in range(MAX_ANNEX_KEYS):
        engine.apply(SetNodeAnnex(NODE, f"k{i}", b"v"), 0.0)
    with pytest.raises(LimitExceededError, match=f"{MAX_ANNEX_KEYS} keys"):
        engine.apply(SetNodeAnnex(NODE, "one-more", b"v"), 0.0)
    assert get(engine, "one-more") == b""
    engine.apply(SetNodeAnnex(NODE, "k0", b"new"), 0.0)  # a key it has may still change
    engine.apply(SetNodeAnnex(NODE, "k1", b""), 0.0)  # and one removed makes room
    engine.apply(SetNodeAnnex(NODE, "one-more", b"v"), 0.0)
    assert (get(engine, "k0"), get(engine, "one-more")) == (b"new", b"v")
    assert len(engine.nodes[NODE].annex or {}) == MAX_ANNEX_KEYS
    check_invariants(engine)


def test_dropping_a_node_drops_its_annex_and_a_new_one_starts_empty() -> None:
    engine = make_engine()
    open_session(engine)
    engine.apply(SetNodeAnnex(NODE, "k", b"v"), 0.0)
    engine.apply(DropNode(NODE, force=True), 0.0)
    with pytest.raises(NotFoundError):
        get(engine, "k")
    engine.apply(CreateNode(NODE, NodeConfig()), 0.0)
    assert get(engine, "k") == b""
    assert engine.nodes[NODE].annex is None


def test_get_changes_nothing() -> None:
    engine = make_engine()
    engine.apply(SetNodeAnnex(NODE, "k", b"v"), 0.0)
    before = dump(engine)
    get(engine, "k")
    get(engine, "unset")
    assert dump(engine) == before


def _random_annex_command(rng: random.Random) -> SetNodeAnnex | GetNodeAnnex | DropNode:
    node = rng.choice(["a", "b"])
    key = rng.choice(["k", "l", "m", ""])
    roll = rng.random()
    if roll < 0.05:
        return DropNode(node, force=True)
    if roll < 0.3:
        return GetNodeAnnex(node, key)
    size = rng.choice([0, 1, 5, MAX_ANNEX_BYTES, MAX_ANNEX_BYTES + 1])
    return SetNodeAnnex(node, key, bytes([rng.randrange(256)]) * size)


@pytest.mark.parametrize("seed", range(10))
def test_replaying_the_same_commands_gives_the_same_annex(seed: int) -> None:
    rng = random.Random(seed)
    commands = [_random_annex_command(rng) for _ in range(200)]
    runs = []
    for _ in range(2):
        engine = Engine()
        replies: list[object] = []
        for i, command in enumerate(commands):
            for node in ("a", "b"):
                if node not in engine.nodes and i % 7 == 0:
                    engine.apply(CreateNode(node), float(i))
            try:
                replies.append(engine.apply(command, float(i)))
            except TenureError as error:
                replies.append(type(error).__name__)
            check_invariants(engine)
        runs.append((replies, dump(engine)))
        assert dump(load(dump(engine))) == dump(engine)
    assert runs[0] == runs[1]
