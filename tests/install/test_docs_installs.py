"""Every ``pip install`` of tenure the docs name is in the install matrix, or said to be
tested elsewhere (:data:`~tests.install.matrix.ELSEWHERE`): a new install in the docs
joins the matrix, or says where it is tested, in the change that documents it."""

from __future__ import annotations

import re

from tests.install.matrix import ELSEWHERE, INSTALLS, ROOT

#: ``pip install tenure``, ``pip install 'tenure[a,b]'`` as the docs write them.
NAMED = re.compile(r"pip install '?tenure(?:\[([a-z0-9_,-]+)\])?")


def named_installs() -> dict[frozenset[str], set[str]]:
    """Each install the docs name (its extras), and the files that name it."""
    found: dict[frozenset[str], set[str]] = {}
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for extras in NAMED.findall(path.read_text()):
            named = frozenset(extra for extra in extras.split(",") if extra)
            found.setdefault(named, set()).add(path.name)
    return found


def test_every_install_the_docs_name_is_tested() -> None:
    named = named_installs()
    assert {frozenset(), frozenset({"server"})} <= set(named)  # (the pattern reads the docs)
    matrix = {frozenset(install.extras) for install in INSTALLS.values()}
    untested = {
        ",".join(sorted(extras)) or "(none)": sorted(files)
        for extras, files in named.items()
        if extras not in matrix and not extras <= set(ELSEWHERE)
    }
    assert not untested, f"installs the docs name that no test makes: {untested}"


def test_every_install_of_the_matrix_is_named_by_the_docs() -> None:
    named = set(named_installs())
    unnamed = [name for name, install in INSTALLS.items() if frozenset(install.extras) not in named]
    assert unnamed == []
