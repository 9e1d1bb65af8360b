"""A walk of every semaphore of the running engine, a slice at a time: :func:`semaphore_pages`.

What reads the whole state off the request path (``/metrics``' counts, the long-hold
walker) must not stall the loop: a node of 100,000 semaphores walked at once was a
250 ms stall (issue 37). So the walk follows the engine's sorted indexes (the nodes',
then each node's semaphores') from the last name read, ``budget`` looks a turn of the
loop (a page of names and the node it is in), and lets every other connection be
served between. Nodes and semaphores made or gone meanwhile cost nothing and break
nothing: each semaphore is met once at most, as the state was a few turns before.
After a turn it reads the running engine again (a cluster's new term brings a new
one) and goes on from the same names there.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Final

from tenure._core import Engine
from tenure._core.node import Node

__all__ = ["NAME_PAGE", "semaphore_pages"]

#: Names read from an index at once (what one lookup of a page costs).
NAME_PAGE: Final = 1000


def _every(node: Node) -> bool:
    return True


async def semaphore_pages(
    engine: Callable[[], Engine | None],
    budget: int,
    wanted: Callable[[Node], bool] = _every,
) -> AsyncIterator[tuple[Node, list[str]]]:
    """Each node ``wanted`` says yes to (asked at each page: a node's settings may
    change meanwhile), with a page of its semaphores' names (in order, at most
    ``budget``); the loop served by others every ``budget`` looks (a node not wanted
    is one). Nothing while ``engine()`` is None."""
    current = engine()
    if current is None:
        return
    budget = max(1, budget)
    page = min(budget, NAME_PAGE)
    looked = 0
    node_names = current.node_index.page("", NAME_PAGE)
    while node_names:
        for node_name in node_names:
            after = ""
            while True:
                node = current.nodes.get(node_name)
                if node is None:
                    break  # dropped meanwhile
                names: list[str] = []
                if wanted(node):
                    names = node.semaphore_index.page(after, page)
                    yield node, names
                looked += len(names) + 1
                if looked >= budget:
                    looked = 0
                    await asyncio.sleep(0)  # everybody else's turn
                    current = engine() or current
                if len(names) < page:
                    break
                after = names[-1]
        node_names = current.node_index.page(node_names[-1], NAME_PAGE)
