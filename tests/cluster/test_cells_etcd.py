"""Cells and their etcd (docs/cluster.md, "Cells"): a cell with an etcd of its own
(``--cell-etcd``) keeps its log, snapshots and backups there and the directory in the
service's; a cluster made before cells is cell ``default``, whose nodes its next
leader places in the directory; the settings a cell refuses."""

from __future__ import annotations

import argparse
import uuid
from pathlib import Path

import pytest

import tenure
from tenure._core import CreateNode
from tenure._etcd.client import EtcdClient
from tenure._etcd.requests import delete_prefix, range_request
from tenure.backends.remote import read_backup
from tenure.errors import ErrorCode, WrongCellError
from tenure.server import _faces
from tenure.server._config.cluster_url import parse_cluster_url
from tenure.server._config.serve_config import ConfigError, add_arguments, resolve
from tenure.server._durability.backup import read_backup as read_backup_file
from tests.cluster.cells import cell_nodes
from tests.cluster.harness import TenureCluster, until
from tests.cluster.test_cells import Wire
from tests.etcd.cluster import EtcdCluster


async def _keys(endpoints: list[str], prefix: bytes) -> list[bytes]:
    """The keys under ``prefix`` in the etcd at ``endpoints``."""
    conn = EtcdClient(parse_cluster_url(f"etcd://{','.join(endpoints)}/x").connection)
    try:
        reply = await conn.range(range_request(prefix, keys_only=True))
        return [bytes(kv.key) for kv in reply.kvs]
    finally:
        await conn.close()


async def test_a_cell_of_its_own_etcd_keeps_its_log_snapshots_and_backups_there(
    tmp_path: Path, etcd_member: EtcdCluster
) -> None:
    with EtcdCluster(1, root=tmp_path / "own-etcd") as own:
        name = f"s{uuid.uuid4().hex[:10]}"
        a = TenureCluster(tmp_path / "a", etcd_member.endpoints, name=name, size=1)
        b = TenureCluster(
            tmp_path / "b",
            etcd_member.endpoints,
            name=name,
            size=1,
            extra=(
                "--cell", "b",
                "--cell-etcd", f"etcd://{','.join(own.endpoints)}",
                "--cluster-snapshot-every", "1",
            ),
        )  # fmt: skip
        with a, b:
            node = f"own-{uuid.uuid4().hex[:8]}"
            async with Wire(b.leader()) as client:
                await client.call(CreateNode(node))
            # Its log and snapshots: in its own etcd, under the cell's keys.
            cell_root = f"/tenure/c/{name}@b/".encode()

            async def snapshot_written() -> bool:
                return f"/tenure/c/{name}@b/snapshot".encode() in await _keys(
                    own.endpoints, cell_root
                )

            await until(snapshot_written, "cell b's snapshot in its own etcd")
            assert not await _keys(etcd_member.endpoints, cell_root)
            # The directory: in the service's etcd, placing the node on cell b.
            directory = f"/tenure/s/{name}/nodes/".encode()
            assert f"/tenure/s/{name}/nodes/{node}".encode() in await _keys(
                etcd_member.endpoints, directory
            )
            # Cell a sends it there.
            async with Wire(a.leader()) as client:
                failure = await client.fail(CreateNode(node))
                assert failure.code == ErrorCode.WRONG_CELL
                assert WrongCellError(failure.message).cell == "b"
            # A backup of cell b is of its state, read from its own etcd.
            out = tmp_path / "b.backup"
            with out.open("wb") as file:
                await read_backup(b.url(), {}, file.write)
            assert node in read_backup_file(out).engine().nodes


async def test_a_cluster_made_before_cells_is_cell_default_its_nodes_placed(
    tmp_path: Path, etcd_member: EtcdCluster
) -> None:
    name = f"s{uuid.uuid4().hex[:10]}"
    with TenureCluster(tmp_path / "old", etcd_member.endpoints, name=name) as old:
        nodes = [f"old-{n}-{uuid.uuid4().hex[:6]}" for n in range(3)]
        async with tenure.connect(old.url()) as client:
            for node in nodes:
                await client.create_node(node)
        # As a cluster of the release before cells would have it: no directory.
        conn = EtcdClient(parse_cluster_url(old.etcd_url).connection)
        try:
            await conn.txn([], [delete_prefix(f"/tenure/s/{name}/nodes/".encode())])
        finally:
            await conn.close()
        leader = old.leader()
        leader.kill()
        old.leader(excluding=leader)  # (its successor places its nodes as it takes over)
        leader.start()
        placed = [f"/tenure/s/{name}/nodes/{node}".encode() for node in nodes]

        async def all_placed() -> bool:
            found = await _keys(etcd_member.endpoints, f"/tenure/s/{name}/nodes/".encode())
            return all(key in found for key in placed)

        await until(all_placed, "every node of the default cell placed")
        # A new cell joins; the old nodes stay the default cell's.
        with TenureCluster(
            tmp_path / "new", etcd_member.endpoints, name=name, size=1, extra=("--cell", "b")
        ) as new:
            async with Wire(new.leader()) as wire:
                failure = await wire.fail(CreateNode(nodes[0]))
            assert failure.code == ErrorCode.WRONG_CELL
            assert WrongCellError(failure.message).cell == "default"
            assert set(nodes) <= await cell_nodes(old)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--cell", "no/slash"], "--cell='no/slash'"),
        (["--cell", "b", "--cell-etcd", "etcd://127.0.0.1:2379/path"], "no path"),
        (["--cell", "b", "--cell-etcd", "http://127.0.0.1:2379"], "--cell-etcd="),
        (["--cell", "b", "--ydb-port", "12345"], "--ydb-port with --cell b"),
    ],
)
def test_the_settings_a_cell_refuses(args: list[str], said: str) -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser, _faces.settings())
    flags = ["--cluster", "etcd://127.0.0.1:2379/svc", "--host", "127.0.0.1", *args]
    with pytest.raises(ConfigError) as refused:
        _faces.check(resolve(parser.parse_args(flags), {}, _faces.settings()))
    assert said in str(refused.value)


def test_a_member_of_another_cell_runs_only_the_faces_it_relays() -> None:
    """dflockd's face runs on every member (another cell's relays its connections to
    cell default's leader, and keeps none of its nodes); YDB's on cell default's only."""
    parser = argparse.ArgumentParser()
    add_arguments(parser, _faces.settings())
    flags = ["--cluster", "etcd://127.0.0.1:2379/svc", "--host", "127.0.0.1"]
    flags += ["--ydb-port", "12345"]
    default = resolve(parser.parse_args(flags), {}, _faces.settings())
    other = resolve(
        parser.parse_args([*flags[:-2], "--cell", "b", "--dflockd-port", "12346"]),
        {},
        _faces.settings(),
    )
    _faces.check(other)  # (dflockd's own port: relayed there too)
    assert [face.name for face in _faces.enabled(default)] == ["dflockd", "ydb"]
    assert [face.name for face in _faces.enabled(other)] == ["dflockd"]
    assert _faces.kept_nodes(default) == ["dflockd", "dflockd-semaphores"]
    assert _faces.kept_nodes(other) == []
