"""Nodes: create, describe, alter, drop; node limits; name validation; rule 1."""

from __future__ import annotations

import math

import pytest

from tenure._core import (
    AlterNode,
    CloseSession,
    Command,
    CreateNode,
    CreateSemaphore,
    CreateSession,
    DescribeNode,
    DescribeSemaphore,
    DetachSession,
    DropNode,
    Engine,
    NodeConfig,
    NodeDescription,
    Release,
    SessionEnded,
)
from tenure._core.invariants import check_invariants
from tenure._core.values import MAX_NAME_BYTES, MAX_RECOVERY_WINDOW
from tenure.errors import (
    AlreadyExistsError,
    ErrorCode,
    InvalidArgumentError,
    LimitExceededError,
    NotFoundError,
    PreconditionFailedError,
    SessionExpiredError,
)

from .support import (
    KEY,
    acquire,
    create_semaphore,
    ended,
    failed,
    fired,
    lost,
    make_engine,
    open_session,
    settled,
    snapshot,
)

# -- create / describe ------------------------------------------------------------------


def test_create_then_describe_reports_config_and_empty_counts():
    engine = Engine()
    config = NodeConfig(recovery_window=5.0, lock_delay=1.0, max_waiters=7)
    assert engine.apply(CreateNode("alpha", config), 0.0) is None
    assert engine.apply(DescribeNode("alpha"), 0.0) == NodeDescription("alpha", config, 0, 0)


def test_describe_counts_sessions_and_semaphores():
    engine = make_engine()
    a = open_session(engine)
    open_session(engine)
    create_semaphore(engine, a, "p", 3)
    acquire(engine, a, "e", ephemeral=True)
    desc = engine.apply(DescribeNode("n"), 0.0)
    assert (desc.sessions, desc.semaphores) == (2, 2)


def test_create_existing_node_fails():
    engine = make_engine()
    with pytest.raises(AlreadyExistsError):
        engine.apply(CreateNode("n"), 1.0)


@pytest.mark.parametrize(
    "command",
    [DescribeNode("nope"), AlterNode("nope", {"lock_delay": 1.0}), DropNode("nope")],
    ids=["describe", "alter", "drop"],
)
def test_missing_node_is_not_found(command):
    engine = make_engine()
    with pytest.raises(NotFoundError):
        engine.apply(command, 0.0)


def test_session_on_missing_node_is_not_found():
    engine = make_engine()
    with pytest.raises(NotFoundError):
        engine.apply(CreateSession("nope", KEY), 0.0)


def test_max_nodes_is_enforced_and_named():
    engine = Engine(max_nodes=2)
    engine.apply(CreateNode("a"), 0.0)
    engine.apply(CreateNode("b"), 0.0)
    with pytest.raises(LimitExceededError, match="max_nodes"):
        engine.apply(CreateNode("c"), 0.0)
    engine.apply(DropNode("a"), 0.0)
    engine.apply(CreateNode("c"), 0.0)  # room again after a drop
    assert set(engine.nodes) == {"b", "c"}


def test_unknown_command_is_rejected():
    class Bogus(Command[None]):
        __slots__ = ()

    engine = make_engine()
    with pytest.raises(InvalidArgumentError, match="unknown command"):
        engine.apply(Bogus(), 0.0)


# -- names --------------------------------------------------------------------------


BAD_NAMES = [
    pytest.param("", id="empty"),
    pytest.param("a\x00b", id="nul"),
    pytest.param("a\nb", id="newline"),
    pytest.param("tab\there", id="tab"),
    pytest.param("\x7f", id="del"),
    pytest.param("x" * (MAX_NAME_BYTES + 1), id="too-long-ascii"),
    pytest.param("é" * (MAX_NAME_BYTES // 2 + 1), id="too-long-utf8"),
    pytest.param(123, id="int"),
    pytest.param(None, id="none"),
    pytest.param(b"bytes", id="bytes"),
]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_bad_node_name_is_rejected(name):
    engine = Engine()
    with pytest.raises(InvalidArgumentError):
        engine.apply(CreateNode(name), 0.0)
    assert engine.nodes == {}


@pytest.mark.parametrize(
    "name",
    ["x" * MAX_NAME_BYTES, "é" * (MAX_NAME_BYTES // 2), "with space/and:punct", "日本"],
    ids=["1024-ascii", "1024-bytes-utf8", "punct", "cjk"],
)
def test_good_node_names_are_accepted(name):
    engine = Engine()
    engine.apply(CreateNode(name), 0.0)
    assert engine.apply(DescribeNode(name), 0.0).name == name


# -- config validation and alter ----------------------------------------------------


BAD_SETTINGS = [
    ("recovery_window", 0),
    ("recovery_window", -1.0),
    ("recovery_window", math.nan),
    ("recovery_window", math.inf),
    ("recovery_window", MAX_RECOVERY_WINDOW + 1),
    ("recovery_window", True),
    ("recovery_window", "5"),
    ("lock_delay", -0.5),
    ("lock_delay", math.nan),
    ("lock_delay", math.inf),
    ("default_lease", 0),
    ("default_lease", -1.0),
    ("default_lease", math.inf),
    ("max_sessions", 0),
    ("max_sessions", -3),
    ("max_sessions", 1.0),
    ("max_sessions", True),
    ("max_semaphores", 0),
    ("max_waiters", 0),
    ("max_data_size", 0),
    ("max_watches_per_session", 0),
    ("max_watches_per_session", "10"),
    ("max_missed_per_session", 0),
    ("max_missed_per_session", 2.5),
]


@pytest.mark.parametrize(("setting", "value"), BAD_SETTINGS)
def test_alter_rejects_invalid_values_and_keeps_config(setting, value):
    engine = make_engine()
    before = engine.apply(DescribeNode("n"), 0.0)
    with pytest.raises(InvalidArgumentError, match=setting):
        engine.apply(AlterNode("n", {setting: value}), 1.0)
    assert engine.apply(DescribeNode("n"), 1.0) == before


@pytest.mark.parametrize(("setting", "value"), BAD_SETTINGS)
def test_create_rejects_invalid_config(setting, value):
    engine = Engine()
    config = NodeConfig(**{setting: value})
    with pytest.raises(InvalidArgumentError, match=setting):
        engine.apply(CreateNode("n", config), 0.0)
    assert engine.nodes == {}


def test_alter_rejects_unknown_setting_naming_it():
    engine = make_engine()
    before = engine.apply(DescribeNode("n"), 0.0)
    with pytest.raises(InvalidArgumentError, match="bogus_setting"):
        engine.apply(AlterNode("n", {"lock_delay": 2.0, "bogus_setting": 1}), 0.0)
    # The valid part of a rejected change is not applied either.
    assert engine.apply(DescribeNode("n"), 0.0) == before


def test_alter_applies_changes_and_returns_new_description():
    engine = make_engine()
    open_session(engine)
    desc = engine.apply(
        AlterNode("n", {"lock_delay": 2.5, "max_waiters": 3, "default_lease": 4.0}), 1.0
    )
    assert desc.config.lock_delay == 2.5
    assert desc.config.max_waiters == 3
    assert desc.config.default_lease == 4.0
    assert desc.config.recovery_window == NodeConfig().recovery_window  # untouched
    assert desc.sessions == 1
    assert engine.apply(DescribeNode("n"), 1.0) == desc


def test_alter_can_clear_default_lease():
    engine = make_engine(NodeConfig(default_lease=3.0))
    desc = engine.apply(AlterNode("n", {"default_lease": None}), 0.0)
    assert desc.config.default_lease is None


def test_altered_limit_applies_to_later_commands():
    engine = make_engine()
    open_session(engine)
    open_session(engine)
    engine.apply(AlterNode("n", {"max_sessions": 2}), 0.0)
    with pytest.raises(LimitExceededError, match="max_sessions"):
        open_session(engine)


def test_altered_recovery_window_is_the_default_of_new_sessions():
    engine = make_engine(NodeConfig(recovery_window=30.0))
    engine.apply(AlterNode("n", {"recovery_window": 7.0}), 0.0)
    assert engine.apply(CreateSession("n", KEY), 0.0).timeout == 7.0


# -- drop ---------------------------------------------------------------------------


def test_drop_empty_node_removes_it_and_its_semaphores():
    engine = make_engine()
    s = open_session(engine)
    create_semaphore(engine, s, "p", 1)
    engine.apply(CloseSession(s), 0.0)
    engine.apply(DropNode("n"), 1.0)
    assert "n" not in engine.nodes
    with pytest.raises(NotFoundError):
        engine.apply(DescribeNode("n"), 1.0)
    assert engine.take_effects() == []


def test_drop_with_live_sessions_fails_without_force_and_changes_nothing():
    engine = make_engine()
    a = open_session(engine)
    b = open_session(engine)
    create_semaphore(engine, a, "p", 1)
    acquire(engine, a, "p")
    acquire(engine, b, "p")
    engine.apply(DescribeSemaphore(b, "p", watch_owners=True), 0.0)
    engine.take_effects()
    before = snapshot(engine)
    with pytest.raises(PreconditionFailedError, match="force"):
        engine.apply(DropNode("n"), 1.0)
    assert snapshot(engine) == before
    assert engine.take_effects() == []


def test_drop_with_only_detached_sessions_still_needs_force():
    engine = make_engine()
    s = open_session(engine)
    engine.apply(DetachSession(s), 0.0)
    with pytest.raises(PreconditionFailedError):
        engine.apply(DropNode("n"), 1.0)
    assert engine.apply(DescribeNode("n"), 1.0).sessions == 1


def test_forced_drop_ends_every_session_with_session_ended():
    engine = make_engine()
    a = open_session(engine)
    b = open_session(engine)
    create_semaphore(engine, a, "p", 1)
    acquire(engine, a, "p")
    acquire(engine, b, "p", request_id=12)  # queued
    engine.apply(DescribeSemaphore(b, "p", watch_owners=True), 0.0)
    engine.take_effects()

    engine.apply(DropNode("n", force=True), 5.0)
    effects = settled(engine)
    # Like a forced delete of every semaphore: waiters fail with NOT_FOUND ...
    assert [(e.session_id, e.request_id, e.code) for e in failed(effects)] == [
        (b, 12, ErrorCode.NOT_FOUND)
    ]
    # ... and the sessions end, after those effects.
    assert isinstance(effects[-1], SessionEnded)
    assert sorted((e.session_id, e.code) for e in ended(effects)) == [
        (a, ErrorCode.SESSION_CLOSED),
        (b, ErrorCode.SESSION_CLOSED),
    ]
    assert all("dropped" in e.message for e in ended(effects))
    assert fired(effects) == []
    assert engine.nodes == {}
    assert engine.sessions == {}
    for sid in (a, b):
        with pytest.raises(SessionExpiredError):
            engine.apply(Release(sid, "p"), 5.0)
    assert engine.next_deadline() is None


def test_forced_drop_leaves_other_nodes_alone():
    engine = make_engine()
    engine.apply(CreateNode("keep"), 0.0)
    a = open_session(engine)
    k = open_session(engine, "keep")
    create_semaphore(engine, k, "p", 1)
    token = acquire(engine, k, "p").token
    acquire(engine, a, "p", ephemeral=True)
    engine.take_effects()
    engine.apply(DropNode("n", force=True), 1.0)
    effects = settled(engine)
    assert [e.session_id for e in ended(effects)] == [a]
    desc = engine.apply(DescribeSemaphore(k, "p", owners=True), 1.0).description
    assert [(o.session_id, o.token) for o in desc.owners] == [(k, token)]


def test_forced_drop_tells_holders_their_lease_is_lost():
    # errors.LeaseLostError and effects.LeaseLost both list "node dropped with
    # force=True" as a cause of a lost lease; the holder should get LeaseLost for
    # each grant it had, not only a SessionEnded(SESSION_CLOSED).
    engine = make_engine()
    a = open_session(engine)
    create_semaphore(engine, a, "p", 2)
    token_p = acquire(engine, a, "p").token
    token_e = acquire(engine, a, "e", ephemeral=True).token
    engine.take_effects()
    engine.apply(DropNode("n", force=True), 1.0)
    effects = engine.take_effects()
    assert sorted((e.session_id, e.name, e.token, e.code) for e in lost(effects)) == [
        (a, "e", token_e, ErrorCode.LEASE_LOST),
        (a, "p", token_p, ErrorCode.LEASE_LOST),
    ]


def test_dropped_node_can_be_recreated_empty():
    engine = make_engine(NodeConfig(max_sessions=1))
    a = open_session(engine)
    create_semaphore(engine, a, "p", 1)
    engine.apply(DropNode("n", force=True), 1.0)
    engine.apply(CreateNode("n"), 2.0)
    assert engine.apply(DescribeNode("n"), 2.0) == NodeDescription("n", NodeConfig(), 0, 0)
    b = open_session(engine, now=2.0)
    assert b != a  # session ids are never reused
    create_semaphore(engine, b, "p", 1, now=2.0)  # the old semaphore is gone
    check_invariants(engine)


def test_semaphore_commands_in_one_node_do_not_see_another():
    engine = make_engine()
    engine.apply(CreateNode("m"), 0.0)
    a = open_session(engine, "n")
    b = open_session(engine, "m")
    engine.apply(CreateSemaphore(a, "p", 1), 0.0)
    with pytest.raises(NotFoundError):
        engine.apply(DescribeSemaphore(b, "p"), 0.0)
    engine.apply(CreateSemaphore(b, "p", 5), 0.0)
    assert engine.apply(DescribeSemaphore(a, "p"), 0.0).description.limit == 1
    assert engine.apply(DescribeSemaphore(b, "p"), 0.0).description.limit == 5


def test_alter_with_a_non_string_setting_name_is_invalid_argument():
    # Engine.apply promises a reply or a tenure.errors exception; today
    # NodeConfig.replace(**changes) lets Python's "keywords must be strings"
    # TypeError escape.
    engine = make_engine()
    before = engine.apply(DescribeNode("n"), 0.0)
    with pytest.raises(InvalidArgumentError):
        engine.apply(AlterNode("n", {1: 2}), 0.0)  # type: ignore[dict-item]
    assert engine.apply(DescribeNode("n"), 0.0) == before


def test_create_node_with_a_config_that_is_not_a_node_config_is_invalid_argument():
    # Same contract; today cmd.config.validated() raises AttributeError for None.
    engine = Engine()
    with pytest.raises(InvalidArgumentError):
        engine.apply(CreateNode("n", None), 0.0)  # type: ignore[arg-type]
    assert engine.nodes == {}
