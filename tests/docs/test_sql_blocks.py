"""docs/fencing.md's SQL runs in a real PostgreSQL as written, does what the page
says, and is what ``PostgresFence`` sends (the page quotes the guard's own SQL)."""

from __future__ import annotations

import re

import psycopg
import pytest

from tenure.fencing import PostgresFence
from tests.docs.blocks import Block
from tests.docs.roles import Role, blocks_of, ids

BLOCKS = blocks_of(Role.SQL)
[TABLE] = [block for block in BLOCKS if block.text.startswith("CREATE TABLE tenure_fence")]
[CHECK] = [block for block in BLOCKS if block.text.startswith("INSERT INTO tenure_fence")]


def words(sql: str) -> str:
    """``sql`` as words: one space between, parameters as ``?``, no identifier quotes."""
    sql = re.sub(r"\$\d+|%s(::numeric)?", "?", sql.replace('"', ""))
    return " ".join(sql.replace("(", " ( ").replace(")", " ) ").split())


def test_the_page_quotes_the_fences_own_sql() -> None:
    fence = PostgresFence()
    create = fence._create_sql.replace("IF NOT EXISTS ", "")
    assert words(TABLE.text) == words(create)
    assert words(CHECK.text) == words(fence._check_sql)


@pytest.mark.parametrize("block", BLOCKS, ids=ids(BLOCKS))
def test_a_sql_block_runs_as_written(block: Block, postgres_database: str) -> None:
    with psycopg.connect(postgres_database, autocommit=True) as conn:
        conn.execute(TABLE.text)  # as written (the check needs its table)
        if block is TABLE:
            with pytest.raises(psycopg.errors.CheckViolation):
                conn.execute("INSERT INTO tenure_fence VALUES ('r', 0)")  # tokens start at 1
            return
        # The check's $1 and $2 are a prepared statement's parameters, as the guard's.
        conn.execute(f"PREPARE fence_check(text, numeric) AS {block.text}")
        accepted = [
            conn.execute(f"EXECUTE fence_check('invoices', {token:d})").fetchall() == [(1,)]
            for token in (5, 5, 4, 6, 2**64 - 1)
        ]
        assert accepted == [True, True, False, True, True]  # equal passes, lower is refused
