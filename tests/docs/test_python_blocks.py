"""Every Python block of the pages runs as written (issue 57): a whole program as a
file (``python -W error FILE``), a fragment in its page's context
(tests/docs/pages.py), against what the page says is running, each page's blocks in
one process of the page's own (tests/docs/pagerun.py)."""

from __future__ import annotations

import os
import re
import select
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import pytest

from tests.docs.blocks import ROOT, Block
from tests.docs.context import Page
from tests.docs.names import bound_names, free_names, is_program
from tests.docs.pagerun import in_process, page_blocks
from tests.docs.pages import PAGES
from tests.docs.roles import Role, blocks_of, ids, page_of

BLOCKS = blocks_of(Role.PYTHON)

#: The longest one block may take, its hooks included (a page's process answers).
BLOCK_WAIT = 150.0


def python_args() -> list[str]:
    """This interpreter with warnings as errors, as the test run has them."""
    return [sys.executable, "-W", "error"]


class PageProcess:
    """The process of one page (tests/docs/pagerun.py): blocks sent, outcomes read."""

    def __init__(self, name: str, env: dict[str, str], where: Path) -> None:
        read, write = os.pipe()
        self.log = (where / "pagerun.log").open("ab")
        self.proc = subprocess.Popen(
            [*python_args(), "-m", "tests.docs.pagerun", name, str(write)],
            cwd=where,
            env={**os.environ, **env, "PYTHONPATH": str(ROOT)},
            stdin=subprocess.PIPE,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            pass_fds=(write,),
            text=True,
        )
        os.close(write)
        self.results: IO[str] = os.fdopen(read)
        self.where = where

    def run(self, index: int) -> str | None:
        """Run the page's ``index``-th block: None, or why it failed."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{index}\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.results], [], [], BLOCK_WAIT)
        if not ready:
            self.close()
            raise AssertionError(f"no outcome within {BLOCK_WAIT} s:\n{self.output()}")
        line = self.results.readline()
        if not line:
            raise AssertionError(f"the page's process ended:\n{self.output()}")
        outcome = __import__("json").loads(line)
        return (
            outcome["error"] and f"{outcome['error']}\n-- the page's process said:\n{self.output()}"
        )

    def output(self) -> str:
        self.log.flush()
        return (self.where / "pagerun.log").read_text(errors="replace")[-6000:]

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.results.close()
        self.log.close()


@pytest.fixture(scope="session")
def page_processes() -> Iterator[dict[str, PageProcess]]:
    processes: dict[str, PageProcess] = {}
    try:
        yield processes
    finally:
        for process in processes.values():
            process.close()


def run_program(block: Block, page: Page, env: dict[str, str], where: Path) -> None:
    """``python -W error FILE`` of the block (the page's addresses put in), in the
    page's directory: it exits 0 and writes nothing on stderr; twice if the page
    says a second run finds its state in place."""
    os.environ.update(env)  # (the page's addresses, for placed())
    path = where / f"{block.page.stem}_{block.line}.py"
    path.write_text(page.placed(block.text))
    for attempt in (1, 2) if page.runs_again else (1,):
        done = subprocess.run(
            [*python_args(), path.name],
            cwd=where,
            env={k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        report = f"run {attempt}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
        assert done.returncode == 0, report
        assert done.stderr == "", report
        expected = page.hook(block.text).prints
        assert expected is None or re.search(expected, done.stdout), report


@pytest.mark.parametrize("block", BLOCKS, ids=ids(BLOCKS))
def test_a_python_block_runs_as_written(
    block: Block,
    page_env: Callable[[str], dict[str, str]],
    page_dir: Callable[[str], Path],
    page_processes: dict[str, PageProcess],
) -> None:
    name = page_of(block)
    page = PAGES[name]
    env, where = page_env(name), page_dir(name)
    if not in_process(page, block):
        run_program(block, page, env, where)
        return
    process = page_processes.get(name)
    if process is None or not process.alive():
        process = page_processes[name] = PageProcess(name, env, where)
    error = process.run(page_blocks(name).index(block))
    assert error is None, error


def given_names(page: Page, block: Block) -> set[str]:
    """The names ``block`` finds in its page's namespace when it runs."""
    given = set(bound_names(page.imports)) | set(bound_names(page.setup))
    given |= set(page.readers(Path("/nonexistent")) if page.readers is not None else ())
    given |= set(page.hook(block.text).gives)
    if page.story:
        earlier = page_blocks(page_of(block))
        for before in earlier[: earlier.index(block)]:
            given |= bound_names(before.text)
    return given


@pytest.mark.parametrize("block", BLOCKS, ids=ids(BLOCKS))
def test_every_name_a_block_reads_is_given_by_its_page(block: Block) -> None:
    # What the issue found by running (docs/recipes.md's claim_id, a name nothing made),
    # read from the text: a fragment's free names are its page's stated context.
    page = PAGES[page_of(block)]
    missing = free_names(block.text) - given_names(page, block)
    assert missing == set(), f"{block.name} reads names its page never gives it"
    if not in_process(page, block):
        assert is_program(block.text)


def test_every_page_with_python_blocks_has_its_context_and_every_hook_its_block() -> None:
    pages = {page_of(block) for block in BLOCKS}
    assert pages == set(PAGES)
    for name, page in PAGES.items():
        texts = [block.text for block in BLOCKS if page_of(block) == name]
        for key in page.hooks:
            assert any(key in text for text in texts), f"{name}: hook {key!r} is of no block"
