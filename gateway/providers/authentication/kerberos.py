"""Kerberos via SPNEGO (RFC 4559), as Hadoop's ``KerberosAuthenticationHandler`` behind Knox.

* No or another ``Authorization``: not ours; the 401 offers ``WWW-Authenticate: Negotiate``.
* ``Authorization: Negotiate <token>``: the token is accepted with python-gssapi (the library
  under pyspnego) using credentials for the configured service principal from the configured
  keytab (``cred_store``, so each provider has its own keytab, no process-wide ``KRB5_KTNAME``).
  On success the reply carries the mutual-authentication token
  (``WWW-Authenticate: Negotiate <token>``, RFC 4559 §5) and, when ``cookie`` is configured,
  a signed session cookie so later requests skip the handshake.
* The Kerberos principal becomes a short user name through Hadoop ``auth_to_local`` rules
  (:mod:`.name_rules`); no mapping means 401.

Each handshake gets its own acceptor context and runs in a worker thread. MIT krb5's replay
cache (1.18+) keys entries on the authenticator itself, so concurrent clients (even the same
principal in the same second) are not mistaken for replays: the spurious-401 bug Knox users hit.

This module holds the settings; the handshake, with python-gssapi, is
:mod:`gateway.providers.authentication.kerberos_authenticator`, imported only when a topology
names the provider.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, field_validator

from gateway.providers.authentication.name_rules import parse_rules
from gateway.providers.authentication.secrets import Secret
from gateway.providers.authentication.settings import ProviderSettings
from gateway.settings_model import SettingsModel


class SessionCookie(SettingsModel):
    """The signed cookie issued after a successful SPNEGO handshake (Knox: ``hadoop.auth``)."""

    name: str = "hadoop.auth"
    #: Key the cookie is signed (and encrypted) with; share it between gateway replicas.
    signing_key: Secret
    lifetime_seconds: int = Field(default=3600, gt=0, le=86400)


class KerberosProvider(ProviderSettings):
    """SPNEGO (RFC 4559) with a keytab, as Hadoop's ``KerberosAuthenticationHandler``.

    ``keytab`` may be a path or ``env:NAME`` (a variable holding the path).
    """

    type: Literal["kerberos"]
    #: Service principal, ``HTTP/<fully qualified host>@REALM``.
    principal: str
    keytab: Path
    #: Hadoop ``auth_to_local`` rules (``RULE:[1:$1@$0](.*@EXAMPLE\\.COM)s/@.*//``, ``DEFAULT``).
    name_rules: list[str] = Field(default_factory=lambda: ["DEFAULT"], min_length=1)
    cookie: SessionCookie | None = None

    path_fields: ClassVar[tuple[str, ...]] = ("keytab",)

    @field_validator("keytab", mode="before")
    @classmethod
    def _keytab_from_env(cls, value: object) -> object:
        if isinstance(value, str) and value.startswith("env:"):
            return Secret.from_reference(value).reveal()
        return value

    @field_validator("principal")
    @classmethod
    def _service_principal(cls, principal: str) -> str:
        service, slash, rest = principal.partition("/")
        host, at, realm = rest.partition("@")
        if not (service and slash and host and at and realm):
            raise ValueError(f"{principal!r} is not a service principal like HTTP/host@REALM")
        return principal

    @field_validator("name_rules")
    @classmethod
    def _rules_parse(cls, rules: list[str]) -> list[str]:
        parse_rules(rules)  # raises ValueError naming the bad rule
        return rules

    authenticator: ClassVar[str] = "gateway.providers.authentication.kerberos_authenticator:KerberosAuthenticator"
