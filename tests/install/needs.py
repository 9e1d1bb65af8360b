"""Which modules of ``tenure`` need which extra, and the judging of an install's imports.

:data:`NEEDS` is the rule an install is held to: a module needs the extras of the
longest entry that holds it (none where no entry does). An install must import every
module whose extras it has; a module that needs one it lacks may fail to import, but
only for want of that extra (a ``ModuleNotFoundError`` of one of its distributions'
modules, or tenure's own error naming ``tenure[EXTRA]``), never for another reason.
So a module that needs an extra imports it where it is used, or the feature that uses
it sits in a package of its own here: ``tenure.server._http`` is ``--http-port``'s
(the ``server`` extra), ``tenure.server._cluster`` is ``--cluster``'s (``etcd``).
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import subprocess
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any, Final

from tests.install.matrix import extra_distributions, program_env

__all__ = ["NEEDS", "Imported", "imported", "needs_of", "unexplained"]

#: The program that imports every module of an install (run by the venv's python).
IMPORTER: Final = Path(__file__).with_name("import_every_module.py")

#: Module or package -> the extras its modules need (the longest entry wins).
NEEDS: Final[Mapping[str, frozenset[str]]] = {
    name: frozenset(extras)
    for name, extras in {
        # The `tenure` command's commands: click and rich...
        "tenure.cli": ("cli",),
        # ...but serve and migrate, and the statuses the entry point reports with.
        "tenure.cli.server": (),
        "tenure.cli._status": (),
        # --http-port: the dashboard, /metrics, /healthz, /readyz, backup, reload.
        "tenure.server._http": ("server",),
        # --cluster: the etcd client.
        "tenure.server._cluster": ("etcd",),
        "tenure._etcd": ("etcd",),
        "tenure.backends.etcd": ("etcd",),
        "tenure.backends.redis": ("redis",),
        "tenure.backends.postgres": ("postgres",),
        # --ydb-port: gRPC and the YDB SDK's protocol definitions.
        "tenure.compat.ydb": ("ydb",),
        "tenure.contrib.celery": ("celery",),
        "tenure.contrib.limits": ("limits",),
        "tenure.contrib.otel": ("otel",),
        "tenure.contrib.tooz": ("tooz",),
        # The conformance kit (pytest, pytest-asyncio, hypothesis).
        "tenure.testing.conformance": ("testing",),
        # The simulation's model of etcd: aetcd's protocol definitions, grpc's codes.
        "tenure.testing.sim.etcd": ("etcd",),
        # ...and its cluster target (``--target cluster``): tenure serve --cluster over it.
        "tenure.testing.sim._cluster": ("etcd",),
        # ...and its service of cells (``--target cells``): its moves ask etcd's directory.
        "tenure.testing.sim._cells": ("etcd",),
    }.items()
}


def needs_of(module: str) -> frozenset[str]:
    """The extras ``module`` needs (:data:`NEEDS`)."""
    holders = [name for name in NEEDS if module == name or module.startswith(f"{name}.")]
    return NEEDS[max(holders, key=len)] if holders else frozenset()


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@cache
def import_names(extra: str) -> frozenset[str]:
    """The top-level modules of the distributions ``extra`` pulls (read from this venv,
    which has every extra installed)."""
    wanted = {_canonical(name) for name in extra_distributions(extra)}
    owners = importlib.metadata.packages_distributions()
    return frozenset(
        top for top, dists in owners.items() if any(_canonical(d) in wanted for d in dists)
    )


def _explained(error: list[str], missing: frozenset[str]) -> bool:
    """Whether ``error`` (``[type, missing module, message]``) is for want of an extra
    of ``missing``."""
    kind, module, message = error
    if kind == "ModuleNotFoundError" and module:
        return any(module.partition(".")[0] in import_names(extra) for extra in missing)
    named = re.findall(r"tenure\[([a-z0-9_,-]+)\]", message)
    return any(extra in group.split(",") for group in named for extra in missing)


def unexplained(found: Mapping[str, list[str] | None], has: frozenset[str]) -> dict[str, str]:
    """What of an install's imports ``found`` (a module's error, or None) breaks the
    rule, by module: a module whose extras are all in ``has`` that failed, and one that
    failed for another reason than an extra ``has`` lacks."""
    wrong: dict[str, str] = {}
    for module, error in found.items():
        if error is None:
            continue
        missing = needs_of(module) - has
        if not missing:
            needs = sorted(needs_of(module))
            wrong[module] = f"needs {needs}, all installed: {error[0]}: {error[2]}"
        elif not _explained(error, missing):
            wrong[module] = f"needs {sorted(missing)} (missing), but: {error[0]}: {error[2]}"
    return wrong


#: What importing every module of an install gave: ``build`` (``pure``, ``compiled``),
#: ``file`` (the package's ``__init__``) and ``modules`` (each one's error, or None).
Imported = dict[str, Any]


def imported(python: Path, cwd: Path) -> Imported:
    """Import every module of ``python``'s ``tenure``, from ``cwd``, in a fresh
    interpreter (``-I``: neither the checkout nor the environment on its path)."""
    done = subprocess.run(
        [str(python), "-I", str(IMPORTER)],
        cwd=cwd,
        env=program_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    found: Imported = json.loads(done.stdout)
    return found
