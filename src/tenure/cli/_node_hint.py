"""A node a command names that does not exist, said with the names it may have meant.

``tenure lock --node bilign`` once made the mistyped node and ran its command
excluded from nothing; ``tenure describe bilign job`` said only that the node does
not exist (issue 57). Every command that names a node now says, when that node is
missing, which existing names are nearest (``did you mean 'billing'?``: difflib's
measure, over the first :data:`HINT_NODES` names the listing gives), whichever call
found it missing, on every backend: :func:`tenure.cli._common.connect` asks
:func:`missing_node` when a NotFoundError leaves its block.
"""

from __future__ import annotations

import difflib
from typing import Final

from tenure.client import Client
from tenure.errors import NotFoundError, TenureError

__all__ = ["HINT_NODES", "missing_node", "node_names"]

#: The most node names read to say which one a missing node's name was meant to be:
#: the first pages of the listing, on an error's path (a store of a million nodes
#: is not read whole to say so).
HINT_NODES: Final = 10_000
#: How many names a listing page asks for while reading them.
HINT_PAGE: Final = 500


async def missing_node(client: Client, node: str, creatable: bool = False) -> str | None:
    """``node 'bilign' does not exist: did you mean 'billing'?``, or None if ``node``
    exists (or whether it does cannot be read: a token that may not).

    The names offered are the nearest (at most three) among the first
    :data:`HINT_NODES` names the listing gives the token; with none near, the words
    say where the names are (``tenure ls``); ``creatable``: and that
    ``--create-node`` makes it.
    """
    try:
        await client.describe_node(node)
    except NotFoundError:
        pass
    except TenureError:
        return None
    else:
        return None
    words = f"node {node!r} does not exist"
    try:
        names: list[str] | None = await node_names(client, HINT_NODES)
    except TenureError:  # (a token or backend that may not list: no names to offer)
        names = None
    nearest = [] if names is None else difflib.get_close_matches(node, names, n=3)
    notes = [] if nearest or names is None else ["tenure ls lists the nodes"]
    if creatable:
        notes.append("--create-node makes it")
    if nearest:
        words += f": did you mean {' or '.join(repr(name) for name in nearest)}?"
    if notes:
        words += f" ({'; '.join(notes)})"
    return words


async def node_names(client: Client, most: int) -> list[str]:
    """The first ``most`` node names the token may see, by name, a page at a time."""
    names: list[str] = []
    after = ""
    while len(names) < most:
        limit = min(HINT_PAGE, most - len(names))
        page = await client.backend.list_nodes(after=after, limit=limit)
        names += page
        if len(page) < limit:
            break
        after = page[-1]
    return names
