"""The gateway listener's server-side TLS context (MS-HMSHTTP 2.1: HTTPS only)."""

from __future__ import annotations

import ssl

from gateway.config import ConfigError, TLSConfig

_VERSIONS = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}


def server_ssl_context(tls: TLSConfig) -> ssl.SSLContext:
    """An ``SSLContext`` that accepts TLS ``tls.minimum_version`` or newer, with the configured chain.

    Session resumption is left at OpenSSL's server defaults, which resume both ways: TLS 1.3
    session tickets (RFC 8446 4.6.1, ``num_tickets`` 2 per handshake) and TLS 1.2 tickets
    (RFC 5077) or session ids (the server session cache). Ticket keys belong to the context, so
    the gateway makes one context and every connection on the listener shares it
    (``tests/integration/test_tls_resumption.py``); a client sending ``Connection: close`` on
    each call then pays an abbreviated handshake instead of a full one.

    Raises :class:`ConfigError` naming ``tls.certificate``/``tls.ciphers`` when the files cannot be
    loaded or the cipher string selects nothing. Messages never include key material.
    """
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = _VERSIONS[tls.minimum_version]
    ctx.options |= ssl.OP_NO_COMPRESSION | ssl.OP_CIPHER_SERVER_PREFERENCE
    if tls.ciphers:
        try:
            ctx.set_ciphers(tls.ciphers)
        except ssl.SSLError:
            raise ConfigError("gateway", "tls.ciphers", "the cipher string selects no cipher") from None
    if tls.client_ca is not None:
        try:
            ctx.load_verify_locations(cafile=tls.client_ca)
        except (OSError, ssl.SSLError):
            raise ConfigError(tls.client_ca, "tls.client_ca", "cannot load the CA bundle") from None
        ctx.verify_mode = ssl.CERT_OPTIONAL  # other providers still serve clients without one
    try:
        ctx.load_cert_chain(tls.certificate, tls.private_key)
    except (OSError, ssl.SSLError) as exc:
        reason = getattr(exc, "strerror", None) or getattr(exc, "reason", None) or type(exc).__name__
        raise ConfigError(
            tls.certificate, "tls.certificate", f"cannot load certificate/private key: {reason}"
        ) from None
    return ctx
