"""The table of ``tenure serve``'s own settings: name, type, default, range and help text.

Each row is a :class:`~tenure.server._config.setting.Setting`, which reads its value
from text (a flag or an environment variable) and from a TOML value (the config
file), and checks the range either way; :mod:`tenure.server._config.serve_config`
merges the sources. The faces' settings are not here: each face declares its own rows
in its folder (:mod:`tenure.server._config.face_settings`), listed by the face
registry (:func:`tenure.server._faces.settings`). The help of a few rows below names
the faces whose connections they count, as an operator reads them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

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
from tenure._protocol import DEFAULT_MAX_FRAME_SIZE, MAX_MAX_FRAME_SIZE, MIN_MAX_FRAME_SIZE
from tenure._runtime.collector import DEFAULT_FREEZE_AFTER
from tenure.errors import ConfigError as ConfigError  # re-exported: it lives in tenure.errors
from tenure.server._config.audit_settings import AUDIT_SETTINGS
from tenure.server._config.cluster_settings import CLUSTER_SETTINGS
from tenure.server._config.http_settings import HTTP_SETTINGS
from tenure.server._config.quota_settings import QUOTA_SETTINGS
from tenure.server._config.setting import Setting, in_range, one_of
from tenure.server._durability.fsync_modes import BATCH_INTERVAL
from tenure.server._durability.storage import FsyncMode
from tenure.server._logs import LOG_FORMATS
from tenure.server._net.throttle import DEFAULT_MAX_TRACKED
from tenure.server._session_table import DEFAULT_MAX_QUEUED

DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 6388
DEFAULT_DATA_DIR: Final = "./tenure-data"
DEFAULT_MAX_CONNECTIONS: Final = 1024
#: ``--max-nodes``: the nodes one server keeps (the engine's own default).
DEFAULT_MAX_NODES: Final = 10_000
#: ``--fsync batch``: how often what was committed is made durable, in seconds.
DEFAULT_BATCH_INTERVAL: Final = BATCH_INTERVAL
#: How long a shutdown waits for clients to hang up after GoingAway, in seconds.
DEFAULT_SHUTDOWN_GRACE: Final = 1.0
#: A client that lets this many bytes pile up unread is disconnected.
DEFAULT_MAX_UNREAD: Final = 64 * 1024 * 1024
#: Effects kept for one detached session before it is ended instead.
DEFAULT_MAX_QUEUED_PUSHES: Final = DEFAULT_MAX_QUEUED
#: Messages one connection has served in a row before every other gets its turn.
DEFAULT_MAX_REQUESTS_PER_TURN: Final = 64
#: A client with this many bytes of answers unsent is not read until it reads them.
DEFAULT_PAUSE_UNREAD: Final = 64 * 1024
#: An OPEN connection silent for longer than this is closed (0: never), in seconds.
DEFAULT_IDLE_TIMEOUT: Final = 15.0
#: A connection must complete its handshake (TLS, then Hello) within this, in seconds.
DEFAULT_HANDSHAKE_TIMEOUT: Final = 10.0


#: ``--slow-commit``: a journal commit slower than this is logged, in seconds (etcd
#: warns of a slow fdatasync at 1 s; a healthy local disk commits in milliseconds).
DEFAULT_SLOW_COMMIT: Final = 1.0

#: ``--event-loop`` choices; ``auto`` takes uvloop when it is installed.
EVENT_LOOPS: Final = ("auto", "asyncio", "uvloop")


SETTINGS: Final = (
    Setting("host", str, DEFAULT_HOST, "ADDR", "address to listen on (default: %(default)s)"),
    Setting(
        "port",
        int,
        DEFAULT_PORT,
        "N",
        "TCP port to listen on; 0 picks a free one (default: %(default)s)",
        in_range(0, 65535),
    ),
    Setting(
        "shards",
        int,
        1,
        "N",
        "run N independent servers on this host, one per core: shard K on port PORT+K "
        "(and every other listener's port + K) with data in DATA_DIR/shard-K; clients "
        "reach them as tenure://HOST:PORT,HOST:PORT+1,...?sharded=true; a shard that "
        "exits stops the rest (default: %(default)s)",
        in_range(1, 64),
    ),
    Setting(
        "data_dir",
        Path,
        Path(DEFAULT_DATA_DIR),
        "DIR",
        "directory of the write-ahead log, snapshots and instance-id; created if missing "
        "(default: %(default)s)",
    ),
    Setting(
        "fsync",
        FsyncMode,
        FsyncMode.ALWAYS,
        "MODE",
        "when the log reaches the disk: 'always' fsyncs before every reply (no acknowledged "
        "change is ever lost), 'batch' fsyncs every --batch-interval (a machine crash may "
        "lose that much), 'off' leaves it to the OS (a machine crash may lose more; a server "
        "crash alone loses nothing) (default: always)",
    ),
    Setting(
        "batch_interval",
        float,
        DEFAULT_BATCH_INTERVAL,
        "SECONDS",
        "with --fsync batch: how often committed changes are fsynced, more than 0 and at "
        "most 60 (default: %(default)s)",
        in_range(0, 60, above=True),
    ),
    Setting(
        "max_frame_size",
        int,
        DEFAULT_MAX_FRAME_SIZE,
        "BYTES",
        f"largest frame accepted from a client, {MIN_MAX_FRAME_SIZE} to {MAX_MAX_FRAME_SIZE} "
        "(default: %(default)s)",
        in_range(MIN_MAX_FRAME_SIZE, MAX_MAX_FRAME_SIZE),
    ),
    Setting(
        "max_connections",
        int,
        DEFAULT_MAX_CONNECTIONS,
        "N",
        "client connections served at once; more are refused with LIMIT_EXCEEDED "
        "(default: %(default)s)",
        in_range(1),
    ),
    Setting(
        "max_hello_size",
        int,
        16384,
        "BYTES",
        "largest Hello frame (with its length prefix), the first of a connection; one "
        "announced larger is refused unread, so an unauthenticated "
        "peer makes the server buffer at most this, 512 to 65540 (default: %(default)s)",
        in_range(512, 65540),
    ),
    Setting(
        "max_handshaking",
        int,
        1024,
        "N",
        "connections on the main and dflockd ports not yet past their handshake (TLS, "
        "then the Hello or first dflockd byte); at the cap the server stops accepting "
        "until one ends (default: %(default)s)",
        in_range(1),
    ),
    Setting(
        "max_connections_per_address",
        int,
        0,
        "N",
        "connections from one IP address open at once on the main, dflockd and YDB ports "
        "together; one more is refused at once; 0 = no cap (default: %(default)s)",
        in_range(0),
    ),
    Setting(
        "auth_failures_per_minute",
        int,
        10,
        "N",
        "failed authentications (native Hello, dflockd auth, YDB tickets and logins) one "
        "IP address may make in a minute; past it the address is refused for "
        "--auth-block-time; 0 = never throttle (default: %(default)s)",
        in_range(0),
    ),
    Setting(
        "auth_block_time",
        float,
        60.0,
        "SECONDS",
        "how long an address past --auth-failures-per-minute is refused, even with a good "
        "token (default: %(default)s)",
        in_range(0, 86400),
    ),
    Setting(
        "auth_max_tracked",
        int,
        DEFAULT_MAX_TRACKED,
        "N",
        "how many client addresses, and how many attempted token names (YDB logins), the "
        "guessing throttle tracks each; past it the least recently touched is forgotten "
        "(default: %(default)s)",
        in_range(1),
    ),
    Setting(
        "max_unread",
        int,
        DEFAULT_MAX_UNREAD,
        "BYTES",
        f"a client that leaves this many bytes of replies and pushes unread is disconnected "
        f"(its sessions are detached), at least {MIN_MAX_FRAME_SIZE} (default: %(default)s)",
        in_range(MIN_MAX_FRAME_SIZE),
    ),
    Setting(
        "pause_unread",
        int,
        DEFAULT_PAUSE_UNREAD,
        "BYTES",
        "stop reading a client's requests while this many bytes of answers to it wait to be "
        "sent, until they are down to a quarter: a client that does not read is throttled, "
        "not buffered (one that reaches --max-unread first is dropped); at least 4096 "
        "(default: %(default)s)",
        in_range(4096),
    ),
    Setting(
        "max_requests_per_turn",
        int,
        DEFAULT_MAX_REQUESTS_PER_TURN,
        "N",
        "requests (native messages, dflockd requests) one connection has served in a row "
        "before every other connection gets its turn; the rest wait unread, so a client "
        "that floods the server slows only itself, 1 to 1000000 (default: %(default)s)",
        in_range(1, 1_000_000),
    ),
    Setting(
        "max_queued_pushes",
        int,
        DEFAULT_MAX_QUEUED_PUSHES,
        "N",
        "pushes kept for one detached session until it is re-attached; one more closes the "
        "session (default: %(default)s)",
        in_range(1),
    ),
    Setting(
        "max_nodes",
        int,
        DEFAULT_MAX_NODES,
        "N",
        "nodes the server keeps; one more CreateNode is refused with LIMIT_EXCEEDED, "
        "1 to 1000000 (default: %(default)s)",
        in_range(1, 1_000_000),
    ),
    Setting(
        "max_prefix_watches_per_node",
        int,
        MAX_PREFIX_WATCHES_PER_NODE,
        "N",
        "prefix watches armed on one node, by all its sessions together (each fires on "
        "every change under its prefix: this bounds a change's pushes); one more "
        "WatchPrefix is refused with LIMIT_EXCEEDED, 1 to 1000000 (default: %(default)s)",
        in_range(1, 1_000_000),
    ),
    Setting(
        "max_watches_per_semaphore",
        int,
        MAX_WATCHES_PER_SEMAPHORE,
        "N",
        "watches one token (every client, without --auth-file) may have armed on one "
        "semaphore name (each fires on a change of it: this bounds the pushes one token's "
        "watches add to another's change); one more is refused with LIMIT_EXCEEDED, "
        "1 to 1000000 (default: %(default)s)",
        in_range(1, 1_000_000),
    ),
    Setting(
        "max_listed_per_firing",
        int,
        MAX_LISTED_PER_FIRING,
        "N",
        "owners and waiters a watch firing lists (it is built in the step of whoever "
        "changed the semaphore): a firing that would list more carries no state, and its "
        "watcher describes the semaphore itself, 0 to 1000000 (default: %(default)s)",
        in_range(0, 1_000_000),
    ),
    Setting(
        "step_budget",
        int,
        DEFAULT_STEP_BUDGET,
        "N",
        "items of expiry work (a deadline; each hold, wait and watch a session's end lets "
        "go) the server does per turn of its event loop; due work beyond it is done in the "
        "next turns, clients heard between them, 100 to 10000000 (default: %(default)s)",
        in_range(100, 10_000_000),
    ),
    Setting(
        "gc_freeze_after",
        float,
        DEFAULT_FREEZE_AFTER,
        "SECONDS",
        "a full collection of Python's cyclic garbage collector that takes this long or "
        "longer freezes what it left alive (gc.freeze), so that the next ones walk only "
        "what came after and their pauses stay near this however large the state; "
        "0 = never (default: %(default)s)",
        in_range(0, 60),
    ),
    *(
        Setting(
            "max_node_" + field.removeprefix("max_"),
            int,
            ceiling,
            "N",
            f"the most a node's {field} may be (CreateNode, AlterNode); above it "
            "LIMIT_EXCEEDED, 1 to 1000000000 (default: %(default)s)",
            in_range(1, 1_000_000_000),
        )
        for field, ceiling in DEFAULT_NODE_CEILINGS.items()
    ),
    Setting(
        "deadlock_search_limit",
        int,
        DEADLOCK_SEARCH_LIMIT,
        "N",
        "holds and queued requests one deadlock check may look at; past it an acquire "
        "waits unchecked; 0 = no deadlock detection (default: %(default)s)",
        in_range(0, 10_000_000),
    ),
    Setting(
        "why_look_limit",
        int,
        WHY_LOOK_LIMIT,
        "N",
        "holds, waits and queue places one answer of who blocks a name (tenure why) may "
        "look at; past it the chain stops and says it was cut (default: %(default)s)",
        in_range(1, 10_000_000),
    ),
    Setting(
        "contention_names",
        int,
        CONTENTION_NAMES,
        "N",
        "names the statistics per name keep at most (tenure top, /metrics), the most "
        "contended ones; each costs about 1 KB to 5.5 KB, counted in --memory-budget, "
        "and a look in each answer of tenure top; 0 = keep none, 0 to 10000 "
        "(default: %(default)s)",
        in_range(0, 10_000),
    ),
    Setting(
        "contention_share",
        float,
        CONTENTION_SHARE,
        "FRACTION",
        "the part of --contention-names one token's names may fill while another "
        "token's are kept (its new names then push out its own), more than 0 and at "
        "most 1 (default: %(default)s)",
        in_range(0, 1, above=True),
    ),
    Setting(
        "contention_series",
        int,
        CONTENTION_SERIES,
        "N",
        "names /metrics shows the statistics of (tenure_name_wait_seconds{node,name} and "
        'the rest), the most waited; everything else in one series, name="other"; '
        "0 to 10000 (default: %(default)s)",
        in_range(0, 10_000),
    ),
    Setting(
        "long_hold_seconds",
        float,
        0.0,
        "SECONDS",
        "a hold held this long or longer is told of once: a long_hold log line, a "
        "long_hold audit record, tenure_long_holds_total; a node's own long_hold "
        "setting wins over it (0: never on that node); the holds are walked every "
        "quarter of the smallest threshold in force (1 to 60 s); 0 = never for the "
        "nodes that set none, up to 31622400 (default: %(default)s)",
        in_range(0, 31_622_400),
    ),
    Setting(
        "idle_timeout",
        float,
        DEFAULT_IDLE_TIMEOUT,
        "SECONDS",
        "close a connection that sent no frame for this long (announced in Welcome; clients "
        "ping within it); its sessions are detached; 0 = never (default: %(default)s)",
        in_range(0),
    ),
    Setting(
        "handshake_timeout",
        float,
        DEFAULT_HANDSHAKE_TIMEOUT,
        "SECONDS",
        "close a connection that has not completed the TLS handshake, or the tenure "
        "handshake (Hello), within this (default: %(default)s)",
        in_range(0, above=True),
    ),
    Setting(
        "shutdown_grace",
        float,
        DEFAULT_SHUTDOWN_GRACE,
        "SECONDS",
        "on SIGTERM/SIGINT, how long to wait for clients to hang up after GoingAway; also how "
        "long a closed connection may take to read its last words (default: %(default)s)",
        in_range(0, 3600),
    ),
    Setting(
        "tls_cert",
        Path,
        None,
        "PEM",
        "serve TLS (1.2 or later) with this certificate chain (PEM); needs --tls-key",
    ),
    Setting("tls_key", Path, None, "PEM", "the private key of --tls-cert (PEM, unencrypted)"),
    Setting(
        "tls_client_ca",
        Path,
        None,
        "PEM",
        "require client certificates signed by these CA certificates (PEM): mutual TLS; "
        "needs --tls-cert",
    ),
    Setting(
        "auth_file",
        Path,
        None,
        "TOML",
        "require a token in every Hello, from this file of [[token]] tables (name, secret or "
        "secret_sha256, access, nodes); without it tokens are ignored",
    ),
    Setting(
        "event_loop",
        str,
        "auto",
        "LOOP",
        "the event loop: 'uvloop' (faster), 'asyncio', or 'auto' for uvloop when it is "
        "installed (default: %(default)s)",
        one_of(*EVENT_LOOPS),
    ),
    # -- the HTTP endpoint (tenure.server._http): their own table ------------------------
    *HTTP_SETTINGS,
    # -- the log ----------------------------------------------------------------------------
    Setting(
        "log_format",
        str,
        "auto",
        "FORMAT",
        "the log on stderr: 'json' (one object per line: ts, level, event, msg and fields), "
        "'text' (one line per event, for people), or 'auto': text when stderr is a terminal, "
        "json otherwise (default: %(default)s)",
        one_of(*LOG_FORMATS),
    ),
    Setting(
        "slow_commit",
        float,
        DEFAULT_SLOW_COMMIT,
        "SECONDS",
        "log a warning ('slow_commit') for every journal commit (write and fsync) that "
        "takes longer than this; 0: never (default: %(default)s)",
        in_range(0, 3600),
    ),
    # -- the audit log (issue 50): its own table --------------------------------------------
    *AUDIT_SETTINGS,
    # -- quotas per token and the memory budget (issue 37): their own table -------------
    *QUOTA_SETTINGS,
    # -- a member of a cluster (tenure.server._cluster): their own table ------------------
    *CLUSTER_SETTINGS,
)
