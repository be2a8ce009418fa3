"""Client-side authentication to the gateway, shared by ``hms-gateway-tunnel`` and
:mod:`hms_gateway_client`.

Each auth object gives the ``Authorization`` header for one HTTPS request
(:meth:`headers`) and, for client certificates, the certificate to present in the TLS
handshake (:attr:`client_certificate`). Schemes follow RFC 7617 (Basic), RFC 6750 (Bearer),
RFC 4559 (Negotiate, SPNEGO through pyspnego) and RFC 8446 client authentication.

Secrets come from the environment, a netrc file or a file (:func:`auth_from_options`), never
from a command line, and no error message here ever contains one.
"""

from __future__ import annotations

import base64
import netrc as netrc_module
import os
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

__all__ = [
    "Auth",
    "BasicAuth",
    "BearerAuth",
    "KerberosAuth",
    "ClientCertificateAuth",
    "ssl_context",
    "auth_from_options",
    "METHODS",
]

METHODS = ("basic", "bearer", "kerberos", "cert")


class Auth(Protocol):
    """What the tunnel and the client need from an authentication method."""

    client_certificate: tuple[str, str] | None

    def headers(self, host: str) -> dict[str, str]: ...


@dataclass(repr=False)
class BasicAuth:
    """HTTP Basic (RFC 7617): ``user`` and ``password`` as UTF-8, on every request."""

    user: str
    password: str
    client_certificate: tuple[str, str] | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        if not self.user or ":" in self.user:
            raise ValueError("basic auth needs a user name without ':'")
        token = base64.b64encode(f"{self.user}:{self.password}".encode()).decode("ascii")
        self._header = {"Authorization": f"Basic {token}"}

    def headers(self, host: str) -> dict[str, str]:
        """``{"Authorization": "Basic …"}``; ``host`` is not used."""
        return self._header

    def __repr__(self) -> str:  # never the password
        return f"BasicAuth(user={self.user!r})"


@dataclass(repr=False)
class BearerAuth:
    """A bearer token (RFC 6750), e.g. a JWT the gateway's JWT provider accepts."""

    token: str
    client_certificate: tuple[str, str] | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.token = self.token.strip()
        if not self.token or any(c.isspace() for c in self.token):
            raise ValueError("bearer token is empty or contains whitespace")

    def headers(self, host: str) -> dict[str, str]:
        """``{"Authorization": "Bearer <token>"}``; ``host`` is not used."""
        return {"Authorization": f"Bearer {self.token}"}

    def __repr__(self) -> str:
        return "BearerAuth(token=<hidden>)"


@dataclass
class KerberosAuth:
    """SPNEGO (RFC 4559) from the user's Kerberos ticket cache (``KRB5CCNAME``).

    A fresh Negotiate token for ``service@host`` (``HTTP@gateway-host`` by default, or
    ``hostname`` when the gateway's principal names another host) is made for each request.
    Raises ``ValueError`` (from :meth:`headers`) when no ticket can be had, e.g. no ccache.
    """

    service: str = "HTTP"
    hostname: str | None = None
    client_certificate: tuple[str, str] | None = field(default=None, init=False)

    def headers(self, host: str) -> dict[str, str]:
        """``{"Authorization": "Negotiate <base64 token>"}`` for ``host`` (without port)."""
        try:
            import spnego  # imported on use: pulls gssapi
        except ImportError:
            raise ValueError("Kerberos needs pyspnego: pip install 'hms-gateway-client[kerberos]'") from None

        target = self.hostname or host
        try:
            ctx = spnego.client(hostname=target, service=self.service, protocol="negotiate")
            token = ctx.step()
        except Exception as exc:  # pyspnego raises several SpnegoError kinds and GSSErrors
            raise ValueError(f"no Kerberos ticket for {self.service}@{target}: {exc}") from None
        if not token:
            raise ValueError(f"Kerberos produced no token for {self.service}@{target}")
        return {"Authorization": "Negotiate " + base64.b64encode(token).decode("ascii")}


@dataclass
class ClientCertificateAuth:
    """A TLS client certificate (PEM ``cert_file`` and ``key_file``); no HTTP header."""

    cert_file: str
    key_file: str
    client_certificate: tuple[str, str] | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        for label, path in (("certificate", self.cert_file), ("key", self.key_file)):
            if not Path(path).is_file():
                raise ValueError(f"client {label} file {path} does not exist")
        self.client_certificate = (self.cert_file, self.key_file)

    def headers(self, host: str) -> dict[str, str]:
        """``{}``: the identity is in the TLS handshake."""
        return {}


def ssl_context(ca: str | None, auth: Auth | None = None) -> ssl.SSLContext:
    """A client TLS context that verifies the gateway's certificate and host name.

    ``ca``: a PEM bundle to trust instead of the system store (None: system store). Loads
    ``auth.client_certificate`` when set. Raises ``ValueError`` for an unreadable file.
    """
    cert = getattr(auth, "client_certificate", None)
    named = [("CA bundle", ca), *zip(("client certificate", "client key"), cert or ())]
    for what, path in named:  # OpenSSL's own error would not name the file
        if path is not None and not os.path.isfile(path):
            raise ValueError(f"cannot load TLS files: no such {what} file: {path}")
    try:
        ctx = ssl.create_default_context(cafile=ca)
        if cert is not None:
            ctx.load_cert_chain(cert[0], cert[1])
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"cannot load TLS files: {exc}") from None
    return ctx


def _read_secret_file(path: str, what: str) -> str:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read {what} file {path}: {exc.strerror}") from None
    value = text.strip("\r\n")
    if not value:
        raise ValueError(f"{what} file {path} is empty")
    return value


def _env_secret(name: str, what: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise ValueError(f"environment variable {name} ({what}) is not set or empty")
    return value


def _netrc_login(path: str | None, host: str | None) -> tuple[str, str]:
    if not host:
        raise ValueError("netrc needs the gateway host name")
    try:
        entry = netrc_module.netrc(path).authenticators(host)
    except (OSError, netrc_module.NetrcParseError) as exc:
        # NetrcParseError's message can quote the file's line: name only the file.
        raise ValueError(f"cannot read netrc file {path or '~/.netrc'} ({exc.__class__.__name__})") from None
    if entry is None:
        raise ValueError(f"netrc file {path or '~/.netrc'} has no entry for {host}")
    login, _account, password = entry
    if not login or password is None:
        raise ValueError(f"netrc entry for {host} lacks login or password")
    return login, password


def auth_from_options(
    method: str,
    *,
    user: str | None = None,
    password_env: str | None = None,
    password_file: str | None = None,
    netrc: str | bool | None = None,
    token_env: str | None = None,
    token_file: str | None = None,
    cert: str | None = None,
    key: str | None = None,
    service: str = "HTTP",
    host: str | None = None,
) -> Auth:
    """Build the auth object for ``method`` (one of :data:`METHODS`) from where its secret is.

    - ``basic``: ``user`` and the password from ``password_env`` (a variable name),
      ``password_file``, or ``netrc`` (a path, or True for ``~/.netrc``; user and password
      from the entry for ``host``; ``user`` if given must match).
    - ``bearer``: the token from ``token_env`` or ``token_file``.
    - ``kerberos``: the ticket cache; ``service`` is the gateway principal's service name.
    - ``cert``: ``cert`` and ``key`` PEM files.

    Raises ``ValueError`` with a reason (never the secret) when something is missing, given
    twice, or unreadable.
    """
    method = method.lower()
    if method == "basic":
        sources = [s for s in (password_env, password_file, netrc) if s]
        if len(sources) != 1:
            raise ValueError("basic auth needs exactly one of password env, password file or netrc")
        if netrc:
            login, password = _netrc_login(None if netrc is True else str(netrc), host)
            if user and user != login:
                raise ValueError(f"netrc entry for {host} is for another user than {user}")
            return BasicAuth(login, password)
        if not user:
            raise ValueError("basic auth needs a user name")
        if password_env:
            return BasicAuth(user, _env_secret(password_env, "password"))
        return BasicAuth(user, _read_secret_file(str(password_file), "password"))
    if method == "bearer":
        if bool(token_env) == bool(token_file):
            raise ValueError("bearer auth needs exactly one of token env or token file")
        token = _env_secret(token_env, "token") if token_env else _read_secret_file(str(token_file), "token")
        return BearerAuth(token)
    if method == "kerberos":
        return KerberosAuth(service=service)
    if method == "cert":
        if not cert or not key:
            raise ValueError("cert auth needs a certificate file and a key file")
        return ClientCertificateAuth(cert, key)
    raise ValueError(f"unknown auth method {method!r} (one of {', '.join(METHODS)})")
