"""The face registry: each face's entry, read as the server reads it (no process).

What turns each face on and which port is its own, its settings rows joined to the
server's and read back typed, its checks, its address in a cluster member's record,
its counters, and that listing the faces' settings needs none of their libraries
(``tenure serve --help`` without the ``ydb`` extra).
"""

from __future__ import annotations

import argparse
import ast
from typing import Any

import pytest

from tenure.compat.dflockd.metrics import DflockdCounts
from tenure.compat.dflockd.settings import DflockdSettings
from tenure.compat.ydb.metrics import YdbCounts
from tenure.compat.ydb.settings import YdbSettings
from tenure.errors import ConfigError
from tenure.server._config.face_settings import FaceSettings
from tenure.server._config.serve_config import ServeConfig, add_arguments, resolve
from tenure.server._config.setting import Setting
from tenure.server._config.settings import SETTINGS
from tenure.server._faces import (
    FACES,
    accepted_own_port,
    advertised,
    check,
    enabled,
    entries,
    every_setting,
    observers,
    own_port,
    settings,
)
from tenure.server.plug import FaceEntry
from tests.imports import AT_IMPORT, SOURCE, imports_of, modules, statements

#: What a face's entry must load without (its extra's libraries).
LIBRARIES = ("grpc", "ydb", "google")


def faces(
    dflockd: DflockdSettings | None = None, ydb: YdbSettings | None = None
) -> dict[str, object]:
    """``ServeConfig.faces`` with these faces' settings."""
    given = {"dflockd": dflockd, "ydb": ydb}
    return {name: value for name, value in given.items() if value is not None}


def names(faces: list[FaceEntry[Any]]) -> list[str]:
    """The names of ``faces`` that this test knows (a face added later is not its)."""
    return [face.name for face in faces if face.name in ("dflockd", "ydb")]


def test_the_settings_turn_the_faces_on() -> None:
    assert names(enabled(ServeConfig())) == ["dflockd"]
    with_ydb = ServeConfig(faces=faces(ydb=YdbSettings(port=2136)))
    assert names(enabled(with_ydb)) == ["dflockd", "ydb"]
    assert [own_port(with_ydb, name) for name in ("dflockd", "ydb")] == [
        ("dflockd_port", 0),
        ("ydb_port", 2136),
    ]
    assert len({face.name for face in entries()}) == len(FACES)


def test_each_face_has_its_own_settings_rows_and_reads_them_typed() -> None:
    """The faces' rows join the server's (one name each), are read from flags, the
    environment and defaults as the server's are, and come back as each face's object."""
    assert [face.face for face in settings()][:2] == ["dflockd", "ydb"]
    names = [row.name for row in every_setting()]
    assert len(names) == len(set(names))
    assert names[: len(SETTINGS)] == [row.name for row in SETTINGS]
    assert {"dflockd_port", "dflockd_auto_release", "ydb_database"} <= set(names)
    assert not any(row.name.startswith(("dflockd_", "ydb_")) for row in SETTINGS)
    parser = argparse.ArgumentParser()
    add_arguments(parser, settings())
    args = parser.parse_args(["--ydb-port", "2136", "--dflockd-auto-release", "off"])
    config = resolve(args, {"TENURE_YDB_DATABASE": "/prod"}, settings())
    assert config.face(settings()[1]) == YdbSettings(port=2136, database="/prod")
    assert config.face(settings()[0]) == DflockdSettings(auto_release=False)
    assert config.sources["ydb_port"] == "flag"
    assert config.sources["ydb_database"] == "env"
    assert config.sources["dflockd_max_locks"] == "default"
    logged = config.fields()  # (the log's config line: each setting under its name)
    assert (logged["ydb_port"], logged["dflockd_auto_release"]) == (2136, False)
    assert "faces" not in logged
    with pytest.raises(TypeError, match="not a YdbSettings"):
        ServeConfig(faces={"ydb": DflockdSettings()}).face(settings()[1])


def test_a_face_is_advertised_as_its_entry_says() -> None:
    """A cluster member's record: dflockd's port, else the main address (which serves
    it too); YDB's only with its port, at --ydb-advertise's host or the member's."""
    plain = ServeConfig()
    assert advertised(plain, "10.0.0.1", "10.0.0.1:6388") == {"dflockd": "10.0.0.1:6388"}
    assert accepted_own_port(plain) is None
    both = ServeConfig(
        faces=faces(DflockdSettings(port=7000), YdbSettings(port=2136, advertise="db.example"))
    )
    assert advertised(both, "[::1]", "[::1]:6388") == {
        "dflockd": "[::1]:7000",
        "ydb": "db.example:2136",
    }
    assert accepted_own_port(both) == ("dflockd", 7000)
    proxied = ServeConfig(faces=faces(ydb=YdbSettings(port=2136, advertise="[::2]:9000")))
    assert advertised(proxied, "h", "h:1")["ydb"] == "[::2]:9000"
    v6 = ServeConfig(faces=faces(ydb=YdbSettings(port=2136)))
    assert advertised(v6, "[::1]", "[::1]:6388")["ydb"] == "[::1]:2136"


def test_every_face_counts_in_an_observer_of_its_own() -> None:
    """Made once per process for every face, on or off: /metrics lists the same series."""
    made = observers()
    assert (type(made["dflockd"]), type(made["ydb"])) == (DflockdCounts, YdbCounts)
    series = [family.name for observer in made.values() for family in observer.families()]
    assert series[:2] == ["tenure_dflockd_requests", "tenure_ydb_requests"]
    assert observers()["dflockd"] is not made["dflockd"]  # (each server process its own)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"port": 7000, "faces": faces(DflockdSettings(port=7000))},
            "--dflockd-port=7000: --port is that port too",
        ),
        (
            {"http_port": 7001, "faces": faces(ydb=YdbSettings(port=7001))},
            "--ydb-port=7001: --http-port is that port too",
        ),
        (
            {"faces": faces(DflockdSettings(port=7002), YdbSettings(port=7002))},
            "--ydb-port=7002: --dflockd-port is",
        ),
    ],
)
def test_the_registry_refuses_a_face_port_another_listener_has(
    settings: dict[str, object], message: str
) -> None:
    """The settings do not know the faces: their caller checks each face's port here."""
    with pytest.raises(ConfigError) as caught:
        check(ServeConfig(**settings))  # type: ignore[arg-type]
    assert message in str(caught.value)


def test_the_registry_runs_a_face_s_own_checks() -> None:
    bad = ServeConfig(faces=faces(ydb=YdbSettings(port=2136, database="local")))
    with pytest.raises(ConfigError, match="--ydb-database='local'"):
        check(bad)
    check(ServeConfig(faces=faces(ydb=YdbSettings(database="local"))))  # (off: not checked)


def test_a_face_s_rows_and_fields_cannot_drift_apart() -> None:
    row = Setting("dflockd_port", int, 1, "N", "a port")
    with pytest.raises(ValueError, match="are not the fields of DflockdSettings"):
        FaceSettings("dflockd", DflockdSettings, (row,))


def test_listing_the_faces_settings_imports_none_of_their_libraries() -> None:
    """Each entry's module, and what it imports when imported, imports no grpc, ydb or
    protobuf at import time: the faces' settings are listed without their extras."""
    known = modules(SOURCE)
    entry_modules = [face.factory.__module__ for face in entries()]
    assert "tenure.compat.ydb.entry" in entry_modules
    seen: set[str] = set()
    todo = list(entry_modules)
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            edges = imports_of(name, known[name], known)
            todo += [edge.target for edge in edges if edge.where == AT_IMPORT]
    assert not [name for name in seen if name.endswith(".face")]  # (made when enabled)
    found = []
    for module in sorted(seen):
        for node, where in statements(ast.parse(known[module].read_text())):
            if where != AT_IMPORT or isinstance(node, ast.Call):
                continue
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
            )
            found += [f"{module}: {n}" for n in names if n.split(".")[0] in LIBRARIES]
    assert not found
