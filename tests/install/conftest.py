"""Fixtures of the install matrix (:mod:`tests.install.matrix`): the run's wheelhouse,
and a venv per install, each made once per run and shared by the run's workers."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.install.matrix import INSTALLS, Venv, Wheelhouse, shared_dir


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Wheelhouse:
    """The run's pure wheel of this checkout and the wheels it may need."""
    return Wheelhouse.made(shared_dir(tmp_path_factory))


@pytest.fixture(scope="session")
def venv_of(
    wheelhouse: Wheelhouse, tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str], Venv]:
    """``venv_of(name)``: the venv of :data:`~tests.install.matrix.INSTALLS`'s ``name``."""
    root = shared_dir(tmp_path_factory)
    return lambda name: wheelhouse.venv(root, INSTALLS[name])
