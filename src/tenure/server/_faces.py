"""The face registry: each face of another lock service the server can speak, in one table.

A :class:`FaceEntry` says which settings turn its face on, which setting is the port
of its own (the server checks that no two of its listeners share a port), how its
settings are checked, and how it is made. Both are imported only when called: the
faces live in :mod:`tenure.compat`, which builds on the server's plug
(:mod:`tenure.server.plug`), so the server must not import them first, and YDB's
needs the ``ydb`` extra. This module is the one place the server imports
:mod:`tenure.compat` (``tests/server/test_boundary.py`` holds it to that).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from tenure.server._config.serve_config import ServeConfig, check_ports
from tenure.server.plug import FaceFactory

#: Checks a face's settings. Raises ConfigError naming the setting.
Check = Callable[[ServeConfig], None]


@dataclass(frozen=True, slots=True)
class FaceEntry:
    """One face: its name, when it runs, its port setting, its checks, its maker.

    ``check`` and ``factory`` import the face when called (the module docstring);
    ``check`` is None for a face whose settings the table's ranges cover.
    """

    name: str
    enabled: Callable[[ServeConfig], bool]
    port_setting: str  # the setting of the face's own port (its value 0: none)
    check: Callable[[], Check] | None
    factory: Callable[[], FaceFactory]

    @property
    def flag(self) -> str:
        """The flag of the face's port setting (``--dflockd-port``)."""
        return "--" + self.port_setting.replace("_", "-")

    def port(self, config: ServeConfig) -> int:
        """The face's own port in ``config`` (0: none)."""
        port = getattr(config, self.port_setting)
        assert isinstance(port, int)
        return port


def _dflockd() -> FaceFactory:
    from tenure.compat.dflockd.face import DflockdFace

    return DflockdFace.plugged


def _ydb_check() -> Check:
    from tenure.compat.ydb.settings import check  # without grpc: it says if that is missing

    return check


def _ydb() -> FaceFactory:
    from tenure.compat.ydb.face import YdbFace

    return YdbFace.plugged


FACES: Final = (
    # The main port tells dflockd's clients from native ones by their first byte, so
    # dflockd's face always runs (--dflockd-port adds a port of its own).
    FaceEntry("dflockd", lambda config: True, "dflockd_port", None, _dflockd),
    FaceEntry("ydb", lambda config: config.ydb_port != 0, "ydb_port", _ydb_check, _ydb),
)
#: The table by name.
BY_NAME: Final = {entry.name: entry for entry in FACES}


def enabled(config: ServeConfig) -> list[FaceEntry]:
    """The faces ``config`` turns on, in the table's order."""
    return [entry for entry in FACES if entry.enabled(config)]


def check(config: ServeConfig) -> None:
    """The settings of each face ``config`` turns on: its own port is none of the
    server's other listeners' (:func:`~tenure.server._config.serve_config.check_ports`),
    and the face's own checks (YDB's: its database, the ydb extra).

    ``tenure serve`` runs it after :func:`~tenure.server._config.serve_config.resolve`
    (:func:`tenure.server._startup.configure`): the settings do not import the registry.

    Raises:
        ConfigError: naming the setting, or the extra to install.
    """
    faces = enabled(config)
    check_ports(config, [(entry.flag, entry.port(config)) for entry in faces])
    for entry in faces:
        if entry.check is not None:
            entry.check()(config)


def port_setting(name: str) -> str:
    """The setting of the port of face ``name``'s own (``dflockd_port``).

    Raises:
        KeyError: no face has that name.
    """
    return BY_NAME[name].port_setting


def factories(config: ServeConfig) -> dict[str, FaceFactory]:
    """The makers of the faces ``config`` turns on, by name (importing each face)."""
    return {entry.name: entry.factory() for entry in enabled(config)}
