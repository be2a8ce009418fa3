"""The gateway listener's server-side TLS context (MS-HMSHTTP 2.1: HTTPS only)."""

from __future__ import annotations

import ssl
from pathlib import Path

from gateway.config import ConfigError, TLSConfig

_VERSIONS = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}


def server_ssl_context(tls: TLSConfig, source: Path | str | None = None) -> ssl.SSLContext:
    """An ``SSLContext`` that accepts TLS ``tls.minimum_version`` or newer, with the configured chain.

    Session resumption is left at OpenSSL's server defaults, which resume both ways: TLS 1.3
    session tickets (RFC 8446 4.6.1, ``num_tickets`` 2 per handshake) and TLS 1.2 tickets
    (RFC 5077) or session ids (the server session cache). Ticket keys belong to the context, so
    the gateway makes one context and every connection on the listener shares it
    (``tests/integration/test_tls_resumption.py``); a client sending ``Connection: close`` on
    each call then pays an abbreviated handshake instead of a full one.

    Raises :class:`ConfigError` naming the key (``tls.certificate``, ``tls.private_key``,
    ``tls.client_ca``, ``tls.ciphers``) and the file when a file is missing or cannot be loaded,
    or the cipher string selects nothing; ``source`` is the gateway file named in the message.
    Messages never include key material.
    """
    source = source or "gateway"
    for key, path in (("tls.certificate", tls.certificate), ("tls.private_key", tls.private_key),
                      ("tls.client_ca", tls.client_ca)):
        if path is not None and not Path(path).is_file():
            raise ConfigError(source, key, f"no such file: {path}")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = _VERSIONS[tls.minimum_version]
    ctx.options |= ssl.OP_NO_COMPRESSION | ssl.OP_CIPHER_SERVER_PREFERENCE
    if tls.ciphers:
        try:
            ctx.set_ciphers(tls.ciphers)
        except ssl.SSLError:
            raise ConfigError(source, "tls.ciphers", "the cipher string selects no cipher") from None
    if tls.client_ca is not None:
        try:
            ctx.load_verify_locations(cafile=tls.client_ca)
        except (OSError, ssl.SSLError):
            raise ConfigError(source, "tls.client_ca", f"cannot load the CA bundle {tls.client_ca}") from None
        ctx.verify_mode = ssl.CERT_OPTIONAL  # other providers still serve clients without one
    try:
        ctx.load_cert_chain(tls.certificate, tls.private_key)
    except (OSError, ssl.SSLError) as exc:
        reason = getattr(exc, "strerror", None) or getattr(exc, "reason", None) or type(exc).__name__
        raise ConfigError(
            source, "tls.certificate",
            f"cannot load the certificate {tls.certificate} with the private key {tls.private_key}: {reason}",
        ) from None
    return ctx
