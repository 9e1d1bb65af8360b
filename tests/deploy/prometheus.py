"""A real Prometheus (Debian's ``prometheus``) for the tests: scraping given targets
every second and evaluating given rules every second, on a free loopback port with
its storage in a temporary directory; its alerts read over its HTTP API."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

import yaml

from tests.deploy.kit import http_get, wait_http
from tests.ports import free_port

__all__ = ["Prometheus", "with_short_for"]

#: Bound of a start and of a stop, in seconds.
WAIT: Final = 30.0


def with_short_for(rules: str, duration: str = "1s") -> str:
    """``rules`` with every ``for:`` duration set to ``duration``, and nothing else
    changed: production rules wait minutes before firing, a test cannot."""
    return re.sub(r"(?m)^(\s*for:\s*)\S+\s*$", rf"\g<1>{duration}", rules)


class Prometheus:
    """``prometheus`` (the binary at ``binary``) scraping ``targets`` as job
    ``tenure`` and evaluating the rule file ``rules``, under ``root``."""

    def __init__(self, binary: str, root: Path, targets: list[str], rules: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = {
            "global": {
                "scrape_interval": "1s",
                "scrape_timeout": "900ms",
                "evaluation_interval": "1s",
            },
            "rule_files": [str(rules)],
            "scrape_configs": [{"job_name": "tenure", "static_configs": [{"targets": targets}]}],
        }
        (root / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.log_path = root / "prometheus.log"
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                [
                    binary,
                    f"--config.file={root / 'prometheus.yml'}",
                    f"--storage.tsdb.path={root / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--storage.tsdb.retention.time=1h",
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def __enter__(self) -> Prometheus:
        try:
            wait_http(f"{self.url}/-/ready", seconds=WAIT)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """SIGTERM, SIGKILL after a bounded wait."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=WAIT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=WAIT)

    def output(self) -> str:
        """What it logged."""
        return self.log_path.read_text(errors="replace")

    def api(self, path: str) -> Any:
        """The ``data`` of an API answer (an AssertionError naming the reply otherwise)."""
        status, body = http_get(f"{self.url}/api/v1/{path}")
        assert status == 200, f"{path}: {status} {body[:500]!r}\n{self.output()[-3000:]}"
        return json.loads(body)["data"]

    def alerts(self) -> list[dict[str, Any]]:
        """The alerts pending or firing now."""
        alerts: list[dict[str, Any]] = self.api("alerts")["alerts"]
        return alerts

    def firing(self, name: str) -> list[dict[str, Any]]:
        """The alerts named ``name`` firing now."""
        return [
            alert
            for alert in self.alerts()
            if alert["labels"]["alertname"] == name and alert["state"] == "firing"
        ]

    def wait_firing(self, name: str, seconds: float = 20.0) -> list[dict[str, Any]]:
        """The alerts named ``name`` once one fires (bounded wait)."""
        deadline = time.monotonic() + seconds
        while not (fired := self.firing(name)):
            assert time.monotonic() < deadline, f"{name} never fired: {self.alerts()}"
            time.sleep(0.2)
        return fired

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's vector."""
        status, body = http_get(f"{self.url}/api/v1/query?query={quote(expr, safe='')}")
        assert status == 200, f"{expr}: {status} {body[:500]!r}"
        result: list[dict[str, Any]] = json.loads(body)["data"]["result"]
        return result

    def wait_scraped(self, expr: str, value: float, seconds: float = 20.0) -> None:
        """Until ``expr`` (one series) evaluates to ``value`` (bounded)."""
        deadline = time.monotonic() + seconds
        while True:
            result = self.query(expr)
            if len(result) == 1 and float(result[0]["value"][1]) == value:
                return
            assert time.monotonic() < deadline, f"{expr} is {result}, never {value}"
            time.sleep(0.2)
