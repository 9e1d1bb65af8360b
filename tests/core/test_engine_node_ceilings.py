"""A node's limits have ceilings (``tenure serve --max-node-*``): no limit in name only."""

from __future__ import annotations

import pytest

from tenure._core import AlterNode, CreateNode, DescribeNode, Engine, NodeConfig
from tenure._core.values import DEFAULT_NODE_CEILINGS
from tenure.errors import LimitExceededError


@pytest.mark.parametrize("field", sorted(DEFAULT_NODE_CEILINGS))
def test_a_limit_of_2_to_the_63_is_refused_naming_it_and_its_ceiling(field: str) -> None:
    engine = Engine()
    flag = "--max-node-" + field.removeprefix("max_").replace("_", "-")
    with pytest.raises(LimitExceededError, match=f"{field} .* ceiling of .*{flag}"):
        engine.apply(CreateNode("n", NodeConfig().replace(**{field: 2**63})), 0.0)
    assert "n" not in engine.nodes
    ceiling = DEFAULT_NODE_CEILINGS[field]
    engine.apply(CreateNode("n", NodeConfig().replace(**{field: ceiling})), 0.0)
    with pytest.raises(LimitExceededError, match=flag):
        engine.apply(AlterNode("n", {field: ceiling + 1}), 0.0)
    assert getattr(engine.apply(DescribeNode("n"), 0.0).config, field) == ceiling


def test_a_server_sets_its_own_ceilings_and_a_lowered_one_spares_old_nodes() -> None:
    engine = Engine()
    engine.apply(CreateNode("old", NodeConfig(max_semaphores=500)), 0.0)
    engine.node_ceilings = {**DEFAULT_NODE_CEILINGS, "max_semaphores": 100}
    with pytest.raises(LimitExceededError, match=r"max_semaphores \(101\) .* ceiling of 100"):
        engine.apply(CreateNode("new", NodeConfig(max_semaphores=101)), 0.0)
    engine.apply(CreateNode("new", NodeConfig(max_semaphores=100)), 0.0)
    # The old node keeps its 500, and may change what the ceilings leave alone.
    engine.apply(AlterNode("old", {"lock_delay": 1.0}), 0.0)
    assert engine.nodes["old"].config.max_semaphores == 500
    with pytest.raises(LimitExceededError, match="max_semaphores"):
        engine.apply(AlterNode("old", {"max_semaphores": 400}), 0.0)
