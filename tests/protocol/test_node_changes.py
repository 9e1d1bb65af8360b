"""AlterNode's changes keep ``session_timeout`` on the wire (and so in the journal)."""

from __future__ import annotations

import msgpack
import pytest

from tenure._core import AlterNode, CreateNode, NodeConfig
from tenure._protocol.compiled import compile_dump, compile_load
from tenure._protocol.payloads import COMMAND, NODE_CHANGES, NODE_CONFIG
from tenure._protocol.schema import SchemaError


@pytest.mark.parametrize("compiled", [False, True])
def test_the_window_goes_out_under_its_old_name(compiled: bool) -> None:
    dump = compile_dump(COMMAND) if compiled else COMMAND.dump
    sent = dump(AlterNode("n", {"recovery_window": 5.0, "max_waiters": 2}))
    assert sent == [3, "n", {"session_timeout": 5.0, "max_waiters": 2}]


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("key", ["session_timeout", "recovery_window"])
def test_either_name_comes_in_as_the_new_one(compiled: bool, key: str) -> None:
    load = compile_load(COMMAND) if compiled else COMMAND.load
    raw = msgpack.unpackb(msgpack.packb([3, "n", {key: 5, "lock_delay": 1.0}]))
    assert load(raw) == AlterNode("n", {"recovery_window": 5, "lock_delay": 1.0})


def test_both_names_go_and_come_as_sent_for_the_engine_to_refuse() -> None:
    both = {"session_timeout": 1.0, "recovery_window": 2.0}
    assert NODE_CHANGES.dump(both) == both
    assert NODE_CHANGES.load(both) == both


def test_a_bad_map_is_still_refused_naming_the_key_as_given() -> None:
    with pytest.raises(SchemaError, match=r"\['recovery_window'\]: expected nil"):
        NODE_CHANGES.dump({"recovery_window": object()})
    with pytest.raises(SchemaError, match="expected a mapping"):
        NODE_CHANGES.dump(["recovery_window"])


def test_node_config_is_positional_so_its_layout_did_not_change() -> None:
    config = NodeConfig(recovery_window=8.0)
    sent = NODE_CONFIG.dump(config)
    assert isinstance(sent, list)
    assert sent[0] == 8.0
    assert COMMAND.load([1, "n", sent]) == CreateNode("n", config)
