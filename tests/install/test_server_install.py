"""``pip install 'tenure[server]'`` serves every flag it claims, and refuses the others
naming the install that has them.

Issue 57: on this install ``tenure serve --http-port`` stopped at start-up
(``ModuleNotFoundError: No module named 'grpc'``): the dashboard, ``/metrics``,
``/healthz``, ``/readyz``, ``tenure backup`` and ``tenure reload`` were out of reach.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest

from tests.install.matrix import Venv
from tests.install.served import Served, check_every_flag, check_refusals, tenure_of

pytestmark = pytest.mark.timeout(900)  # (the first to ask makes the wheelhouse)


def test_a_server_install_serves_every_flag_it_claims(
    venv_of: Callable[[str], Venv], tmp_path: Path
) -> None:
    venv = venv_of("server")
    serve = partial(Served, [venv.bin("tenure"), "serve"])
    check_every_flag(tmp_path, serve, tenure_of(venv, tmp_path), build="pure")


def test_a_server_install_refuses_what_needs_another_extra_naming_it(
    venv_of: Callable[[str], Venv], tmp_path: Path
) -> None:
    check_refusals(tmp_path, tenure_of(venv_of("server"), tmp_path))
