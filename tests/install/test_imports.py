"""Each install imports every module it claims, and fails on the others only for want
of their extra (:data:`tests.install.needs.NEEDS`).

Issue 57: with ``pip install 'tenure[server]'``, ``tenure.server._http.backup`` (and
so the whole HTTP endpoint: ``--http-port``) imported the cluster's package, whose
etcd client needs grpc and aetcd, which only ``tenure[etcd]`` installs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.install.matrix import INSTALLS, Venv
from tests.install.needs import NEEDS, imported, needs_of, unexplained

# The first test of a run to ask makes the wheelhouse and its venv: minutes, at worst.
pytestmark = pytest.mark.timeout(900)


@pytest.mark.parametrize("name", list(INSTALLS))
def test_an_install_imports_every_module_it_claims(
    name: str, venv_of: Callable[[str], Venv], tmp_path: Path
) -> None:
    install = INSTALLS[name]
    found = imported(venv_of(name).python, tmp_path)
    modules = found["modules"]
    assert found["file"].startswith(str(venv_of(name).root)), found["file"]  # not the checkout
    assert found["build"] == "pure"  # (the matrix's wheel: the compiled is scripts/start's)
    claimed = [module for module in modules if needs_of(module) <= install.has]
    assert len(claimed) > 250, sorted(modules)  # (the package was found and walked)
    assert not unexplained(modules, install.has), (
        f"{install.command}: imports that break the rule of tests/install/needs.py:\n"
        + "\n".join(f"{module}: {why}" for module, why in unexplained(modules, install.has).items())
    )
    # What the install is for imports: each extra it names is used by some module.
    for extra in install.has:
        own = [module for module in modules if extra in needs_of(module)]
        assert own, extra
        assert all(modules[module] is None for module in own), (extra, own)


def test_every_entry_of_the_needs_table_names_a_module() -> None:
    source = Path(__file__).resolve().parents[2] / "src"
    missing = [
        name
        for name in NEEDS
        if not (source / name.replace(".", "/")).with_suffix(".py").is_file()
        and not (source / name.replace(".", "/") / "__init__.py").is_file()
    ]
    assert missing == []
