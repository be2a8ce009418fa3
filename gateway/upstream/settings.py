"""Where a service dispatches to (a topology file's ``services[].upstream``): the HMS URLs,
timeouts, pool and failover settings, and SASL/Kerberos to a secured HMS; :mod:`gateway.config`
places them, and resolves the keytab against the topology file's directory."""

from __future__ import annotations

from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from gateway.settings_model import SettingsModel


class SaslConfig(SettingsModel):
    """SASL to a Kerberized HMS (``hive.metastore.sasl.enabled=true``): the gateway logs in
    from ``keytab`` as ``principal`` (in memory: no ``kinit``, no credential cache on disk) and
    speaks GSSAPI to ``service_principal``; see :mod:`gateway.upstream.kerberos`. The realm
    comes from MIT Kerberos' ``KRB5_CONFIG``."""

    #: The gateway's own principal, e.g. ``hmsgw/gw.example.com@EXAMPLE.COM``; its short name
    #: (``hmsgw``) is the Hadoop proxy user HMS must allow (``hadoop.proxyuser.hmsgw.*``).
    principal: str = Field(min_length=1)
    #: Keytab holding ``principal``'s keys (relative to the topology file).
    keytab: Path
    #: HMS's ``hive.metastore.kerberos.principal``; ``_HOST`` becomes each URL's host.
    service_principal: str = Field(min_length=1)
    #: HMS's ``hadoop.rpc.protection``: SASL QOP ``auth``, ``auth-int`` or ``auth-conf``, for
    #: the gateway's GSSAPI and the end users' DIGEST-MD5 connections alike.
    protection: Literal["authentication", "integrity", "privacy"] = "authentication"
    #: ``delegation-token``: each end user's calls go over DIGEST-MD5 connections with a
    #: delegation token HMS issued for that user (the gateway as Hadoop proxy user);
    #: ``none``: every call runs as ``principal`` (authorization and audit live in the
    #: gateway alone).
    impersonation: Literal["delegation-token", "none"] = "delegation-token"
    #: HMS's ``hive.cluster.delegation.token.renew-interval`` in seconds (Hadoop's default: one
    #: day): a token not renewed within it expires.
    token_renew_interval_seconds: float = Field(default=86400.0, gt=0)
    #: A user's token is renewed this long before its renewal deadline, and fetched anew this
    #: long before its maximum lifetime; the keytab login is renewed this long before the TGT
    #: expires.
    renew_margin_seconds: float = Field(default=60.0, gt=0)

    @field_validator("principal", "service_principal")
    @classmethod
    def _principal(cls, name: str) -> str:
        if any(c.isspace() for c in name) or name.count("@") > 1 or name.startswith(("@", "/")):
            raise ValueError(f"{name!r} is not a Kerberos principal name (primary[/instance][@REALM])")
        return name

    @property
    def short_name(self) -> str:
        """The principal's first component: Hadoop's short name (proxy user, token renewer)."""
        return self.principal.split("@")[0].split("/")[0]


class UpstreamConfig(SettingsModel):
    """Where a service dispatches to: binary Thrift on TCP, as HMS listens on port 9083."""

    urls: list[str] = Field(min_length=1)
    transport: Literal["unframed", "framed"] = "unframed"
    connect_timeout_seconds: float = Field(default=5.0, gt=0)
    #: Time allowed for one call, from sending the request to the last byte of the reply.
    timeout_seconds: float = Field(default=60.0, gt=0)
    #: Idle connections kept per upstream URL.
    pool_size: int = Field(default=8, ge=0)
    #: Identities (user + groups, each its own ``set_ugi`` connections) kept idle, LRU.
    max_identities: int = Field(default=16, ge=1)
    #: HA (Knox semantics): upstreams tried per call, pause between tries, probing of a down
    #: upstream, and round-robin instead of ordered failover.
    max_failover_attempts: int = Field(default=3, ge=1)
    failover_sleep_seconds: float = Field(default=0.1, ge=0)
    probe_interval_seconds: float = Field(default=5.0, gt=0)
    round_robin: bool = False
    #: SASL/Kerberos to a secured HMS (None: plain binary Thrift, identities by ``set_ugi``).
    sasl: SaslConfig | None = None

    @model_validator(mode="after")
    def _sasl_transport(self) -> "UpstreamConfig":
        if self.sasl is not None:
            if self.transport == "framed":
                raise ValueError("sasl: is not supported with transport: framed")
            if any(not url.lower().startswith("thrift://") for url in self.urls):
                raise ValueError("sasl: applies to thrift:// URLs only (HTTP mode has no SASL)")
        return self

    @field_validator("urls")
    @classmethod
    def _thrift_urls(cls, urls: list[str]) -> list[str]:
        # thrift://host:port: binary Thrift on TCP; http(s)://host[:port]/path: a Hive 4 HMS in
        # HTTP mode (binary Thrift in POST bodies, gateway.upstream.http). ``transport`` only
        # applies to thrift:// URLs.
        for url in urls:
            try:
                parts = urlsplit(url)
                port = parts.port
            except ValueError:
                raise ValueError(f"{url!r} is not a valid URL") from None
            if parts.scheme in ("http", "https") and parts.hostname and not parts.username:
                continue
            if parts.scheme != "thrift" or not parts.hostname or not port:
                raise ValueError(
                    f"{url!r} is neither a thrift://host:port nor an http(s)://host[:port]/path URL"
                )
        return urls
