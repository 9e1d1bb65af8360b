"""A Flask app whose rate limits all its replicas share: flask-limiter on tenure://.

flask-limiter (over the ``limits`` package) counts each client's requests in a
storage; with ``storage_uri="tenure://..."`` that storage is a tenure server, so a
client that spreads its requests over several replicas (behind a load balancer)
gets the limit once, not once per replica. ``import tenure.contrib.limits`` is what
registers ``tenure://`` with limits. ``GET /ping`` allows 5 requests a minute per
client address, across the replicas; the 6th is refused with 429 on any of them.
``RATELIMIT_STRATEGY`` picks limits' strategy (``fixed-window``, ``moving-window``
or ``sliding-window-counter``: the storage keeps all three).

Run a tenure server (``scripts/start``) and two replicas, then ask both::

    TENURE_URL=tenure://127.0.0.1:6388 PORT=8001 python examples/limits_flask.py
    TENURE_URL=tenure://127.0.0.1:6388 PORT=8002 python examples/limits_flask.py
    for port in 8001 8002 8001 8002 8001 8002; do curl -s 127.0.0.1:$port/ping; done

It needs ``pip install 'tenure[limits]' flask flask-limiter``.
"""

from __future__ import annotations

import asyncio
import logging
import os

from flask import Flask
from flask_limiter import Limiter
from flask_limiter.util import get_remote_address
from werkzeug.serving import make_server

import tenure.contrib.limits  # noqa: F401  (registers tenure:// and tenures:// with limits)

URL = os.environ.get("TENURE_URL") or "tenure://127.0.0.1:6388"
REPLICA = os.environ.get("REPLICA", "replica")

app = Flask(__name__)
app.config["RATELIMIT_STRATEGY"] = os.environ.get("RATELIMIT_STRATEGY", "fixed-window")
limiter = Limiter(
    get_remote_address,  # the client's address: one limit per client, on every replica
    app=app,
    storage_uri=f"{URL}{'&' if '?' in URL else '?'}node=flask-demo",
    headers_enabled=True,  # X-RateLimit-Limit, -Remaining, -Reset and Retry-After
)


@app.get("/ping")
@limiter.limit("5 per minute")
def ping() -> str:
    """Limited: 5 a minute per client, across every replica."""
    return f"pong from {REPLICA}\n"


@app.get("/health")
@limiter.exempt
def health() -> str:
    """Not limited: for load balancers (and the tests) to see the replica is up."""
    return "ok\n"


async def main() -> None:
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request
    port = int(os.environ.get("PORT", "8000"))
    server = make_server("127.0.0.1", port, app, threaded=True)
    print(f"{REPLICA}: serving on http://127.0.0.1:{port}", flush=True)
    await asyncio.to_thread(server.serve_forever)


if __name__ == "__main__":
    asyncio.run(main())
