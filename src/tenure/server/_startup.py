"""``tenure serve`` from start to exit: logging, the data directory, signals.

:func:`configure` and :func:`run` are what the command line calls. The first checks
the settings, the faces' too (a bad one exits 2 before anything starts). The second
logs the settings (on stderr, as ``--log-format`` says: text to a terminal, JSON
otherwise), starts the HTTP endpoint if ``--http-port`` asks for it (it answers
``/readyz`` 503 until the server serves), rebuilds the engine from the data
directory, listens, and serves until SIGTERM or SIGINT (exit 0) or a fatal disk
error (exit 1); SIGHUP reloads the TLS and auth files (:mod:`tenure.server._reload`).
A start that fails (a data directory another server holds, one the server may not
use, a damaged log, a port in use) says why in one line
(:mod:`tenure.server._start_failure`) and exits 1; a TLS or auth file that stopped
loading since the settings were checked exits 2. The log names the auth file and
its tokens' names, never a secret.

Layer (CONTRIBUTING.md): this module may also import tenure.__init__ and tenure._build.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
from argparse import Namespace
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Final

import tenure
from tenure._build import build
from tenure._core import Engine
from tenure._runtime import collector
from tenure.errors import TenureError
from tenure.server import _faces
from tenure.server._audit import AuditLog
from tenure.server._config.cluster_url import without_secrets
from tenure.server._config.serve_config import ConfigError, ServeConfig, resolve
from tenure.server._durability.dirlock import DataDirLock
from tenure.server._durability.identity import has_state, instance_id, lock_data_dir
from tenure.server._durability.journal import Journal
from tenure.server._durability.storage import CorruptLogError, DataDir
from tenure.server._logs import JsonFormatter as JsonFormatter  # where it used to be
from tenure.server._logs import announce_settings, hold_settings_line, setup_logging
from tenure.server._net.tls import describe
from tenure.server._reception import ListenError, Sockets, listening_sockets
from tenure.server._reload import reload_by_signal
from tenure.server._serve import Server
from tenure.server._server_acts import NativeActs
from tenure.server._server_host import wal_host
from tenure.server._start_failure import data_dir_failure, listen_failure

if TYPE_CHECKING:  # the server extra: imported only with --http-port
    from tenure.server._http.endpoint import Endpoint

log = logging.getLogger("tenure.server")


#: The signals the server handles while it serves (each once it listens; SIGHUP from
#: the start).
HANDLED: Final = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


async def serve(config: ServeConfig, *, ignore_late_signals: bool = False) -> int:
    """Start, serve until told to stop, and return the exit code.

    Its signal handlers stay until it has stopped, and are removed then; with
    ``ignore_late_signals`` (the ``tenure serve`` command's) each of :data:`HANDLED` is
    ignored from then until the process exits, rather than given back its default. A
    stopped server has nothing left to stop, and a signal sent late (the same SIGTERM
    both from ``kill`` of the process group and passed on by ``--shards``' command,
    itself slowed by a busy machine) must not turn its clean stop into a death by
    signal (exit -15, which ``--shards`` reports as a failure).
    """
    loop = asyncio.get_running_loop()
    collector.freeze_after(config.gc_freeze_after)
    journal = Journal(DataDir(config.data_dir, config.fsync))
    try:
        lock = lock_data_dir(config.data_dir)
    except OSError as error:
        data_dir_failure(config.data_dir, error).log(log)
        return 1
    watch = asyncio.create_task(_watch_lock(lock), name="watch the data directory's lock")
    audit = AuditLog.from_config(config)  # (its thread opens the file: never the loop)
    # SIGHUP before the server serves (a long recovery): refused and logged, not the
    # end of the process (its default); once it serves, a reload (_serve_on).
    loop.add_signal_handler(signal.SIGHUP, reload_by_signal, None)
    # Held since the command's first instruction (_tenure_console): one sent meanwhile
    # is delivered now, to the handler just set.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGHUP})
    try:
        return await _serve_locked(config, journal, loop, audit)
    finally:
        for signum in HANDLED:
            loop.remove_signal_handler(signum)
            if ignore_late_signals:
                signal.signal(signum, signal.SIG_IGN)
        watch.cancel()
        lock.close()
        await asyncio.to_thread(audit.close)  # what is queued is written, within a bound


#: How often the server checks that its lock file is still there (one stat()).
LOCK_CHECK_INTERVAL = 2.0


async def _watch_lock(lock: DataDirLock) -> None:
    """Check the lock file now and then: one deleted is locked again, loudly (the
    directory's own lock keeps a second server out meanwhile)."""
    while True:
        await asyncio.sleep(LOCK_CHECK_INTERVAL)
        try:
            lock.check()
        except OSError as error:  # never stop serving over it: the directory stays locked
            log.error("cannot check %s: %s", lock.path, error)


async def _serve_locked(
    config: ServeConfig, journal: Journal, loop: asyncio.AbstractEventLoop, audit: AuditLog
) -> int:
    endpoint: Endpoint | None = None
    if config.http_address is not None:
        endpoint = await _start_endpoint(config, *config.http_address)
        if endpoint is None:
            return 1
    try:
        if config.cluster:
            return await _serve_in_cluster(config, endpoint, audit)
        return await _recover_and_serve(config, journal, loop, endpoint, audit)
    finally:
        if endpoint is not None:
            await endpoint.stop()


async def _serve_in_cluster(config: ServeConfig, endpoint: Endpoint | None, audit: AuditLog) -> int:
    """``--cluster``: a member of a replicated cluster (the data directory holds only
    its lock: the journal and its snapshots live in etcd)."""
    from tenure.server import _cluster  # etcd's client: only in a cluster

    if endpoint is not None:
        endpoint.recovering()
    try:
        return await _cluster.run(config, endpoint, audit, tenure.__version__)
    except (TenureError, ValueError) as error:  # (etcd refused us, or its data is not ours)
        fields = {"cluster": without_secrets(config.cluster), "why": str(error)}
        log.critical(
            "cannot serve as a member of the cluster: %s",
            error,
            extra={"event": "cluster_failed", "fields": fields},
        )
        return 1
    except ListenError as failed:
        _listen_failed(config, failed.listener, failed.error)
        return 1


async def _start_endpoint(config: ServeConfig, host: str, port: int) -> Endpoint | None:
    """The HTTP endpoint, listening (None: it cannot, which was logged)."""
    from tenure.server._http.endpoint import Endpoint  # the server extra: only if asked

    endpoint = Endpoint(tenure.__version__)
    try:
        bound = await endpoint.start(host, port, config)
    except OSError as error:
        named = "http_host" if config.http_host else "host"
        listen_failure(error, host, port, setting="http_port", host_setting=named).log(log)
        return None
    fields = {"host": bound[0], "port": bound[1], "paths": ["/metrics", "/healthz", "/readyz", "/"]}
    log.info("http listening", extra={"event": "http_listening", "fields": fields})
    return endpoint


async def _recover(journal: Journal, loop: asyncio.AbstractEventLoop) -> Engine:
    """Replay the data directory, letting the loop run between steps (the HTTP
    endpoint answers meanwhile), then put the engine on this process's clock."""
    for engine in journal.replay():
        if engine is not None:
            return journal.resume(engine, loop.time())
        await asyncio.sleep(0)
    raise AssertionError("replay() ends with the engine")  # pragma: no cover


async def _recover_and_serve(
    config: ServeConfig,
    journal: Journal,
    loop: asyncio.AbstractEventLoop,
    endpoint: Endpoint | None,
    audit: AuditLog,
) -> int:
    if endpoint is not None:
        endpoint.recovering()
        journal.on_snapshot = endpoint.metrics.snapshot_written
    try:
        fresh = not has_state(config.data_dir)
        engine = await _recover(journal, loop)
        # The recovered state lives as long as the server: the cyclic collector need
        # not walk its (possibly millions of) objects in every full collection.
        gc.freeze()
        ident = instance_id(config.data_dir, fresh=fresh)
    except (CorruptLogError, OSError) as error:
        data_dir_failure(config.data_dir, error).log(log)
        journal.abort()
        return 1
    try:
        sockets = listening_sockets(config)
    except ListenError as failed:
        _listen_failed(config, failed.listener, failed.error)
        journal.close()
        return 1
    try:
        return await _serve_on(config, journal, engine, ident, sockets, endpoint, audit)
    finally:
        sockets.close()


async def _serve_on(
    config: ServeConfig,
    journal: Journal,
    engine: Engine,
    ident: bytes,
    sockets: Sockets,
    endpoint: Endpoint | None,
    audit: AuditLog,
) -> int:
    """Serve the recovered ``engine`` on ``sockets`` until stopped; the exit code."""
    loop = asyncio.get_running_loop()
    observer = endpoint.metrics if endpoint else None
    try:
        served = wal_host(config, journal, engine, observer)
        server = Server(config, served, sockets, ident, observer=observer, audit=audit)
    except ConfigError as error:
        log.critical("%s", error)
        journal.close()
        return 2
    try:
        host, port = await server.start()
    except OSError as error:
        _listen_failed(config, server.binding or "native", error)
        return 1  # (the server closed the journal)
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, server.stop)
    also = (endpoint.prepare_tls,) if endpoint is not None else ()
    loop.add_signal_handler(signal.SIGHUP, reload_by_signal, server, also)
    server.act_with(NativeActs(server, also, tenure.__version__))  # (tenure backup, reload)
    if endpoint is not None:
        endpoint.serving(server)
    fields = {
        "host": host,
        "port": port,
        **{f"{name}_port": face_port for name, face_port in server.faces.ports().items()},
        "instance_id": ident.hex(),
        "sessions": len(engine.sessions),
        "nodes": len(engine.nodes),
        "tls": describe(server.gate.tls),
        "auth_file": str(config.auth_file) if config.auth_file is not None else None,
        "auth_tokens": server.gate.tokens.names if server.gate.tokens is not None else None,
        "event_loop": "uvloop" if type(loop).__module__.startswith("uvloop") else "asyncio",
        "build": build(),
    }
    announce_settings()
    log.info("listening", extra={"fields": fields})
    if fields["build"] != "compiled":
        log.warning(
            "the %s build runs: its hot path is not compiled, and serves about half as "
            'fast (docs/operations.md, "Installing")',
            fields["build"],
            extra={"event": "pure_build"},
        )
    return await server.wait()  # (its handlers removed once serve() is done)


def _listen_failed(config: ServeConfig, binding: str, error: OSError) -> None:
    """Log why listener ``binding`` (``native``, or a face's name) could not listen."""
    own = ("port", config.port) if binding == "native" else _faces.own_port(config, binding)
    listen_failure(error, config.host, own[1], setting=own[0]).log(log)


def loop_factory(choice: str) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The event loop ``--event-loop`` asks for (None: asyncio's own).

    Raises:
        ConfigError: ``uvloop`` was asked for and is not installed.
    """
    if choice == "asyncio":
        return None
    try:
        import uvloop  # optional: imported only when it may be used
    except ImportError:
        if choice == "uvloop":
            raise ConfigError("--event-loop uvloop: uvloop is not installed") from None
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def configure(args: Namespace, environ: Mapping[str, str]) -> ServeConfig:
    """The settings of ``tenure serve``, checked: :func:`resolve`'s merge and checks,
    then those of each face they turn on, through the face registry.

    Raises:
        ConfigError: naming the flag, variable or file key, or the extra to install.
    """
    config = resolve(args, environ, _faces.settings())  # the server's and the faces'
    _faces.check(config)  # each face's port and own checks
    return config


def run(config: ServeConfig) -> int:
    """The ``tenure serve`` command: log the settings, serve, return the exit code.

    The ``config`` line has the settings given (a flag, a variable, the config file)
    and where each came from, not the defaults of the rest (``tenure serve --help``
    lists them): a few hundred bytes, not the 5 KB of every setting. It is logged just
    before ``listening``, or after the reason a start failed, which is then stderr's
    first line (:func:`~tenure.server._logs.hold_settings_line`).
    """
    if setup_logging(config.log_format) == "json":
        why = "config"  # (the message machines select it by)
    else:
        why = "settings given (the rest are at their defaults: tenure serve --help)"
    fields = config.given()
    hold_settings_line(lambda: log.info(why, extra={"event": "config", "fields": fields}))
    try:
        factory = loop_factory(config.event_loop)
    except ConfigError as error:
        log.critical("%s", error)
        return 2
    try:
        with asyncio.Runner(loop_factory=factory) as runner:
            return runner.run(serve(config, ignore_late_signals=True))
    finally:
        announce_settings()  # after a failed start's reason (if it never listened)
