"""The syntax trees of source files, each parsed once per test run.

The rules read as tests (``tests/test_layers.py``, ``tests/test_import_graph.py``,
``tests/test_names.py``, ``tests/test_private_reads.py``,
``tests/test_global_random.py``, ``tests/test_layers_stated.py``...) each read every
module of ``src/tenure`` with :mod:`ast`; parsing the ~500 modules is about a second
of CPU each time. :func:`syntax_tree` parses a file's text once and hands every later
reader the same tree. The cache is keyed by the text read now, not by the path, so
an edited file (or a file a test writes under ``tmp_path``) is parsed afresh.

The trees are shared: a reader must not change them (the rules only read).
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

__all__ = ["syntax_tree"]


@cache
def _parse(text: str, filename: str) -> ast.Module:
    return ast.parse(text, filename)


def syntax_tree(path: Path) -> ast.Module:
    """The syntax tree of the Python file at ``path`` as it is now (parsed once per
    text; a syntax error names the file)."""
    return _parse(path.read_text(encoding="utf-8"), str(path))
