"""The settings of the HTTP endpoint: /metrics, /healthz, /readyz and the dashboard.

Rows of the settings table (:data:`tenure.server._config.settings.SETTINGS` includes
them, in this order, where the endpoint's settings always stood); what each does is
in docs/operations.md ("Metrics, health and logs", "Dashboard") and in
:mod:`tenure.server._http`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from tenure.server._config.hosts import check_hosts_setting
from tenure.server._config.setting import Setting, in_range

__all__ = ["HTTP_SETTINGS"]

#: The HTTP endpoint's rows of the settings table.
HTTP_SETTINGS: Final = (
    Setting(
        "http_port",
        int,
        0,
        "N",
        "serve HTTP on this port: /metrics (Prometheus), /healthz, /readyz, / (the "
        "dashboard); needs the "
        "server extra (pip install 'tenure[server]'); 0: no HTTP (default: %(default)s)",
        in_range(0, 65535),
    ),
    Setting(
        "http_host",
        str,
        "",
        "ADDR",
        "address of the HTTP endpoint; empty: the same as --host (default: empty)",
    ),
    Setting(
        "http_tls_cert",
        Path,
        None,
        "PEM",
        "serve the HTTP endpoint over TLS (https) with this certificate chain (PEM); needs "
        "--http-tls-key; --tls-cert is not used for it (default: plain HTTP)",
    ),
    Setting(
        "http_tls_key",
        Path,
        None,
        "PEM",
        "the private key of --http-tls-cert (PEM, unencrypted)",
    ),
    Setting(
        "http_max_connections",
        int,
        256,
        "N",
        "HTTP connections open at once; one more is answered 503 and closed at once "
        "(default: %(default)s)",
        in_range(1, 100_000),
    ),
    Setting(
        "http_idle_timeout",
        float,
        60.0,
        "S",
        "an HTTP connection with no request in progress is closed after this many seconds "
        "(default: %(default)s)",
        in_range(0.1, 86400),
    ),
    Setting(
        "http_header_timeout",
        float,
        10.0,
        "S",
        "a new HTTP connection must send a whole request head (and finish its TLS "
        "handshake) within this many seconds, or it is closed (default: %(default)s)",
        in_range(0.1, 3600),
    ),
    Setting(
        "http_allowed_hosts",
        str,
        "",
        "HOSTS",
        "dashboard: host names its requests may name in Host and Origin, comma-separated, "
        "besides loopback and --http-host; '*': any; else 421/403 (DNS rebinding) "
        "(default: loopback and --http-host only)",
        check_hosts_setting,
    ),
    Setting(
        "metrics_auth",
        bool,
        False,
        "BOOL",
        "/metrics wants a token of --auth-file (any access) as Authorization: Bearer; "
        "off: open to whoever reaches the HTTP port, as Prometheus expects "
        "(default: %(default)s)",
    ),
    # -- the dashboard at / of the HTTP endpoint (tenure.server._http.dashboard) -----------
    Setting(
        "dashboard_max_nodes",
        int,
        50,
        "N",
        "dashboard: nodes shown, the first N by name, the busiest first (default: %(default)s)",
        in_range(1, 10_000),
    ),
    Setting(
        "dashboard_max_semaphores",
        int,
        100,
        "N",
        "dashboard: semaphores shown per node, the first N by name (default: %(default)s)",
        in_range(1, 10_000),
    ),
    Setting(
        "dashboard_max_sessions",
        int,
        100,
        "N",
        "dashboard: sessions shown per node, the first N by id (default: %(default)s)",
        in_range(1, 10_000),
    ),
    Setting(
        "dashboard_max_holders",
        int,
        20,
        "N",
        "dashboard: owners, and waiters, shown per semaphore, the first N in grant and "
        "queue order (default: %(default)s)",
        in_range(1, 10_000),
    ),
    Setting(
        "dashboard_max_scan",
        int,
        10_000,
        "N",
        "dashboard: owners and waiters one view reads to tell the semaphores' recipes, in "
        "all: each semaphore shown reads a fair share, at most 1000; its recipe says how "
        "many it read (default: %(default)s)",
        in_range(1, 1_000_000),
    ),
    Setting(
        "dashboard_max_bytes",
        int,
        512 * 1024,
        "BYTES",
        "dashboard: the most bytes of one view (JSON); the semaphores, sessions and nodes "
        "past it are left out, the totals still counted (default: %(default)s)",
        in_range(16 * 1024, 64 * 1024 * 1024),
    ),
    Setting(
        "dashboard_rate",
        float,
        2.0,
        "PER_SECOND",
        "dashboard: at most this many updates per second to each open page, more than 0 "
        "and at most 20 (default: %(default)s)",
        in_range(0, 20, above=True),
    ),
    Setting(
        "dashboard_max_streams",
        int,
        64,
        "N",
        "dashboard: event streams (open pages) served at once; one more is answered 503 "
        "and its page tries again later (default: %(default)s)",
        in_range(1, 10_000),
    ),
    Setting(
        "dashboard_max_streams_per_token",
        int,
        8,
        "N",
        "dashboard: event streams one token may hold open at once (without --auth-file: "
        "one address); one more is answered 429 (default: %(default)s)",
        in_range(1, 10_000),
    ),
    Setting(
        "max_backups",
        int,
        1,
        "N",
        "backups taken at once (tenure backup, POST /admin/backup), at most: each forks a "
        "child holding a copy-on-write view of the state; one more is answered 429 and "
        "audited, 1 to 16 (default: %(default)s)",
        in_range(1, 16),
    ),
    Setting(
        "backup_timeout",
        float,
        300.0,
        "S",
        "a backup (tenure backup, POST /admin/backup) that moves less than 256 KiB to its "
        "client in this many seconds (a client that stops reading, or reads slower) is "
        "given up: its connection closed, its child killed, its place among --max-backups "
        "freed; 1 to 86400 (default: %(default)s)",
        in_range(1, 86400),
    ),
    Setting(
        "dashboard_ticket_ttl",
        float,
        28800.0,
        "S",
        "dashboard: how long a login is good for, in seconds (its cookie holds a signed "
        "ticket that expires then) (default: %(default)s)",
        in_range(10, 30 * 86400),
    ),
    Setting(
        "dashboard_actions",
        bool,
        False,
        "BOOL",
        "dashboard without --auth-file: offer 'end session' (kill_session) to anyone who "
        "reaches the HTTP port; with --auth-file only read-write tokens may, regardless "
        "(default: %(default)s)",
    ),
)
