"""``tenure group ls NODE GROUP`` and ``tenure describe`` of a group: members made for
real on the shared ``tenure serve`` by the API, read by the installed ``tenure``."""

from __future__ import annotations

import asyncio
import json

import pytest

import tenure
from tests.cli.support import run_tenure

pytestmark = pytest.mark.timeout(60)


async def test_group_ls_lists_the_members_and_their_data(url: str, node: str) -> None:
    async with tenure.connect(url) as client:
        await client.create_node(node)
        async with client.session(node, description="worker host") as one:
            two = await client.session(node)
            first = await one.group("workers", max_members=50).join("w-1", b"10.0.0.5:8080")
            # Data and ids a client chose: control and bidi characters must not reach
            # the terminal as themselves.
            second = await two.group("workers").partition("w-\u202e2", weight=2, data=b"\x1b[2J")

            listed = await asyncio.to_thread(run_tenure, "group", "ls", node, "workers", url=url)
            assert listed.returncode == 0, listed.stderr
            lines = listed.stdout.splitlines()
            assert lines[0] == f"group 'workers' in node '{node}': 2 of at most 50 members"
            assert "\x1b" not in listed.stdout
            assert "\u202e" not in listed.stdout
            assert "\\x1b[2J" in listed.stdout
            assert "w-\\u202e2" in listed.stdout
            assert "10.0.0.5:8080" in listed.stdout
            assert f" {first.token} " in listed.stdout

            as_json = await asyncio.to_thread(
                run_tenure, "group", "ls", node, "workers", "--json", url=url
            )
            assert as_json.returncode == 0, as_json.stderr
            doc = json.loads(as_json.stdout)
            assert (doc["group"], doc["max_members"], doc["joining"]) == ("workers", 50, 0)
            members = doc["members"]
            assert [m["id"] for m in members] == ["w-1", "w-\u202e2"]
            assert [m["token"] for m in members] == [first.token, second.token]
            assert [m["weight"] for m in members] == [None, 2]
            assert [m["session_id"] for m in members] == [one.id, two.id]
            assert members[0]["description"] == "worker host"
            assert (members[0]["data"], members[1]["data_base64"]) == ("10.0.0.5:8080", "G1sySg==")

            # describe says what the group is, and so does its --json "recipe".
            described = await asyncio.to_thread(
                run_tenure, "describe", node, "workers", "--json", url=url
            )
            assert described.returncode == 0, described.stderr
            assert json.loads(described.stdout)["recipe"] == {
                "kind": "group",
                "members": 2,
                "ids": ["w-1", "w-\u202e2"],
                "joining": 0,
                "max_members": 50,
                "partition_members": 1,
            }
            text = await asyncio.to_thread(run_tenure, "describe", node, "workers", url=url)
            assert "group: 2 of at most 50 members (w-1, w-\\u202e2), 1 in its partition" in (
                text.stdout
            )

            await second.leave()
            listed = await asyncio.to_thread(
                run_tenure, "group", "ls", node, "workers", "--json", url=url
            )
            assert [m["id"] for m in json.loads(listed.stdout)["members"]] == ["w-1"]
            await two.close()


async def test_group_ls_of_no_group_fails_saying_why(url: str, node: str) -> None:
    async with tenure.connect(url) as client:
        await client.create_node(node)
        async with client.session(node) as session:
            await session.counter("jobs").add(1)
    missing = await asyncio.to_thread(run_tenure, "group", "ls", node, "nothing", url=url)
    assert missing.returncode == 3
    assert "NotFoundError" in missing.stderr
    # A group's words, not its semaphore's (issue 50: "semaphore 'nothing' ...").
    assert f"no group 'nothing' in node '{node}'" in missing.stderr
    assert "semaphore" not in missing.stderr
    counter = await asyncio.to_thread(run_tenure, "group", "ls", node, "jobs", url=url)
    assert counter.returncode == 3
    assert "is not a group" in counter.stderr
