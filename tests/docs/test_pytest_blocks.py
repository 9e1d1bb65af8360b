"""The pages' files of tests (a ``def test_`` at their top) pass as a project's test
file: pytest's ``pytester`` runs each in this process, in a directory of its own
where none of this repository's settings apply (pytest-asyncio in its strict mode,
tenure's plugin by its entry point, as wherever tenure is installed). Every test of
the file passes, and nothing warns."""

from __future__ import annotations

import re

import pytest

from tests.docs.blocks import Block
from tests.docs.roles import Role, blocks_of, ids

pytest_plugins = ["pytester"]

BLOCKS = blocks_of(Role.PYTEST)

#: No cache, none of the other plugins installed here (Hypothesis's, imported afresh by
#: each run, takes a second), and pytest-asyncio's loop scope said (unsaid, it warns in
#: a directory with no pytest settings, as docs/testing.md says): a project's own run.
RUN = (
    *("-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:xdist", "-p", "no:anyio"),
    *("-o", "asyncio_default_fixture_loop_scope=function"),
)


@pytest.mark.parametrize("block", BLOCKS, ids=ids(BLOCKS))
def test_a_file_of_tests_passes_as_a_projects(block: Block, pytester: pytest.Pytester) -> None:
    pytester.makepyfile(**{f"test_{block.page.stem.replace('-', '_')}": block.text})
    result = pytester.runpytest(*RUN)
    tests = re.findall(r"^(?:async )?def (test_\w+)", block.text, flags=re.MULTILINE)
    result.assert_outcomes(passed=len(tests))
    assert "warnings" not in result.parseoutcomes(), result.stdout.str()
