"""AlterNode's changes keep ``session_timeout`` on the wire (and so in the journal)."""

from __future__ import annotations

import pytest

from tenure._core import AlterNode, CreateNode, NodeConfig
from tenure._protocol import LocalProtocolError, Request
from tenure._protocol.payloads import decode_command, encode_command
from tenure._protocol.wire import WireError
from tests.protocol.helpers import message_of, pack, unpack, wire_of


def test_the_window_goes_out_under_its_old_name() -> None:
    sent = unpack(encode_command(AlterNode("n", {"recovery_window": 5.0, "max_waiters": 2})))
    assert sent == [3, "n", {"session_timeout": 5.0, "max_waiters": 2}]


@pytest.mark.parametrize("key", ["session_timeout", "recovery_window"])
def test_either_name_comes_in_as_the_new_one(key: str) -> None:
    raw = pack([3, "n", {key: 5, "lock_delay": 1.0}])
    assert decode_command(raw) == AlterNode("n", {"recovery_window": 5, "lock_delay": 1.0})


def test_both_names_go_and_come_as_sent_for_the_engine_to_refuse() -> None:
    both = {"session_timeout": 1.0, "recovery_window": 2.0}
    assert unpack(encode_command(AlterNode("n", both))) == [3, "n", both]
    assert decode_command(pack([3, "n", both])) == AlterNode("n", both)


def test_a_bad_map_is_still_refused_naming_the_key_as_given() -> None:
    with pytest.raises(WireError, match=r"\['recovery_window'\]: expected nil"):
        encode_command(AlterNode("n", {"recovery_window": object()}))
    with pytest.raises(WireError, match="expected a mapping"):
        encode_command(AlterNode("n", ["recovery_window"]))  # type: ignore[arg-type]
    with pytest.raises(LocalProtocolError, match=r"changes\['x'\]: expected a finite number"):
        wire_of(Request(1, AlterNode("n", {"x": float("inf")})))


def test_node_config_is_positional_so_its_layout_did_not_change() -> None:
    config = NodeConfig(recovery_window=8.0)
    sent = unpack(encode_command(CreateNode("n", config)))[2]
    assert isinstance(sent, list)
    assert sent[0] == 8.0
    assert message_of([2, 1, [1, "n", sent]]) == Request(1, CreateNode("n", config))
