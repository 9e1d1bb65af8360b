"""Every string of the dashboard's view is shown as text, escaped as the CLI escapes it
(``tenure.cli._render.safe``): a session description, a client name, a semaphore or
node name with a bidi override or a control character cannot turn the holder line
around or add a line; the page's requests still name the node as it is."""

from __future__ import annotations

from pathlib import Path

import pytest

import tenure
from tenure.cli._render import safe
from tenure.errors import SessionExpiredError
from tenure.server._http.board import shown_text

from .test_dashboard_api import serve

pytestmark = pytest.mark.timeout(60)

#: Characters that reorder, hide or break text: each must reach the page escaped.
UNSEEN = "\u202e\u202d\u2066\u200f\u061c\u2028\x1b\x00\n\r\t\x7f\x85"
NODE = "jobs\u202e"  # a node name may hold a bidi override (it has no control character)
DESCRIPTION = "\u202eevil\x1b[31m\nsecond line"
CLIENT = "cli\u2066ent\u202d"
MUTEX = "m\u202eutex"


def strings(value: object, key: str = "") -> list[tuple[str, str]]:
    """(key, string) for every string in ``value``, keys included."""
    if isinstance(value, str):
        return [(key, value)]
    if isinstance(value, dict):
        found = []
        for name, item in value.items():
            found += [(key, name), *strings(item, name)]
        return found
    if isinstance(value, list):
        return [pair for item in value for pair in strings(item, key)]
    return []


@pytest.mark.parametrize("text", [DESCRIPTION, CLIENT, MUTEX, NODE, UNSEEN, "plain", "é 🔒"])
def test_the_dashboard_escapes_as_the_cli_does(text: str) -> None:
    assert shown_text(text) == safe(text)


async def test_every_string_of_the_view_is_escaped_and_the_node_still_ends(
    tmp_path: Path,
) -> None:
    for served in serve(tmp_path, "--dashboard-actions", "true"):
        async with tenure.connect(served.url, client_name=CLIENT) as client:
            await client.create_node(NODE)
            session = await client.session(NODE, description=DESCRIPTION)
            lease = await session.mutex(MUTEX).lock()
            view = await served.view()
            for key, text in strings(view):
                if key == "node":
                    continue  # the name requests send back, never shown
                assert not any(char in text for char in UNSEEN), (key, text)
            [node] = view["board"]["nodes"]
            assert node["name"] == safe(NODE) == "jobs\\u202e"
            assert node["node"] == NODE
            [shown] = node["sessions"]
            assert shown["description"] == safe(DESCRIPTION)
            assert shown["identity"]["name"] == safe(CLIENT)
            [semaphore] = node["semaphores"]
            assert semaphore["name"] == safe(MUTEX)
            # The page ends the session by the node's name as it is.
            body = {"node": node["node"], "session_id": shown["session_id"]}
            assert (await served.request("POST", "/kill", body))[0] == 200
            assert isinstance(await lease.lost, SessionExpiredError)
