"""The plug boundary: the faces of other lock services meet the server through one module.

Every module of :mod:`tenure.compat` may import, of tenure, only the engine's values
(``tenure._core``), the wire protocol (``tenure._protocol``), ``tenure.errors``, the
runtime (``tenure._runtime``), its own packages, and :mod:`tenure.server.plug`; and
the server imports :mod:`tenure.compat` only in its face registry
(``tenure/server/_faces.py``). Read from the source with ``ast``, so an import inside
a function or under TYPE_CHECKING counts too, as does ``import_module`` of a name.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

#: The checkout's source (what the rule reads: the source, whichever build is installed).
SOURCE = Path(__file__).resolve().parents[2] / "src" / "tenure"
#: What a face may import of tenure (a module, or a package and everything under it).
COMPAT_MAY_IMPORT = (
    "tenure._core",
    "tenure._protocol",
    "tenure._runtime",
    "tenure.errors",
    "tenure.compat",
    "tenure.server.plug",
)
REGISTRY = SOURCE / "server" / "_faces.py"


def imports(path: Path, root: Path = SOURCE.parent) -> Iterator[tuple[int, str]]:
    """Every module ``path`` (a module under ``root``) imports: (line, absolute name);
    ``from a import b`` names ``a.b`` too, as ``b`` may be a module; and the module an
    ``import_module("a.b")`` names (the face registry's lines)."""
    tree = ast.parse(path.read_text(), str(path))
    package = ".".join(path.relative_to(root).with_suffix("").parts[:-1])
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and ast.unparse(node.func) in ("import_module", "importlib.import_module")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node.lineno, node.args[0].value
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's package up
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            yield node.lineno, base
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}"


def within(name: str, allowed: tuple[str, ...]) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for prefix in allowed)


def test_compat_imports_of_the_server_only_its_plug() -> None:
    modules = sorted((SOURCE / "compat").rglob("*.py"))
    assert len(modules) > 10  # (the faces are there to be checked)
    wrong = [
        f"{path.relative_to(SOURCE)}:{line}: {name}"
        for path in modules
        for line, name in imports(path)
        if name.startswith("tenure")
        and not within(name, COMPAT_MAY_IMPORT)
        # `from tenure.server.plug import X` names tenure.server too: the package.
        and name not in ("tenure", "tenure.server")
    ]
    assert not wrong, "compat imports past the plug:\n" + "\n".join(wrong)


def test_the_server_imports_compat_only_in_its_face_registry() -> None:
    modules = sorted((SOURCE / "server").rglob("*.py"))
    found = {
        path.relative_to(SOURCE).as_posix()
        for path in modules
        for _, name in imports(path)
        if within(name, ("tenure.compat",))
    }
    assert found == {REGISTRY.relative_to(SOURCE).as_posix()}


def test_the_checks_see_what_they_must_refuse(tmp_path: Path) -> None:
    """The walk finds an import in a function, a relative one and one of a name."""
    source = (
        "from __future__ import annotations\n"
        "def f():\n"
        "    from tenure.server._net import auth\n"
        "from ..dflockd import codec\n"
        "import tenure.server._serve\n"
        "load = lambda: import_module('tenure.server._startup')\n"
    )
    sample = tmp_path / "tenure" / "compat" / "ydb" / "sample.py"
    sample.parent.mkdir(parents=True)
    sample.write_text(source)
    names = {name for _, name in imports(sample, tmp_path)}
    assert "tenure.server._net.auth" in names
    assert "tenure.compat.dflockd.codec" in names
    assert "tenure.server._serve" in names
    assert "tenure.server._startup" in names
    assert not within("tenure.server._net.auth", COMPAT_MAY_IMPORT)
    assert within("tenure.server.plug", COMPAT_MAY_IMPORT)
