"""A journal's replay applies what was logged, whatever --max-nodes and --max-node-* are now."""

from __future__ import annotations

import pytest

from tenure._core import CreateNode, Engine, NodeConfig
from tenure._core.values import DEFAULT_NODE_CEILINGS
from tenure.errors import LimitExceededError
from tenure.server._durability.records import apply_record, command_record


def test_a_replay_applies_what_was_logged_whatever_the_limits_are_now() -> None:
    # Logged when the server allowed more (a higher --max-nodes, --max-node-waiters).
    engine = Engine(max_nodes=1)
    engine.apply(CreateNode("a"), 0.0)
    engine.node_ceilings = {**DEFAULT_NODE_CEILINGS, "max_waiters": 10}
    ceilings = engine.node_ceilings
    record = command_record(CreateNode("b", NodeConfig(max_waiters=1_000)), 1.0)
    assert record is not None
    apply_record(engine, record, "logged record 1", "test")
    assert engine.nodes["b"].config.max_waiters == 1_000
    # The limits hold again for what comes next.
    assert (engine.max_nodes, engine.node_ceilings) == (1, ceilings)
    with pytest.raises(LimitExceededError, match="max_nodes"):
        engine.apply(CreateNode("c", NodeConfig(max_waiters=5)), 2.0)
