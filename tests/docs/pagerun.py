"""The process that runs one page's Python blocks in the page's context.

``python -W error -m tests.docs.pagerun PAGE FD``, in the page's directory, the
servers' addresses in ``DOCS_*``: it makes the page's namespace (its imports, its
reader's names, its setup), then reads block numbers on stdin, one a line, runs each
(with its hook) and writes its outcome to FD as a JSON line. A story's earlier blocks
run first if they have not yet. A process of its own per page, so that what a page
sets for the process (a default client, an observer, a Celery app) stays there.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import inspect
import json
import os
import re
import sys
import traceback
from pathlib import Path
from typing import Any

from tests.docs.blocks import Block
from tests.docs.context import CALLED, WAIT, Page, Reader, Run, expand
from tests.docs.names import free_names, is_program
from tests.docs.pages import PAGES
from tests.docs.roles import Role, blocks_of, page_of


def in_process(page: Page, block: Block) -> bool:
    """Whether ``block`` runs in its page's process (else alone, as a file)."""
    return page.story or not is_program(block.text) or page.hook(block.text).acts


def page_blocks(name: str) -> list[Block]:
    """The Python blocks of page ``name`` that run in its process, in order."""
    page = PAGES[name]
    return [b for b in blocks_of(Role.PYTHON) if page_of(b) == name and in_process(page, b)]


async def execute(block: Block, text: str, ns: dict[str, Any]) -> None:
    """Run ``text`` (the block's) in ``ns``: awaited where it awaits at its top, else
    in a thread (blocking code must not stop the page's loop). Tracebacks name the
    page and its lines."""
    code = compile(
        "\n" * block.line + text, str(block.page), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    )
    if code.co_flags & inspect.CO_COROUTINE:
        await eval(code, ns)
    else:
        await asyncio.to_thread(exec, code, ns)


async def run(page: Page, block: Block, ns: dict[str, Any]) -> None:
    """Run ``block`` with its hook; AssertionError (or the block's own) if it fails."""
    hook = page.hook(block.text)
    where = Path.cwd()
    step = Run(ns, page.placed(block.text), where)
    first_call = len(CALLED)
    with contextlib.redirect_stdout(step.printed):
        if hook.before is not None:
            await hook.before(step)
        body = asyncio.ensure_future(execute(block, step.text, ns))
        beside = asyncio.ensure_future(hook.beside(step)) if hook.beside is not None else None
        if hook.forever:
            assert beside is not None, "a block that runs for ever needs a beside step"
            done, _ = await asyncio.wait(
                {body, beside}, timeout=3 * WAIT, return_when="FIRST_COMPLETED"
            )
            if body in done:
                beside.cancel()
                body.result()  # its error, if it ended by one
                raise AssertionError("it ended by itself: the page says it runs until cancelled")
            assert beside in done, "its beside step never saw it work"
            beside.result()
            body.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(body, WAIT)
        else:
            await asyncio.wait_for(body, 3 * WAIT)
            if beside is not None:
                await asyncio.wait_for(beside, WAIT)
        if hook.then is not None:
            await asyncio.wait_for(hook.then(step), 3 * WAIT)
    printed = step.printed.getvalue()
    if hook.prints is not None:
        assert re.search(hook.prints, printed), f"it printed {printed!r}, not /{hook.prints}/"
    called = {name for name, _, _ in CALLED[first_call:]}
    uncalled = sorted(
        name
        for name in free_names(block.text)
        if isinstance(ns.get(name), Reader) and ns[name].called and name not in called
    )
    assert uncalled == [], f"the reader's {uncalled} never called: did the block run?"


async def main(name: str, results: Any) -> None:
    page = PAGES[name]
    blocks = page_blocks(name)
    base: dict[str, Any] = {"__name__": "__docs__"}
    setup_error = None
    try:
        if page.readers is not None:
            base.update(page.readers(Path.cwd()))
        exec(page.imports, base)
        if page.setup:
            setup = Block(blocks[0].page, 0, "python", expand(page.placed(page.setup)))
            await execute(setup, setup.text, base)
    except Exception:  # told with every block's outcome
        setup_error = f"the page's setup failed:\n{traceback.format_exc()}"
    done: dict[int, str | None] = {}
    while line := await asyncio.to_thread(sys.stdin.readline):
        index = int(line)
        for earlier in range(index + 1) if page.story else [index]:
            if earlier in done:
                continue
            try:
                if setup_error is not None:
                    raise AssertionError(setup_error)
                # A story's blocks share one namespace; other pages' each start afresh
                # from the page's (what one sets for the process, the next finds).
                await run(page, blocks[earlier], base if page.story else dict(base))
                done[earlier] = None
            except BaseException as error:
                if isinstance(error, KeyboardInterrupt | SystemExit):
                    raise
                done[earlier] = "".join(traceback.format_exception(error))
        failed = [blocks[i].name for i in range(index) if page.story and done.get(i)]
        outcome = done[index] or (
            f"an earlier block of the story failed: {failed}" if failed else None
        )
        results.write(json.dumps({"block": blocks[index].name, "error": outcome}) + "\n")
        results.flush()


if __name__ == "__main__":
    with os.fdopen(int(sys.argv[2]), "w") as out:
        asyncio.run(main(sys.argv[1], out))
