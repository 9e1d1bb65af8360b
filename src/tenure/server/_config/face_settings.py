"""One face's settings: its rows of the settings table, and the typed object they make.

A face of another lock service (:mod:`tenure.compat`) declares its settings in its own
folder as a :class:`FaceSettings`: rows of the type the server's own settings use
(:class:`~tenure.server._config.setting.Setting`: a flag, an environment variable, a
config-file key, help, default, range), each named ``<face>_<field>``, and a frozen
dataclass whose fields are those rows' values. The server reads every face's rows
through its face registry (:mod:`tenure.server._faces`), merges them with its own
(:func:`tenure.server._config.serve_config.resolve`), and keeps each face's values as
that object, by face name (:attr:`ServeConfig.faces
<tenure.server._config.serve_config.ServeConfig.faces>`), from which the face reads
them back typed (:meth:`ServeConfig.face
<tenure.server._config.serve_config.ServeConfig.face>`). So the server has no field
per face, and a face's flags stay ``--<face>-...``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from tenure.server._config.setting import Setting

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = ["FaceSettings"]

S = TypeVar("S", bound="DataclassInstance")


@dataclass(frozen=True, slots=True)
class FaceSettings(Generic[S]):
    """The settings of face ``face``: ``rows``, one per field of ``kind``.

    ``kind`` is a frozen dataclass; its field ``name`` is row ``<face>_<name>``'s value,
    and its default that row's default (checked here, so the two cannot drift apart).

    Raises (at construction):
        ValueError: a row and the fields do not match one to one, or a default differs.
    """

    face: str
    kind: type[S]
    rows: tuple[Setting, ...]

    def __post_init__(self) -> None:
        defaults = {
            self.prefix + item.name: item.default
            for item in dataclasses.fields(self.kind)
            if item.default is not dataclasses.MISSING
        }
        named = {row.name: row.default for row in self.rows}
        if len(named) != len(self.rows) or named != defaults:
            raise ValueError(
                f"the {self.face} face's rows {sorted(named.items())} are not the fields "
                f"of {self.kind.__name__} and their defaults {sorted(defaults.items())}"
            )

    @property
    def prefix(self) -> str:
        """What each row's name starts with (``<face>_``)."""
        return self.face + "_"

    def row(self, name: str) -> Setting:
        """The row named ``name`` (``<face>_port``, say).

        Raises:
            KeyError: no row has that name.
        """
        for row in self.rows:
            if row.name == name:
                return row
        raise KeyError(name)

    def make(self, values: Mapping[str, object]) -> S:
        """The typed settings from ``values`` by row name (a row not there: its default)."""
        given: dict[str, Any] = {
            row.name.removeprefix(self.prefix): values[row.name]
            for row in self.rows
            if row.name in values
        }
        return self.kind(**given)

    def values(self, settings: S) -> dict[str, object]:
        """``settings``'s values by row name (what :meth:`make` takes)."""
        return {
            self.prefix + item.name: getattr(settings, item.name)
            for item in dataclasses.fields(settings)
        }
