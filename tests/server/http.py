"""Reading a real server's HTTP endpoint (``--http-port``) from the tests."""

from __future__ import annotations

from collections.abc import Mapping

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from .wire import WAIT

#: One scrape: (sample name, its labels) -> value.
Samples = Mapping[tuple[str, frozenset[tuple[str, str]]], float]


async def get(port: int, path: str) -> tuple[int, str]:
    """GET ``path`` of the endpoint on ``port``: (status, body), within WAIT."""
    timeout = aiohttp.ClientTimeout(total=WAIT)
    async with (
        aiohttp.ClientSession(timeout=timeout) as client,
        client.get(f"http://127.0.0.1:{port}{path}") as response,
    ):
        return response.status, await response.text()


async def scrape(port: int) -> Samples:
    """``/metrics``, parsed by prometheus-client's own parser."""
    status, text = await get(port, "/metrics")
    assert status == 200, text
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sample ``name`` with exactly ``labels`` (0 if the series has no such sample yet:
    a labelled counter shows a label set only once it was counted)."""
    return samples.get((name, frozenset(labels.items())), 0.0)
