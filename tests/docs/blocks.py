"""The fenced code blocks of the pages users read, as markdown-it parses them.

One list of pages (:data:`PAGES`) and one reading of them (:func:`blocks`), shared by
every test that runs a page's blocks (the Python and shell ones, the TypeScript
ones of the JavaScript clients' READMEs) and by the test that requires each block to
be run by one of them or listed with the reason it cannot be. A block is named by
its page and the line its fence opens on (``docs/recipes.md:907``), as a reader
finds it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parents[2]


def pages() -> list[Path]:
    """Every page whose blocks are held to run: the README, docs/*.md, and the
    JavaScript clients' READMEs."""
    found = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    found += [
        ROOT / "clients" / "js" / "README.md",
        ROOT / "clients" / "js" / "effect" / "README.md",
    ]
    return found


@dataclass(frozen=True)
class Block:
    """One fenced code block: where it is, its info string's language, its text."""

    page: Path
    #: The 1-based line of its opening fence.
    line: int
    #: The first word of the fence's info string (``python``, ``sh``, ``ts``...), or "".
    lang: str
    text: str
    #: The words of the info string after the language (``output`` in ```` ```json output````).
    tags: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """``page:line``, the page relative to the repository's root."""
        return f"{self.page.relative_to(ROOT)}:{self.line}"


@cache
def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark")


def blocks(page: Path) -> list[Block]:
    """The fenced code blocks of ``page``, in order (indented code is not a fence)."""
    return list(_read(page))


@cache
def _read(page: Path) -> tuple[Block, ...]:
    # Read once per process: the pages do not change while the tests run.
    tokens = _parser().parse(page.read_text())
    found = []
    for token in tokens:
        if token.type == "fence" and token.map is not None:
            words = token.info.split()
            lang, tags = (words[0], tuple(words[1:])) if words else ("", ())
            found.append(Block(page, token.map[0] + 1, lang, token.content, tags))
    return tuple(found)


#: The pages whose TypeScript blocks the TypeScript runner (tests/js_client) runs: every
#: one of them, and no test here runs any (the coverage test counts them as its).
TYPESCRIPT_PAGES = ("clients/js/README.md", "clients/js/effect/README.md", "docs/javascript.md")
#: The pages whose ``sh`` and ``json`` blocks are the TypeScript runner's too: the
#: clients' READMEs, whose ``npm install`` lines install its app and whose ``json``
#: block is that app's ``tsconfig.json``.
TYPESCRIPT_SETUP_PAGES = ("clients/js/README.md", "clients/js/effect/README.md")

#: The languages of a TypeScript (or JavaScript) block.
TYPESCRIPT = frozenset({"ts", "typescript", "js", "javascript"})


def typescript_blocks() -> list[Block]:
    """The blocks the TypeScript runner runs: every TypeScript block of
    :data:`TYPESCRIPT_PAGES`."""
    return [
        block
        for page in TYPESCRIPT_PAGES
        for block in blocks(ROOT / page)
        if block.lang in TYPESCRIPT
    ]


def every_block() -> list[Block]:
    """The blocks of every page of :func:`pages`."""
    return [block for page in pages() for block in blocks(page)]
