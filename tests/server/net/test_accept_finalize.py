"""A connection a peer reset is freed without a "Future exception was never retrieved".

``StreamReaderProtocol.__del__`` marks its close future's exception (the reset's) as
seen; a class mypyc compiles runs only a finalizer it defines itself, so the
protocols of :mod:`tenure.server._net.accept` define one. Before, each reset
connection freed by reference counting logged the reset's traceback (found once the
protocols stopped making a reference cycle, whose collection ran the finalizer). The
last test holds every compiled class to that rule.
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tenure.server._net.accept import AcceptedProtocol, FaceProtocol


async def _serve(*_: object) -> None:
    """A connection's server (never called: no connection is made)."""


def _accepted() -> asyncio.StreamReaderProtocol:
    return AcceptedProtocol(_serve, turn=1, pause_unread=4096)


def _face() -> asyncio.StreamReaderProtocol:
    return FaceProtocol(_serve, on_made=lambda: None, on_lost=lambda: None)


def _reports() -> list[dict[str, Any]]:
    """What the running loop's exception handler is given from now on."""
    reported: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _, context: reported.append(context))
    return reported


@pytest.mark.parametrize("make", [_accepted, _face], ids=["accepted", "face"])
async def test_a_protocol_lost_to_a_reset_is_freed_quietly(
    make: Callable[[], asyncio.StreamReaderProtocol],
) -> None:
    reported = _reports()
    # The check can fail: a future whose exception nobody read is reported when freed.
    unread = asyncio.get_running_loop().create_future()
    unread.set_exception(ConnectionResetError(104, "Connection reset by peer"))
    del unread
    gc.collect()
    assert [c["message"] for c in reported] == ["Future exception was never retrieved"]
    reported.clear()

    protocol = make()
    protocol.connection_lost(ConnectionResetError(104, "Connection reset by peer"))
    del protocol  # (freed by reference counting: it is in no cycle)
    gc.collect()
    assert reported == []


def _compiled_modules() -> list[str]:
    """The modules of the compiled build (pyproject.toml's list for mypyc)."""
    project = tomllib.loads((Path(__file__).resolve().parents[3] / "pyproject.toml").read_text())
    listed = project["tool"]["hatch"]["build"]["targets"]["wheel"]["hooks"]["custom"]["include"]
    return [
        rel.removeprefix("src/").removesuffix(".py").replace("/", ".").removesuffix(".__init__")
        for rel in listed
    ]


def test_every_compiled_class_that_inherits_a_finalizer_defines_its_own() -> None:
    # The rule behind the protocols' __del__, for every class mypyc compiles: one that
    # would inherit a __del__ runs it only if it defines its own.
    lacking = []
    for name in _compiled_modules():
        module = importlib.import_module(name)
        for cls in vars(module).values():
            if not isinstance(cls, type) or cls.__module__ != name:
                continue
            inherited = [base for base in cls.__mro__[1:] if "__del__" in vars(base)]
            if inherited and "__del__" not in vars(cls):
                lacking.append(f"{name}.{cls.__qualname__} (from {inherited[0].__qualname__})")
    assert lacking == [], f"compiled classes that inherit __del__ without their own: {lacking}"
    assert "tenure.server._net.accept" in _compiled_modules()  # (the list was read)
