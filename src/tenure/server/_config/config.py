"""What ``tenure serve`` runs with, as one value: :class:`ServeConfig`.

Every setting of the server's own table (:data:`tenure.server._config.settings.SETTINGS`)
is a field, with the table's default; each face's settings are kept typed, by face
name, in :attr:`ServeConfig.faces` (:mod:`tenure.server._config.face_settings`), read
back with :meth:`ServeConfig.face`. How a config is read (flags, environment, the
config file) and checked is :mod:`tenure.server._config.serve_config`'s, which makes
it; what the server logs of it is :meth:`ServeConfig.fields`: paths only, never a
secret.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from tenure._core.engine import DEFAULT_STEP_BUDGET
from tenure._core.name_stats import CONTENTION_NAMES, CONTENTION_SERIES, CONTENTION_SHARE
from tenure._core.values import (
    DEADLOCK_SEARCH_LIMIT,
    DEFAULT_NODE_CEILINGS,
    MAX_LISTED_PER_FIRING,
    MAX_PREFIX_WATCHES_PER_NODE,
    MAX_WATCHES_PER_SEMAPHORE,
    WHY_LOOK_LIMIT,
)
from tenure._protocol import DEFAULT_MAX_FRAME_SIZE
from tenure._runtime.collector import DEFAULT_FREEZE_AFTER
from tenure.server._config.audit_settings import (
    DEFAULT_AUDIT_LOG_KEEP,
    DEFAULT_AUDIT_LOG_MAX_BYTES,
    DEFAULT_AUDIT_LOG_QUEUE,
)
from tenure.server._config.cluster_settings import (
    DEFAULT_CELL,
    DEFAULT_LEASE_TTL,
    DEFAULT_MAX_ENTRY,
    DEFAULT_SNAPSHOT_EVERY,
    DEFAULT_STALE_READ_WAIT,
)
from tenure.server._config.cluster_url import without_secrets
from tenure.server._config.face_settings import FaceSettings, S
from tenure.server._config.settings import (
    DEFAULT_BATCH_INTERVAL,
    DEFAULT_DATA_DIR,
    DEFAULT_HANDSHAKE_TIMEOUT,
    DEFAULT_HOST,
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_QUEUED_PUSHES,
    DEFAULT_MAX_REQUESTS_PER_TURN,
    DEFAULT_MAX_UNREAD,
    DEFAULT_PAUSE_UNREAD,
    DEFAULT_PORT,
    DEFAULT_SHUTDOWN_GRACE,
    DEFAULT_SLOW_COMMIT,
)
from tenure.server._durability.storage import FsyncMode
from tenure.server._net.throttle import DEFAULT_MAX_TRACKED

__all__ = ["ServeConfig"]


@dataclass(frozen=True, slots=True)
class ServeConfig:
    """Everything ``tenure serve`` needs to start. ``sources`` says where each came from.

    Durations are in seconds. ``tls_cert`` and ``tls_key`` are both set or both None;
    ``tls_client_ca`` needs them. ``config_file`` is the file the settings were read
    from, if any.
    """

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    shards: int = 1  # independent servers on ports port..port+shards-1 (_shards.py)
    data_dir: Path = Path(DEFAULT_DATA_DIR)
    fsync: FsyncMode = FsyncMode.ALWAYS
    batch_interval: float = DEFAULT_BATCH_INTERVAL
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    max_hello_size: int = 16384  # the largest Hello frame, its length prefix included
    max_handshaking: int = 1024  # connections not yet past Hello
    max_connections_per_address: int = 0  # 0: no cap
    auth_failures_per_minute: int = 10  # 0: never throttle
    auth_block_time: float = 60.0
    auth_max_tracked: int = DEFAULT_MAX_TRACKED
    max_unread: int = DEFAULT_MAX_UNREAD
    pause_unread: int = DEFAULT_PAUSE_UNREAD
    max_requests_per_turn: int = DEFAULT_MAX_REQUESTS_PER_TURN
    max_queued_pushes: int = DEFAULT_MAX_QUEUED_PUSHES
    deadlock_search_limit: int = DEADLOCK_SEARCH_LIMIT  # 0: no deadlock detection
    why_look_limit: int = WHY_LOOK_LIMIT
    contention_names: int = CONTENTION_NAMES
    contention_share: float = CONTENTION_SHARE
    contention_series: int = CONTENTION_SERIES
    long_hold_seconds: float = 0.0  # 0: none told of, on the nodes without a long_hold
    max_nodes: int = 10_000
    max_prefix_watches_per_node: int = MAX_PREFIX_WATCHES_PER_NODE
    max_watches_per_semaphore: int = MAX_WATCHES_PER_SEMAPHORE
    max_listed_per_firing: int = MAX_LISTED_PER_FIRING
    step_budget: int = DEFAULT_STEP_BUDGET  # items of deadline work per turn of the loop
    gc_freeze_after: float = DEFAULT_FREEZE_AFTER  # 0: never freeze (collector.freeze_after)
    # The ceilings of NodeConfig's limits (DEFAULT_NODE_CEILINGS; --max-node-*).
    max_node_sessions: int = 1_000_000
    max_node_semaphores: int = 1_000_000
    max_node_waiters: int = 1_000_000
    max_node_data_size: int = 16 * 1024 * 1024
    max_node_watches_per_session: int = 100_000
    max_node_missed_per_session: int = 100_000
    max_node_claims: int = 1_000_000
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT  # 0: never
    handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT
    shutdown_grace: float = DEFAULT_SHUTDOWN_GRACE
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_client_ca: Path | None = None
    auth_file: Path | None = None
    event_loop: str = "auto"
    http_port: int = 0  # 0: no HTTP endpoint
    http_host: str = ""  # empty: the same as ``host``
    http_tls_cert: Path | None = None  # both or neither: https on the HTTP port
    http_tls_key: Path | None = None
    http_max_connections: int = 256
    http_idle_timeout: float = 60.0
    http_header_timeout: float = 10.0
    http_allowed_hosts: str = ""  # the dashboard's Host/Origin, besides loopback
    metrics_auth: bool = False  # /metrics wants a token
    dashboard_max_nodes: int = 50
    dashboard_max_semaphores: int = 100
    dashboard_max_sessions: int = 100
    dashboard_max_holders: int = 20
    dashboard_max_scan: int = 10_000  # holders read per view to tell recipes, in all
    dashboard_max_bytes: int = 512 * 1024  # a view's most bytes of JSON
    dashboard_rate: float = 2.0  # updates per second per page, at most
    dashboard_max_streams: int = 64  # event streams served at once
    dashboard_max_streams_per_token: int = 8  # per token (per address without tokens)
    max_backups: int = 1  # backups taken at once
    backup_timeout: float = 300.0  # a backup moving under 256 KiB in this long is given up
    dashboard_ticket_ttl: float = 28800.0  # a dashboard login's lifetime
    dashboard_actions: bool = False  # without tokens: may the dashboard end sessions?
    log_format: str = "auto"
    slow_commit: float = DEFAULT_SLOW_COMMIT  # 0: never logged
    # The audit log (empty: none; "-": standard output): audit_settings.py.
    audit_log: str = ""
    audit_log_max_bytes: int = DEFAULT_AUDIT_LOG_MAX_BYTES  # 0: never rotated
    audit_log_keep: int = DEFAULT_AUDIT_LOG_KEEP
    audit_log_queue: int = DEFAULT_AUDIT_LOG_QUEUE
    # Quotas per token (0: none) and the memory budget (0: none): quota_settings.py.
    quota_sessions: int = 0
    quota_watches: int = 0
    quota_waiters: int = 0
    quota_semaphores: int = 0
    quota_nodes: int = 0
    quota_data_bytes: int = 0
    quota_prefix_watches: int = 0
    quota_recovery_window: float = 0.0
    quota_requests_per_second: float = 0.0
    memory_budget: int = 0
    cluster: str = ""  # empty: not a member of a cluster
    cell: str = DEFAULT_CELL  # the member's cell of the service
    cell_etcd: str = ""  # empty: the cell's log is in --cluster's etcd
    advertise: str = ""  # empty: host and the port bound
    member_name: str = ""  # empty: the advertised address
    cluster_lease_ttl: int = DEFAULT_LEASE_TTL
    cluster_max_entry: int = DEFAULT_MAX_ENTRY
    cluster_snapshot_every: int = DEFAULT_SNAPSHOT_EVERY
    stale_read_wait: float = DEFAULT_STALE_READ_WAIT  # a standby's, for a stale read
    #: Each face's settings, by face name (:mod:`.face_settings`; read typed with
    #: :meth:`face`): a face not here has its defaults.
    faces: Mapping[str, object] = field(default_factory=dict)
    config_file: Path | None = None
    sources: Mapping[str, str] = field(default_factory=dict)

    @property
    def http_address(self) -> tuple[str, int] | None:
        """Where the HTTP endpoint listens (``--http-host``, else ``--host``); None: off."""
        if not self.http_port:
            return None
        return (self.http_host or self.host, self.http_port)

    @property
    def node_ceilings(self) -> dict[str, int]:
        """The most each limit of a NodeConfig may be (``--max-node-*``), by field."""
        return {
            name: getattr(self, "max_node_" + name.removeprefix("max_"))
            for name in DEFAULT_NODE_CEILINGS
        }

    def face(self, settings: FaceSettings[S]) -> S:
        """The settings of face ``settings.face``, typed (its defaults if none are here).

        Raises:
            TypeError: what is kept under that name is not a ``settings.kind``.
        """
        kept = self.faces.get(settings.face)
        if kept is None:
            return settings.kind()
        if not isinstance(kept, settings.kind):
            raise TypeError(
                f"the {settings.face} face's settings are a {type(kept).__name__}, "
                f"not a {settings.kind.__name__}"
            )
        return kept

    def given(self) -> dict[str, object]:
        """The settings given (by a flag, a variable or the config file) as :meth:`fields`
        has them, and ``sources``: where each came from (the config line for people)."""
        every = self.fields()
        sources = {name: where for name, where in self.sources.items() if where != "default"}
        return {name: every[name] for name in sources} | {"sources": sources}

    def fields(self) -> dict[str, object]:
        """Every setting as JSON-ready data, and where each came from (for the log).

        Paths only: the secrets in the auth file are never part of the config.
        """
        values: dict[str, object] = {}
        for item in fields(self):
            value = getattr(self, item.name)
            if item.name == "faces":  # each face's values under their settings' names
                for face, settings in sorted(value.items()):
                    for name, field_value in asdict(settings).items():
                        values[f"{face}_{name}"] = _shown(field_value)
                continue
            if item.name == "sources":
                value = dict(value)
            elif item.name in ("cluster", "cell_etcd") and value:
                value = without_secrets(value)
            values[item.name] = _shown(value)
        return values


def _shown(value: object) -> object:
    """A setting's value as JSON-ready data (a path resolved, a mode's word)."""
    if isinstance(value, Path):
        return str(value.resolve())
    if isinstance(value, FsyncMode):
        return value.value
    return value
