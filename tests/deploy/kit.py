"""What the deployment kit's tests share: where the kit is, the tools they run (a
missing one skips its tests, and fails them under ``CI=true``), reading a real
server's ``/metrics``, and the metric names a PromQL expression reads."""

from __future__ import annotations

import re
import shutil
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Final

from prometheus_client.parser import text_string_to_metric_families

from tests.servers import require

__all__ = [
    "DEPLOY",
    "PROMETHEUS_MADE",
    "exported_series",
    "http_get",
    "promql_metric_names",
    "tool",
    "wait_http",
]

#: The kit.
DEPLOY: Final = Path(__file__).resolve().parents[2] / "deploy"
#: Series Prometheus makes itself for each target, which no /metrics exports.
PROMETHEUS_MADE: Final = frozenset({"up", "scrape_duration_seconds", "scrape_samples_scraped"})

_OPENER: Final = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def tool(name: str, package: str) -> str:
    """The path of the program ``name`` (Debian's ``package`` has it: scripts/bootstrap
    installs it); skips the test without it, fails it under ``CI=true``."""
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin:/sbin:/bin")
    require(None if found else f"{name} is missing (apt-get install {package})", name)
    assert found is not None
    return found


def http_get(url: str, timeout: float = 2.0) -> tuple[int, bytes]:
    """``(status, body)`` of a GET (an HTTP error's status too); ``(0, b"")`` when
    nothing answers."""
    try:
        with _OPENER.open(url, timeout=timeout) as reply:
            return int(reply.status), reply.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
    except (urllib.error.URLError, OSError):
        return 0, b""


def wait_http(url: str, status: int = 200, seconds: float = 30.0) -> bytes:
    """The body of ``url`` once it answers ``status`` (bounded wait)."""
    deadline = time.monotonic() + seconds
    while True:
        got, body = http_get(url)
        if got == status:
            return body
        assert time.monotonic() < deadline, f"{url} answered {got}, not {status}, for {seconds}s"
        time.sleep(0.1)


#: The series a family of each type is queried by (prometheus_client's parser names a
#: counter's family without ``_total``; a histogram's samples add these suffixes).
_SUFFIXES: Final = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "summary": ("", "_sum", "_count", "_created"),
    "info": ("_info",),
    "stateset": ("",),
    "gaugehistogram": ("_bucket", "_gsum", "_gcount"),
}


def exported_series(text: str) -> set[str]:
    """Every series name a scrape of ``/metrics`` (``text``) lets a query name, by its
    families' types: a counter ``x`` is ``x_total``, never ``x``; a histogram ``h`` is
    ``h_bucket``, ``h_sum``, ``h_count``; a gauge its own name. A family with no
    sample yet (a counter no label set has counted) is listed too: its ``# TYPE``
    line is what says it is exported."""
    names: set[str] = set()
    for family in text_string_to_metric_families(text):
        names.update(family.name + suffix for suffix in _SUFFIXES.get(family.type, ("",)))
    return names


#: PromQL's keywords, which look like names.
_KEYWORDS: Final = frozenset(
    {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right"}
    | {"bool", "offset", "inf", "nan", "atan2"}
)
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGE = re.compile(r"\[[^\[\]]*\]")
_LABEL_LIST = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
# A name not inside a number (1e9) nor a variable ($job, ${datasource}).
_NAME = re.compile(r"(?<![\w$.{:])[a-zA-Z_:][\w:]*")


def promql_metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression (or Grafana's, with ``$variables``) reads:
    what is left of it without strings, label matchers, ranges, label lists, function
    calls and keywords."""
    text = _STRING.sub(" ", expr)
    text = _MATCHERS.sub(" ", text)
    text = _RANGE.sub(" ", text)
    text = _LABEL_LIST.sub(" ", text)
    names: set[str] = set()
    for match in _NAME.finditer(text):
        name = match.group()
        called = text[match.end() :].lstrip().startswith("(")
        if not called and name.lower() not in _KEYWORDS:
            names.add(name)
    return names
