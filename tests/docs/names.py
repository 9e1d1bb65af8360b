"""What a Python block reads that it does not define: the names its page must give it.

A block is read as the body of an ``async def`` (top-level ``await`` is allowed in a
fragment), and its free names are the globals any of its scopes reads: a name bound
in the block (assigned, imported, defined) is its own; a builtin is Python's.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import symtable
import textwrap

_WRAPPER = "__docs_block__"


def free_names(text: str) -> frozenset[str]:
    """The names ``text`` reads and binds nowhere (builtins aside)."""
    source = f"async def {_WRAPPER}():\n{textwrap.indent(text, '    ')}\n    pass\n"
    [body] = symtable.symtable(source, "<block>", "exec").get_children()
    found: set[str] = set()
    tables = [body]
    while tables:
        table = tables.pop()
        found.update(
            symbol.get_name()
            for symbol in table.get_symbols()
            if symbol.is_global() and symbol.is_referenced()
        )
        tables.extend(table.get_children())
    return frozenset(found - set(dir(builtins)))


def bound_names(text: str) -> frozenset[str]:
    """The names ``text`` binds at its top (assigned, imported, defined): what a later
    block of a story finds."""
    source = f"async def {_WRAPPER}():\n{textwrap.indent(text, '    ')}\n    pass\n"
    [body] = symtable.symtable(source, "<block>", "exec").get_children()
    return frozenset(
        symbol.get_name()
        for symbol in body.get_symbols()
        if symbol.is_assigned() or symbol.is_imported() or symbol.is_namespace()
    )


def awaits_at_top(text: str) -> bool:
    """Whether ``text`` awaits outside any function (a fragment of a coroutine)."""
    code = compile(text, "<block>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    return bool(code.co_flags & inspect.CO_COROUTINE)


def is_program(text: str) -> bool:
    """A whole program: it reads nothing it does not define, and awaits nothing outside
    a function (so ``python FILE`` runs it as it is)."""
    return not free_names(text) and not awaits_at_top(text)
