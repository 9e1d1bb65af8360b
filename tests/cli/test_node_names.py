"""A node a command names that does not exist: said so, with the names meant (issue 57).

``tenure lock --node bilign job -- CMD`` made the mistyped node and ran CMD, excluded
from nothing (exit 0). A node named with ``--node`` must now exist unless
``--create-node``; and every command that names a missing node says which existing
names are nearest ("did you mean"), on the shared real ``tenure serve``.
"""

from __future__ import annotations

import json
import random
import string
from pathlib import Path

import pytest

from tests.cli.support import one_error_line, python, run_tenure


def node_list(url: str) -> list[str]:
    """The server's nodes, as ``tenure ls --json`` lists them."""
    listed = run_tenure("ls", "--json", url=url)
    assert listed.returncode == 0, listed.stderr
    names: list[str] = json.loads(listed.stdout)
    return names


@pytest.fixture
def billing(url: str, node: str) -> str:
    """A node that exists, its name the test's node and a random word (no other test's
    node is near it: the other names do not crowd the names meant)."""
    name = f"{node}-{''.join(random.choices(string.ascii_lowercase, k=12))}"
    made = run_tenure("node", "create", name, url=url)
    assert made.returncode == 0, made.stderr
    return name


def mistyped(name: str, at: int) -> str:
    """``name`` with its ``at``-th letter from the end left out."""
    return name[:-at] + name[len(name) - at + 1 :]


def test_lock_on_a_mistyped_node_neither_makes_it_nor_runs(
    url: str, billing: str, tmp_path: Path
) -> None:
    typo = mistyped(billing, 3)
    ran = tmp_path / "ran"
    touch = python("import sys; open(sys.argv[1], 'w').close()", str(ran))
    result = run_tenure("lock", "job", "--node", typo, "--", *touch, url=url)
    assert result.returncode == 3
    line = one_error_line(result)
    # The nearest name first (other tests' nodes on the shared server may follow it).
    assert line.startswith(
        f"tenure: NotFoundError: node {typo!r} does not exist: did you mean {billing!r}"
    )
    assert line.endswith("? (--create-node makes it)")
    assert not ran.exists()
    assert typo not in node_list(url)
    # Asked to, it makes the node, and runs.
    made = run_tenure("lock", "job", "--node", typo, "--create-node", "--", *touch, url=url)
    assert made.returncode == 0, made.stderr
    assert ran.exists()
    assert typo in node_list(url)


def test_elect_and_claim_want_their_node_too(url: str, billing: str) -> None:
    typo = mistyped(billing, 5)
    for args in (
        ["elect", "scheduler"],
        ["elect", "scheduler", "--requeue"],
        ["claim", "nightly", "--at-least", "1", "--at-most", "5"],
    ):
        result = run_tenure(*args, "--node", typo, "--", "true", url=url)
        assert result.returncode == 3, (args, result.stderr)
        line = one_error_line(result)
        assert f"does not exist: did you mean {billing!r}" in line
        assert line.endswith("? (--create-node makes it)")
    assert typo not in node_list(url)


def test_without_node_the_default_node_is_made_as_before(url: str) -> None:
    # (No name was typed, so none was mistyped: the quick start keeps working.)
    result = run_tenure("lock", "job", "--", "true", url=url)
    assert result.returncode == 0, result.stderr
    assert "default" in node_list(url)


@pytest.mark.parametrize(
    "args",
    [
        ["ls", "{node}"],
        ["describe", "{node}"],
        ["describe", "{node}", "job"],
        ["sessions", "{node}"],
        ["watch", "{node}", "job", "--count", "1"],
        ["kill-session", "{node}", "1"],
        ["group", "ls", "{node}", "workers"],
        ["node", "describe", "{node}"],
        ["node", "alter", "{node}", "--set", "lock_delay=1"],
        ["node", "drop", "{node}"],
        ["leader", "scheduler", "--node", "{node}"],
        ["observe", "scheduler", "--node", "{node}", "--count", "1"],
        ["release-claim", "nightly", "0" * 32, "--node", "{node}"],
    ],
    ids=lambda args: " ".join(args[:2]),
)
def test_each_command_naming_a_missing_node_says_the_names_meant(
    url: str, billing: str, args: list[str]
) -> None:
    typo = mistyped(billing, 7)
    result = run_tenure(*(arg.format(node=typo) for arg in args), url=url)
    assert result.returncode == 3, result.stderr
    line = one_error_line(result)
    assert line.startswith(
        f"tenure: NotFoundError: node {typo!r} does not exist: did you mean {billing!r}"
    )
    assert line.endswith("?")


def test_a_name_near_none_says_where_the_names_are(url: str) -> None:
    result = run_tenure("describe", "qqqqqqqqqqqqqqqqqqqqqq", url=url)
    assert result.returncode == 3
    assert one_error_line(result) == (
        "tenure: NotFoundError: node 'qqqqqqqqqqqqqqqqqqqqqq' does not exist "
        "(tenure ls lists the nodes)"
    )


def test_what_is_missing_in_a_node_that_exists_is_said_as_before(url: str, billing: str) -> None:
    result = run_tenure("lock", "--semaphore", "nope", "--node", billing, "--", "true", url=url)
    assert result.returncode == 3
    line = one_error_line(result)
    assert f"semaphore 'nope' does not exist in node {billing!r}" in line
    assert "did you mean" not in line
