"""The data directory's small files (instance id, secret) survive a power cut once made:
each is written whole, renamed into place, and its directory fsynced after the rename
(found by the power-loss scenario: the secret's directory was not, so a cut soon
after a first start lost it and the next start minted another)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tenure.server._durability.identity import (
    INSTANCE_ID_FILE,
    SECRET_FILE,
    instance_id,
    server_secret,
)


def _fsynced(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record the path of every fsync'd descriptor, in order."""
    synced: list[str] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return synced


@pytest.mark.parametrize(
    ("name", "make"),
    [
        (SECRET_FILE, lambda path: server_secret(path)),
        (INSTANCE_ID_FILE, lambda path: instance_id(path, fresh=True)),
    ],
    ids=["secret", "instance id"],
)
def test_a_new_file_and_then_its_directory_are_fsynced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, make: Callable[[Path], bytes]
) -> None:
    synced = _fsynced(monkeypatch)
    made = make(tmp_path)
    assert (tmp_path / name).read_bytes() == made
    # The data reached the disk under the temp name, then the rename did.
    assert synced[-1] == str(tmp_path)
    assert any(p.endswith(".tmp") for p in synced[:-1])
    assert not list(tmp_path.glob("*.tmp"))


def test_the_secret_is_private_and_kept(tmp_path: Path) -> None:
    secret = server_secret(tmp_path)
    assert (tmp_path / SECRET_FILE).stat().st_mode & 0o777 == 0o600
    assert server_secret(tmp_path) == secret
