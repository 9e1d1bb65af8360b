"""The face registry: the faces of other lock services the server can speak, one line each.

Each line names the module of a face's :class:`~tenure.server.plug.FaceEntry`, in the
face's own folder of :mod:`tenure.compat`: its settings, which of them turn it on and
which is its own port, its checks, the address a cluster's member advertises for it,
what it counts its requests in, and its maker. Everything the server does per face is
read from here: the settings' flags, variables, config-file keys and help
(:func:`settings`), their checks (:func:`check`), the faces' own ports, ``/metrics``'
counters (:func:`observers`), a cluster member's record (:func:`advertised`) and the
faces each server makes (:func:`factories`). Adding a face is its folder and its line.

The entries are imported when first read, not with this module: the faces build on
the server's plug (:mod:`tenure.server.plug`), so the server must not import them
first; an entry's module imports nothing its face needs besides (a face that needs an
extra's library is listed without it, and imported only when made). This module is
the one place the server imports :mod:`tenure.compat` (``tests/server/test_boundary.py``
holds it to that).

Layer (CONTRIBUTING.md): this module may also import tenure.compat (lazily).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from importlib import import_module
from types import ModuleType
from typing import Any, Final

from tenure.server._config.cluster_settings import DEFAULT_CELL
from tenure.server._config.serve_config import ConfigError, ServeConfig, check_ports, every_row
from tenure.server._config.setting import Setting
from tenure.server.plug import FaceEntry, FaceFactory, FaceObserver, FaceSettings

#: The faces, in order (the main port's flags in ``--help``, ``/metrics``): each line
#: imports the module that defines the face's ``ENTRY``.
FACES: Final[tuple[Callable[[], ModuleType], ...]] = (
    lambda: import_module("tenure.compat.dflockd.entry"),
    lambda: import_module("tenure.compat.ydb.entry"),
)


@functools.cache
def entries() -> tuple[FaceEntry[Any], ...]:
    """Every face's entry, in the table's order (importing each entry's module once).

    Raises:
        TypeError: a module's ``ENTRY`` is not a FaceEntry.
        ValueError: two faces have one name, or a setting's name is taken twice.
    """
    found: list[FaceEntry[Any]] = []
    for load in FACES:
        entry = load().ENTRY
        if not isinstance(entry, FaceEntry):
            raise TypeError(f"{entry!r} is not a FaceEntry")
        found.append(entry)
    names = [entry.name for entry in found]
    if len(set(names)) != len(names):
        raise ValueError(f"two faces share a name: {names}")
    every_row([entry.settings for entry in found])  # (raises on a name taken twice)
    return tuple(found)


def entry(name: str) -> FaceEntry[Any]:
    """The entry of face ``name``.

    Raises:
        KeyError: no face has that name.
    """
    for face in entries():
        if face.name == name:
            return face
    raise KeyError(name)


def settings() -> list[FaceSettings[Any]]:
    """Every face's settings, in order: what ``tenure serve`` reads besides its own
    (:func:`~tenure.server._config.serve_config.resolve`)."""
    return [face.settings for face in entries()]


def every_setting() -> tuple[Setting, ...]:
    """The server's settings, then every face's: each one ``tenure serve`` takes."""
    return every_row(settings())


def enabled(config: ServeConfig) -> list[FaceEntry[Any]]:
    """The faces ``config`` turns on, in order: on a member of a cell other than
    ``default``, only those it relays (a face serves the nodes of one state, cell
    ``default``'s; docs/cluster.md, "The faces")."""
    elsewhere = bool(config.cluster) and config.cell != DEFAULT_CELL
    return [
        face
        for face in entries()
        if face.enabled(face.typed(config)) and (face.relayed or not elsewhere)
    ]


def kept_nodes(config: ServeConfig) -> list[str]:
    """The nodes the faces ``config`` turns on keep of their own, which this member's
    cell places in the directory when it leads: cell ``default``'s only (another
    cell's members relay those faces' connections there)."""
    if config.cluster and config.cell != DEFAULT_CELL:
        return []
    return [node for face in enabled(config) for node in face.nodes]


def all_kept_nodes() -> frozenset[str]:
    """Every face's own nodes, enabled or not (``tenure cells`` moves none of them)."""
    return frozenset(node for face in entries() for node in face.nodes)


def check(config: ServeConfig) -> None:
    """The settings of each face ``config`` turns on: its own port is none of the
    server's other listeners' (:func:`~tenure.server._config.serve_config.check_ports`),
    and the face's own checks.

    ``tenure serve`` runs it after :func:`~tenure.server._config.serve_config.resolve`
    (:func:`tenure.server._startup.configure`): the settings do not import the registry.

    Raises:
        ConfigError: naming the setting, or the extra to install.
    """
    if config.cluster and config.cell != DEFAULT_CELL:
        for face in entries():
            if face.port(config) and not face.relayed:
                raise ConfigError(
                    f"{face.flag} with --cell {config.cell}: the {face.name} face runs "
                    f"on the members of cell {DEFAULT_CELL} only (it serves the nodes "
                    "of its member's cell)"
                )
    faces = enabled(config)
    check_ports(config, [(face.flag, face.port(config)) for face in faces])
    for face in faces:
        if face.check is not None:
            face.check(face.typed(config))


def own_port(config: ServeConfig, name: str) -> tuple[str, int]:
    """Face ``name``'s own port in ``config``: (its setting's name, its value; 0: none).

    Raises:
        KeyError: no face has that name.
    """
    face = entry(name)
    return face.port_setting, face.port(config)


def accepted_own_port(config: ServeConfig) -> tuple[str, int] | None:
    """The name and own port of the accepted face ``config`` turns on (None: no such
    face, or none of its own): the one port of a face's that the server binds itself
    (a listening face binds its own)."""
    for face in enabled(config):
        port = face.port(config) if face.accepted else 0
        if port:
            return face.name, port
    return None


def advertised(config: ServeConfig, host: str, address: str) -> dict[str, str]:
    """Where a cluster's member that advertises ``host`` and its main ``address``
    (``HOST:PORT``) says the clients of each face ``config`` turns on reach it, by
    face name (a face with nowhere to say is left out)."""
    found: dict[str, str] = {}
    for face in enabled(config):
        if face.advertise is not None:
            where = face.advertise(face.typed(config), host, address)
            if where:
                found[face.name] = where
    return found


def observers() -> dict[str, FaceObserver]:
    """A new observer of each face that counts its requests, by name: every face's, on
    or off, so that ``/metrics`` always lists the same series."""
    return {face.name: face.observer() for face in entries() if face.observer is not None}


def factories(config: ServeConfig) -> dict[str, FaceFactory]:
    """The makers of the faces ``config`` turns on, by name (importing each face)."""
    return {face.name: face.factory() for face in enabled(config)}
