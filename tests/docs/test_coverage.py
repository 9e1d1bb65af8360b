"""Every fenced block of every page is run (or checked) by one runner, or exempt with
its reason (issue 57): a new block that no runner takes fails here, and so does an
exemption naming a block that is gone."""

from __future__ import annotations

from collections import Counter

from tests.docs.blocks import (
    ROOT,
    TYPESCRIPT,
    TYPESCRIPT_SETUP_PAGES,
    every_block,
    typescript_blocks,
)
from tests.docs.roles import EXEMPT, Role, blocks_of, exemption_of, page_of, role_of


def test_every_block_has_a_runner_or_an_exemption() -> None:
    orphans = [
        f"{block.name} (```{block.lang})" for block in every_block() if role_of(block) is None
    ]
    assert orphans == [], (
        "blocks no runner takes: give each a language a runner takes (tests/docs/roles.py's "
        "table), or an EXEMPT entry with the reason it cannot run"
    )


def test_every_exemption_names_exactly_one_block() -> None:
    named = Counter(
        exemption for block in every_block() if (exemption := exemption_of(block)) is not None
    )
    assert [e for e in EXEMPT if named[e] != 1] == [], "an exemption names no block, or several"


def test_every_exemption_says_why() -> None:
    assert all(len(exemption.reason.split()) >= 3 for exemption in EXEMPT)
    assert len(set(EXEMPT)) == len(EXEMPT)


def test_the_typescript_runner_takes_every_typescript_block_of_its_pages() -> None:
    # The agreement with the TypeScript runner (tests/js_client): it runs all of
    # typescript_blocks(), and every other TypeScript block is exempt, saying why.
    taken = blocks_of(Role.TYPESCRIPT)
    assert {b for b in taken if b.lang in TYPESCRIPT} == set(typescript_blocks()) != set()
    # The rest are its app's setup: the install lines and the tsconfig.json it reads.
    setup = [b for b in taken if b.lang not in TYPESCRIPT]
    assert {b.lang for b in setup} == {"sh", "json"}
    assert {page_of(b) for b in setup} == set(TYPESCRIPT_SETUP_PAGES)
    elsewhere = [b for b in every_block() if b.lang in TYPESCRIPT and b not in typescript_blocks()]
    assert all(role_of(block) is Role.EXEMPT for block in elsewhere)


def test_every_runner_exists_and_takes_blocks() -> None:
    for role in Role:
        if role in (Role.TYPESCRIPT, Role.EXEMPT):
            continue
        assert (ROOT / role.value).is_file(), role
        assert blocks_of(role), f"{role.name} takes no block: drop it"


def test_every_page_has_blocks_and_a_block_is_named_by_its_page_and_line() -> None:
    pages = {page_of(block) for block in every_block()}
    assert {"README.md", "docs/recipes.md", "clients/js/README.md"} <= pages
    names = [block.name for block in every_block()]
    assert len(names) == len(set(names))
    assert all(name.rsplit(":", 1)[1].isdigit() for name in names)
