"""What a page gives its Python blocks: the rule, per page, that makes a fragment a
program (tests/docs/pages.py holds the pages' rules).

A page's blocks run in its *context*: the servers it says are running (reached at
the address the page writes, :attr:`Page.addresses`), the imports its fragments take
for granted, its stated setup (``session``, from the page's first example), and the
*reader's names*: what the page leaves to the reader (``serve(token)``, ``Report``),
given here as small recording stand-ins. A block that defines what it does not call
(a decorated function, a lifespan) is exercised by its :class:`Hook`. Nothing else
changes a block: its text runs as written, but for the addresses.
"""

from __future__ import annotations

import asyncio
import io
import os
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: How long a hook waits for what it waits for (a block's own waits are its own).
WAIT = 30.0


@dataclass
class Run:
    """One block's run in its page's process: what a hook may look at."""

    #: The page's namespace (shared by its blocks when the page is a story).
    ns: dict[str, Any]
    #: The block's text as it runs (the addresses put in).
    text: str
    #: The page's directory (the working directory of its blocks).
    where: Path
    #: What the block (and its hooks) printed.
    printed: io.StringIO = field(default_factory=io.StringIO)

    def env(self, name: str) -> str:
        """A server's address the page was given (``tenure``: ``127.0.0.1:PORT``)."""
        return os.environ[f"DOCS_{name.upper()}"]


Step = Callable[[Run], Awaitable[None]]


@dataclass(frozen=True)
class Hook:
    """What a page does around one of its blocks."""

    #: Before the block runs: what the page says is there already.
    before: Step | None = None
    #: While the block runs: what the page says others do meanwhile (the other parties
    #: of a barrier). With ``forever``: returns once it has seen the block work.
    beside: Step | None = None
    #: The block runs until it is cancelled (a leader runner, a loop over changes):
    #: it is cancelled when ``beside`` returns, and must end by that cancellation.
    forever: bool = False
    #: After it: uses what the block defined (calls its decorated function...).
    then: Step | None = None
    #: A regular expression its output must match (a program's, or a fragment's).
    prints: str | None = None
    #: The names ``before`` puts in the block's namespace.
    gives: tuple[str, ...] = ()

    @property
    def acts(self) -> bool:
        """Whether it does anything around the block (not only read its output)."""
        return any((self.before, self.beside, self.forever, self.then))


@dataclass(frozen=True)
class Page:
    """The context of one page's Python blocks."""

    #: The servers it says are running: ``tenure``, ``ydb`` (a tenure serve with
    #: --ydb-port), ``cluster`` (three members), ``redis``, ``postgres``, ``etcd``.
    servers: tuple[str, ...] = ()
    #: Text of the page's blocks -> what the test's servers put there, a template of
    #: their addresses (``{tenure}``: ``127.0.0.1:PORT``).
    addresses: dict[str, str] = field(default_factory=dict)
    #: What its fragments use without importing it.
    imports: str = ""
    #: Its stated setup, run first in its namespace (``await`` allowed).
    setup: str = ""
    #: The reader's names: name -> a stand-in (:func:`reader`, a value...).
    readers: Callable[[Path], dict[str, object]] | None = None
    #: Its blocks read as one story: all run in one namespace, in page order (else a
    #: whole program runs alone, as a file).
    story: bool = False
    #: Hooks, by a text that one block of the page (and only one) contains.
    hooks: dict[str, Hook] = field(default_factory=dict)
    #: Files its blocks read from their working directory, made there first.
    files: Callable[[Path], None] | None = None
    #: Its programs run twice against the same server (the second finds their state).
    runs_again: bool = False

    def hook(self, text: str) -> Hook:
        """The hook of the block whose text is ``text`` (none: an empty one)."""
        found = [hook for key, hook in self.hooks.items() if key in text]
        assert len(found) <= 1, f"two hooks for one block: {text[:60]!r}"
        return found[0] if found else Hook()

    def placed(self, text: str) -> str:
        """``text`` with the page's addresses replaced by the test's servers'."""
        for written, template in self.addresses.items():
            text = text.replace(written, expand(template))
        return text


def expand(template: str) -> str:
    """``template`` with ``{name}`` replaced by the page's server ``name``'s address."""
    return re.sub(r"\{(\w+)\}", lambda m: os.environ[f"DOCS_{m[1].upper()}"], template)


#: The reader's functions called so far in this process, by name, with their arguments.
CALLED: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []


@dataclass(frozen=True)
class Reader:
    """A function the page leaves to the reader, recording its calls."""

    name: str
    returns: object = None
    #: The page's blocks call it (some are only handed over: a scheduler's job).
    called: bool = True
    asynchronous: bool = False

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        CALLED.append((self.name, args, kwargs))
        if self.asynchronous:
            return _returning(self.returns)
        return self.returns


async def _returning(value: object) -> object:
    await asyncio.sleep(0)
    return value


def reader(name: str, returns: object = None, *, called: bool = True) -> Reader:
    """A plain function of the reader's: records its calls, returns ``returns``."""
    return Reader(name, returns, called)


def async_reader(name: str, returns: object = None, *, called: bool = True) -> Reader:
    """An ``async def`` of the reader's: records its calls, returns ``returns``."""
    return Reader(name, returns, called, asynchronous=True)


def calls_of(name: str) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    """The calls of the reader's function ``name`` so far."""
    return [(args, kwargs) for called, args, kwargs in CALLED if called == name]


async def until(check: Callable[[], Awaitable[object] | object], what: str) -> object:
    """Until ``check()`` is true (awaited if it is a coroutine), within :data:`WAIT`."""
    deadline = time.monotonic() + WAIT
    while True:
        got = check()
        if isinstance(got, Awaitable):
            got = await got
        if got:
            return got
        assert time.monotonic() < deadline, f"never: {what}"
        await asyncio.sleep(0.02)
