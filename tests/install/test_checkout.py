"""The README's flows in a copy of this checkout (:mod:`tests.install.checkout`):
``scripts/start`` installs its venv and serves the compiled build with every flag a
server claims; ``scripts/bootstrap testing`` then makes the README's conformance kit
command run in the checkout.

Issue 57: in the venv ``scripts/start`` makes (``.[server,cli,compile]``: no etcd
extra), ``tenure serve --http-port`` stopped at start-up for want of grpc; and the
kit's command stopped with ``ERROR: Unknown config option: timeout``: the checkout's
pytest configuration names pytest-timeout's option, which ``scripts/bootstrap
testing`` did not install.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pytest

from tests.install.checkout import clone_like, offline
from tests.install.matrix import ROOT, Venv, Wheelhouse, extras_closure, program_env
from tests.install.needs import imported, unexplained
from tests.install.served import Served, check_every_flag, check_refusals, tenure_of

# A fresh clone compiles (a minute or more of mypyc) unless the checkout's compiled
# build came along; and each step installs.
pytestmark = pytest.mark.timeout(1500)

#: Bound of one install step or start here, in seconds.
INSTALLING = 900.0
#: What scripts/start installs (scripts/bootstrap, scripts/ensure-venv compile).
START_EXTRAS = ("server", "cli", "compile")


@dataclass(frozen=True)
class Checkout:
    """The copy, and the environment its scripts install with (the wheelhouse alone)."""

    root: Path
    env: dict[str, str]

    @property
    def venv(self) -> Venv:
        """The venv its scripts make (``.venv``)."""
        return Venv(self.root / ".venv")


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory, wheelhouse: Wheelhouse) -> Checkout:
    """A copy of the checkout (its compiled build with it where current)."""
    root = tmp_path_factory.mktemp("checkout")
    clone_like(root)
    return Checkout(root, offline(wheelhouse.house))


def test_scripts_start_serves_the_compiled_build_with_every_flag(
    checkout: Checkout, tmp_path: Path
) -> None:
    start = partial(Served, [checkout.root / "scripts" / "start"], env=checkout.env)
    serve = partial(start, wait=INSTALLING)  # (its first start installs, and may compile)
    tenure = tenure_of(checkout.venv, tmp_path)
    check_every_flag(tmp_path, serve, tenure, build="compiled")
    check_refusals(tmp_path, tenure)
    # Every module it claims imports on the compiled build too (where a compiled
    # module's `if TYPE_CHECKING:` imports run).
    found = imported(checkout.venv.python, tmp_path)
    assert found["build"] == "compiled"
    assert found["file"] == str(checkout.root / "src" / "tenure" / "__init__.py")
    wrong = unexplained(found["modules"], extras_closure(START_EXTRAS))
    assert not wrong, "\n".join(f"{module}: {why}" for module, why in wrong.items())


def readme_kit_command(url: str) -> list[str]:
    """The README's conformance kit command (the line after ``scripts/bootstrap
    testing``), its ``--tenure-url`` made ``url``."""
    block = (ROOT / "README.md").read_text().partition("scripts/bootstrap testing")[2]
    line = next(line for line in block.splitlines() if "tenure.testing.conformance" in line)
    words = shlex.split(line)
    assert words[:3] == [".venv/bin/python", "-m", "pytest"], line
    return [re.sub(r"^--tenure-url=.*", f"--tenure-url={url}", word) for word in words]


def test_the_readme_conformance_command_runs_after_bootstrap_testing(
    checkout: Checkout, tmp_path: Path
) -> None:
    bootstrap = subprocess.run(
        [str(checkout.root / "scripts" / "bootstrap"), "testing"],
        cwd=checkout.root,
        env=program_env(**checkout.env),
        capture_output=True,
        text=True,
        timeout=INSTALLING,
        check=False,
    )
    assert bootstrap.returncode == 0, bootstrap
    start = [checkout.root / "scripts" / "start"]
    with Served(start, tmp_path / "data", env=checkout.env, wait=INSTALLING) as server:
        command = readme_kit_command(f"tenure://127.0.0.1:{server.port}")
        kit = subprocess.run(
            # One pattern's tests (the README's command runs them all: minutes).
            [*command, "-k", "test_mutex", "-p", "no:cacheprovider", "-q"],
            cwd=checkout.root,
            env=program_env(),
            capture_output=True,
            text=True,
            timeout=INSTALLING,
            check=False,
        )
    said = kit.stdout + kit.stderr
    assert kit.returncode == 0, said
    assert re.search(r"\b[1-9]\d* passed\b", said), said
