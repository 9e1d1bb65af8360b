"""TLS for ``tenure serve``: the server's SSL context from ``--tls-cert``/``--tls-key``.

TLS 1.2 or later, the ssl module's default ciphers. With ``--tls-client-ca`` every
client must present a certificate signed by one of those CAs (mutual TLS); the
TLS handshake fails otherwise, before any tenure message is exchanged. A file
that is missing, unreadable or not what it should be is a ConfigError naming it.
"""

from __future__ import annotations

import ssl
from pathlib import Path

from tenure.server._config.settings import ConfigError


def server_context(
    cert: Path | None, key: Path | None, client_ca: Path | None = None
) -> ssl.SSLContext | None:
    """The SSL context to serve with, or None for plain TCP (no cert, key or CA given).

    Raises:
        ConfigError: only one of cert and key, a CA without them, or a file that
            cannot be loaded (named in the message).
    """
    if cert is None and key is None:
        if client_ca is not None:
            raise ConfigError("--tls-client-ca needs --tls-cert and --tls-key")
        return None
    if cert is None or key is None:
        raise ConfigError("--tls-cert and --tls-key go together: give both or neither")
    for path, setting in ((cert, "tls_cert"), (key, "tls_key"), (client_ca, "tls_client_ca")):
        if path is not None:
            _readable(path, setting)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        # A password callback that gives none: an encrypted key fails here instead
        # of prompting on the terminal.
        context.load_cert_chain(cert, key, password=_no_password)
    except ssl.SSLError as error:
        raise ConfigError(
            f"tls_cert {cert} / tls_key {key}: cannot load them as a PEM certificate chain and "
            f"its unencrypted private key ({error.reason or error})"
        ) from None
    if client_ca is not None:
        try:
            context.load_verify_locations(cafile=client_ca)
        except ssl.SSLError as error:
            raise ConfigError(
                f"tls_client_ca {client_ca}: not PEM CA certificates ({error.reason or error})"
            ) from None
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def describe(context: ssl.SSLContext | None) -> str:
    """``off``, ``tls`` or ``mtls`` (for the log)."""
    if context is None:
        return "off"
    return "mtls" if context.verify_mode is ssl.CERT_REQUIRED else "tls"


def _readable(path: Path, setting: str) -> None:
    try:
        with path.open("rb") as file:
            file.read(1)
    except OSError as error:
        raise ConfigError(f"{setting} {path}: cannot read it: {error.strerror}") from None


def _no_password() -> bytes:
    return b""
