"""``session_timeout`` is now ``recovery_window``: the old name where users type it,
and the old name in stored data (snapshots), which never changes."""

from __future__ import annotations

import dataclasses

import pytest

from tenure._core import AlterNode, DescribeNode, NodeConfig
from tenure._core.snapshot import dump, load
from tenure._core.stored_config import (
    LEFT_OUT_UNSET,
    config_from_stored,
    config_to_stored,
    current_names,
)
from tenure._core.values import MAX_RECOVERY_WINDOW, renamed_settings
from tenure.errors import InvalidArgumentError

from .support import make_engine


def test_replace_takes_the_old_name_with_a_warning_naming_the_new_one() -> None:
    with pytest.warns(DeprecationWarning, match="session_timeout is now called recovery_window"):
        config = NodeConfig().replace(session_timeout=12, max_waiters=3)
    assert (config.recovery_window, config.max_waiters) == (12, 3)


def test_the_warning_points_at_the_callers_line() -> None:
    with pytest.warns(DeprecationWarning, match="recovery_window") as caught:
        NodeConfig().replace(session_timeout=5.0)
    assert [w.filename for w in caught] == [__file__]


def test_the_new_name_does_not_warn() -> None:
    # filterwarnings = error: any warning here fails the test.
    assert NodeConfig().replace(recovery_window=5.0).recovery_window == 5.0


def test_both_names_at_once_are_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="give recovery_window only"):
        NodeConfig().replace(session_timeout=5.0, recovery_window=6.0)
    with pytest.raises(InvalidArgumentError, match="same setting"):
        renamed_settings({"session_timeout": 1, "recovery_window": 2})


def test_the_constructor_knows_only_the_new_name() -> None:
    with pytest.raises(TypeError):
        NodeConfig(session_timeout=5.0)  # type: ignore[call-arg]
    assert NodeConfig().recovery_window == 30.0


def test_validation_names_recovery_window() -> None:
    for bad in (0, MAX_RECOVERY_WINDOW + 1):
        with pytest.raises(InvalidArgumentError, match="recovery_window"):
            NodeConfig(recovery_window=bad).validated()
    renamed = pytest.warns(DeprecationWarning, match="recovery_window")
    with renamed, pytest.raises(InvalidArgumentError, match="recovery_window must be"):
        NodeConfig().replace(session_timeout=-1.0)


def test_stored_settings_keep_the_old_name() -> None:
    config = NodeConfig(recovery_window=7.0, max_waiters=3)
    stored = config_to_stored(config)
    assert stored["session_timeout"] == 7.0
    assert "recovery_window" not in stored
    names = [f.name for f in dataclasses.fields(config) if f.name not in LEFT_OUT_UNSET]
    assert list(stored) == ["session_timeout", *names[1:]]
    assert config_from_stored(stored) == config
    # A setting newer than the records' first readers is left out while unset (they
    # would refuse its name), and kept once set.
    bounded = config_to_stored(dataclasses.replace(config, max_hold=9.0))
    assert bounded["max_hold"] == 9.0
    assert config_from_stored(bounded).max_hold == 9.0
    assert "long_hold" not in bounded
    for long_hold in (300.0, 0.0):  # (0 is a setting: kept)
        told = config_to_stored(dataclasses.replace(config, long_hold=long_hold))
        assert (told["long_hold"], "max_hold" in told) == (long_hold, False)
        assert config_from_stored(told).long_hold == long_hold
    # Today's name reads too; both at once are left for NodeConfig to refuse.
    assert current_names({"recovery_window": 2.0}) == {"recovery_window": 2.0}
    both = {"session_timeout": 1.0, "recovery_window": 2.0}
    assert current_names(both) == both
    with pytest.raises(TypeError):
        config_from_stored(both)


def test_a_snapshot_keeps_the_old_name_both_ways() -> None:
    engine = make_engine(NodeConfig(recovery_window=9.0))
    plain = dump(engine)
    [node] = plain["nodes"]
    assert node["config"]["session_timeout"] == 9.0
    assert "recovery_window" not in node["config"]
    # A snapshot written before the rename (the same layout: it never changed).
    node["config"]["session_timeout"] = 11.0
    restored = load(plain)
    assert restored.apply(DescribeNode("n"), 0.0).config.recovery_window == 11.0


def test_the_engine_alters_the_window_by_its_new_name() -> None:
    engine = make_engine()
    described = engine.apply(AlterNode("n", {"recovery_window": 4.0}), 0.0)
    assert described.config.recovery_window == 4.0
