"""Configuration as data: YAML files validated once at start-up into typed, frozen objects.

Two kinds of file, after Apache Knox:

* the gateway file (``config/gateway.yaml``): listeners, TLS, limits, the topology directory;
* one topology file per topology (``config/topologies/<name>.yaml``): its providers
  (authentication, ...) and services (kind, path, upstream, the kind's own ``options``).

Relative paths inside a file are resolved against that file's directory. Every problem is raised
as :class:`ConfigError` naming the file, the key and the reason.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, Union
from urllib.parse import urlsplit

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from gateway.providers.authentication.registry import PROVIDERS, settings_models
from gateway.providers.authentication.settings import FailureThrottle
from gateway.providers.knox_syntax import parse_group_mapping, parse_principal_mapping
from gateway.validation_errors import reported_error

class ConfigError(Exception):
    """A configuration file is unreadable or invalid; ``str()`` is ``"<file>: <key>: <reason>"``."""

    def __init__(self, file: Path | str, key: str, reason: str):
        self.file, self.key, self.reason = str(file), key, reason
        super().__init__(f"{file}: {key or '(top level)'}: {reason}")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --- identity assertion, authorization, audit (Knox providers) ------------------------------


def _is_network(value: str, expected: str = "an IP address or a CIDR network") -> str:
    """An IP address or a CIDR network (host bits allowed); returns it unchanged."""
    try:
        ipaddress.ip_network(value, strict=False)
    except ValueError:
        raise ValueError(f"{value!r} is not {expected}") from None
    return value


def _is_address_pattern(value: str) -> str:
    """``*``, an IP address or a CIDR network (host bits allowed); returns it unchanged."""
    return value if value == "*" else _is_network(value, "'*', an IP address or a CIDR network")


class ProxyUserRule(_Model):
    """Who a proxy user may impersonate (Hadoop ``hadoop.proxyuser.<user>.users|groups|hosts``).

    ``users``/``groups``: the impersonated user must be listed or be in a listed group (``*``:
    anyone); ``hosts``: the client address must match one entry (``*``, IP or CIDR).
    """

    users: list[str] = []
    groups: list[str] = []
    hosts: list[str] = Field(min_length=1)

    @field_validator("hosts")
    @classmethod
    def _hosts(cls, hosts: list[str]) -> list[str]:
        return [_is_address_pattern(h) for h in hosts]


class ImpersonationConfig(_Model):
    """``doAs`` (Knox/Hadoop): ``?doAs=<user>`` acts as another user, only as ``proxy_users``
    allow; without proxy users, impersonation is off."""

    #: Authenticated (mapped) user name → what it may impersonate.
    proxy_users: dict[str, ProxyUserRule] = {}


class IdentityAssertionConfig(_Model):
    """Knox ``Default`` identity assertion: principal mapping, group mapping, impersonation."""

    #: Authenticated principal → effective user; Knox string ``"guest,alice=hdfs;mary=alice2"``
    #: or a mapping ``{guest: hdfs, ...}``.
    principal_mapping: dict[str, str] = {}
    #: User (``*``: everyone) → extra groups; Knox string ``"*=users;alice,bob=admins"`` or a
    #: mapping ``{alice: [admins], "*": [users]}``.
    group_mapping: dict[str, list[str]] = {}
    impersonation: ImpersonationConfig = ImpersonationConfig()

    @field_validator("principal_mapping", mode="before")
    @classmethod
    def _principal_mapping(cls, value: Any) -> Any:
        return parse_principal_mapping(value) if isinstance(value, str) else value

    @field_validator("group_mapping", mode="before")
    @classmethod
    def _group_mapping(cls, value: Any) -> Any:
        if isinstance(value, str):
            return parse_group_mapping(value)
        if isinstance(value, dict):  # a single group may be written without a list
            return {k: [v] if isinstance(v, str) else v for k, v in value.items()}
        return value


class AuthorizationConfig(_Model):
    """Per-service ACL (Knox ``AclsAuthorizationFilter``: ``users;groups;ipaddrs`` + ``acl.mode``).

    ``*`` (the default of each list) matches anyone. ``AND``: user, group and client address
    must all match; ``OR``: one listed (non-``*``) part matching is enough.
    """

    users: list[str] = ["*"]
    groups: list[str] = ["*"]
    ips: list[str] = ["*"]
    mode: Literal["AND", "OR"] = "AND"

    @field_validator("ips")
    @classmethod
    def _ips(cls, ips: list[str]) -> list[str]:
        return [_is_address_pattern(ip) for ip in ips]

    @field_validator("mode", mode="before")
    @classmethod
    def _mode(cls, mode: Any) -> Any:
        return mode.upper() if isinstance(mode, str) else mode


class AuditConfig(_Model):
    """The audit log: one JSON line per request. ``path`` None writes to stderr."""

    enabled: bool = True
    path: Path | None = None


# --- gateway file ---------------------------------------------------------------------------


class Listener(_Model):
    host: str = "0.0.0.0"
    port: int = Field(ge=0, le=65535)


class GatewayListener(Listener):
    """The HTTPS listener. Behind load balancers: ``trusted_proxies`` (IP or CIDR, IPv4/IPv6)
    may name the client through ``X-Forwarded-For``, and with ``proxy_protocol`` every
    connection must start with a PROXY protocol v1/v2 header (HAProxy spec) and come from a
    trusted proxy (see :mod:`gateway.client_address`)."""

    trusted_proxies: list[str] = []
    proxy_protocol: bool = False

    @field_validator("trusted_proxies")
    @classmethod
    def _trusted_proxies(cls, cidrs: list[str]) -> list[str]:
        return [_is_network(c) for c in cidrs]

    @model_validator(mode="after")
    def _proxy_protocol_needs_trust(self) -> "GatewayListener":
        if self.proxy_protocol and not self.trusted_proxies:
            raise ValueError("proxy_protocol needs trusted_proxies: the proxies allowed to connect")
        return self


class Listeners(_Model):
    gateway: GatewayListener = GatewayListener(port=8443)
    management: Listener = Listener(port=9464)


class TLSConfig(_Model):
    """Server TLS. ``minimum_version`` below 1.2 is refused (MS-HMSHTTP 2.1 requires TLS)."""

    certificate: Path
    private_key: Path
    minimum_version: Literal["1.2", "1.3"] = "1.2"
    #: OpenSSL cipher string for TLS 1.2; ``None`` keeps Python's secure default.
    ciphers: str | None = None
    #: PEM CA bundle that client certificates must chain to. When set, the listener asks for a
    #: client certificate (optional: other providers still work) for the ``mtls`` provider.
    client_ca: Path | None = None


class Limits(_Model):
    #: Largest accepted request body in bytes; larger gets 413.
    max_request_bytes: int = Field(default=1024 * 1024, gt=0)
    #: Largest accepted upstream reply in bytes; larger gets 502.
    max_reply_bytes: int = Field(default=1024 * 1024 * 1024, gt=0)
    #: Time a new connection has to deliver its first request's headers (slow-loris guard).
    client_header_timeout_seconds: float = Field(default=10.0, gt=0)
    #: Time an idle keep-alive connection is kept open between requests.
    client_idle_timeout_seconds: float = Field(default=60.0, gt=0)
    #: Time allowed to receive a request body once its headers arrived.
    client_body_timeout_seconds: float = Field(default=30.0, gt=0)


class LoggingConfig(_Model):
    """The process log on stderr (the audit log is configured apart)."""

    format: Literal["json", "text"] = "json"
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"


class Reload(_Model):
    #: How often the topology directory is checked for added, changed or removed files.
    interval_seconds: float = Field(default=2.0, gt=0)


class Shutdown(_Model):
    """On SIGTERM: ``/readyz`` turns unready, then after ``drain_delay_seconds`` the listener
    closes and requests in flight get up to ``grace_seconds`` to finish."""

    drain_delay_seconds: float = Field(default=0.0, ge=0)
    grace_seconds: float = Field(default=30.0, ge=0)


class GatewayConfig(_Model):
    listeners: Listeners = Listeners()
    tls: TLSConfig
    limits: Limits = Limits()
    reload: Reload = Reload()
    shutdown: Shutdown = Shutdown()
    logging: LoggingConfig = LoggingConfig()
    audit: AuditConfig = AuditConfig()
    topologies_dir: Path = Path("topologies")
    #: Worker processes serving the gateway port (SO_REUSEPORT), ``auto``: one per CPU this
    #: process may run on. 1 serves in the ``serve`` process itself (gateway/workers.py).
    workers: Annotated[int, Field(ge=1, le=256)] | Literal["auto"] = 1
    #: The file this was read from (set by :func:`load_gateway_config`).
    source: Path | None = None


# --- topology files -------------------------------------------------------------------------


#: One entry of ``providers.authentication``: the registered settings model its ``type`` names.
AuthenticationProvider = Annotated[Union[settings_models()], Field(discriminator="type")]


class Providers(_Model):
    authentication: list[AuthenticationProvider] = Field(min_length=1)
    #: Slow-down then 429 for addresses whose credentials keep failing.
    failure_throttle: FailureThrottle = FailureThrottle()
    identity_assertion: IdentityAssertionConfig = IdentityAssertionConfig()


class SaslConfig(_Model):
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


class UpstreamConfig(_Model):
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


#: The reason a service-level ``methods:`` (before issue 21) is refused.
_MOVED_METHODS = ("methods moved to options.methods (a setting of the hms-thrift kind): "
                  "write options: {methods: [...]}")


class ServiceConfig(_Model):
    #: Which handler serves it (``gateway.services.KINDS``): ``hms-thrift``, the HMS Thrift RPC.
    kind: str = "hms-thrift"
    #: Path below ``/gateway/{topology}/``, without leading or trailing slash.
    path: str
    #: The HMS list it dispatches to; a kind that calls HMS refuses to build without it.
    upstream: UpstreamConfig | None = None
    #: Who may use this service (Knox ACL); None lets every authenticated identity in.
    authorization: AuthorizationConfig | None = None
    #: Requests served at once; beyond it, 503 with ``Retry-After``. None: no limit.
    max_concurrent_requests: int | None = Field(default=None, ge=1)
    #: Catalog policies (Ranger's Hive model, :mod:`gateway.policy`): a Ranger export or
    #: plugin download (``*.json``) or the project's YAML. None: no catalog policy.
    policy_file: Path | None = None
    #: The kind's own settings, validated by the kind's ``Options`` model when the topology is
    #: built (:mod:`gateway.services.base`); ``hms-thrift``: ``methods``, the exposed methods.
    options: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _moved_keys(cls, data: Any) -> Any:
        if isinstance(data, dict) and "methods" in data:
            raise ValueError(_MOVED_METHODS)
        return data

    @field_validator("path")
    @classmethod
    def _clean_path(cls, path: str) -> str:
        path = path.strip("/")
        if not path or any(part in ("", ".", "..") for part in path.split("/")):
            raise ValueError(f"{path!r} is not a relative URL path")
        return path


class TopologyConfig(_Model):
    name: str
    providers: Providers
    services: list[ServiceConfig] = Field(min_length=1)
    source: Path | None = None

    @field_validator("services")
    @classmethod
    def _unique_paths(cls, services: list[ServiceConfig]) -> list[ServiceConfig]:
        paths = [s.path for s in services]
        dupes = sorted({p for p in paths if paths.count(p) > 1})
        if dupes:
            raise ValueError(f"service path {dupes[0]!r} is declared twice")
        return services


# --- loading --------------------------------------------------------------------------------

_M = TypeVar("_M", bound=BaseModel)


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(path, "", f"cannot read: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else ""
        raise ConfigError(path, where, f"not valid YAML: {getattr(exc, 'problem', exc)}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(path, "", "must be a mapping of keys to values")
    return data


def _key(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in PROVIDERS:  # the discriminator tag pydantic inserts in the location
            continue
        else:
            out += f".{part}" if out else str(part)
    return out


def _validate(model: type[_M], data: dict[str, Any], path: Path) -> _M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        loc, reason = reported_error(model, exc)
        key = _key(loc) + (".methods" if reason == _MOVED_METHODS else "")
        raise ConfigError(path, key, reason) from None


def _resolve(base: Path, value: Path) -> Path:
    return value if value.is_absolute() else (base / value).resolve()


def load_gateway_config(path: Path | str) -> GatewayConfig:
    """Read and validate the gateway file; relative paths become absolute.

    Raises :class:`ConfigError` (file, key, reason) when the file is missing or invalid.
    """
    path = Path(path).resolve()
    cfg = _validate(GatewayConfig, _read_yaml(path), path)
    base = path.parent
    tls = cfg.tls.model_copy(
        update={
            "certificate": _resolve(base, cfg.tls.certificate),
            "private_key": _resolve(base, cfg.tls.private_key),
            "client_ca": _resolve(base, cfg.tls.client_ca) if cfg.tls.client_ca else None,
        }
    )
    if cfg.audit.path is not None:
        audit = cfg.audit.model_copy(update={"path": _resolve(base, cfg.audit.path)})
        cfg = cfg.model_copy(update={"audit": audit})
    return cfg.model_copy(
        update={"tls": tls, "topologies_dir": _resolve(base, cfg.topologies_dir), "source": path}
    )


def load_topology_file(path: Path | str) -> TopologyConfig:
    """Read and validate one topology file; its name is the file's stem (``default.yaml`` → ``default``).

    Raises :class:`ConfigError` when the file is invalid or a file it names (users file) is missing.
    """
    path = Path(path).resolve()
    data = _read_yaml(path)
    if "name" in data:
        raise ConfigError(path, "name", "the topology name is the file name; remove this key")
    cfg = _validate(TopologyConfig, {**data, "name": path.stem}, path)
    base = path.parent
    providers = []
    for i, provider in enumerate(cfg.providers.authentication):
        try:  # resolves and checks the provider's own files
            providers.append(provider.with_base(base))
        except ValueError as exc:
            field, _, reason = str(exc).partition(": ")
            raise ConfigError(path, f"providers.authentication[{i}].{field}", reason) from None
    services = []
    for i, service in enumerate(cfg.services):
        if service.policy_file is not None:
            policy_file = _resolve(base, service.policy_file)
            if not policy_file.is_file():
                raise ConfigError(path, f"services[{i}].policy_file", f"no such file: {policy_file}")
            service = service.model_copy(update={"policy_file": policy_file})
        if service.upstream is not None and service.upstream.sasl is not None:
            service = _with_keytab(service, base, path, f"services[{i}].upstream.sasl")
        services.append(service)
    return cfg.model_copy(
        update={
            "providers": cfg.providers.model_copy(update={"authentication": providers}),
            "services": services,
            "source": path,
        }
    )


def _with_keytab(service: ServiceConfig, base: Path, path: Path, key: str) -> ServiceConfig:
    """``service`` with its SASL keytab resolved against ``base``, once the keytab is readable
    and holds the principal (no KDC is asked). Raises :class:`ConfigError` naming the key."""
    from gateway.upstream.kerberos import KeytabError, check_keytab  # gssapi only when used

    upstream = service.upstream
    assert upstream is not None and upstream.sasl is not None
    sasl = upstream.sasl.model_copy(update={"keytab": _resolve(base, upstream.sasl.keytab)})
    try:
        check_keytab(sasl.principal, sasl.keytab)
    except KeytabError as exc:
        raise ConfigError(path, f"{key}.{exc.key}", str(exc)) from None
    return service.model_copy(update={"upstream": upstream.model_copy(update={"sasl": sasl})})


#: File name endings of topology files (both spellings of YAML's: ``default.yml`` is read too).
TOPOLOGY_SUFFIXES = (".yaml", ".yml")


def topology_files(directory: Path) -> list[Path]:
    """The topology files of ``directory`` (``*.yaml`` and ``*.yml``), sorted."""
    return sorted(p for suffix in TOPOLOGY_SUFFIXES for p in directory.glob("*" + suffix))


def load_topologies(directory: Path) -> dict[str, TopologyConfig]:
    """Every ``*.yaml``/``*.yml`` topology in ``directory``, by name. Raises :class:`ConfigError`,
    also when two files give the same name (``a.yaml`` and ``a.yml``)."""
    if not directory.is_dir():
        raise ConfigError(directory, "topologies_dir", "no such directory")
    topologies: dict[str, TopologyConfig] = {}
    for path in topology_files(directory):
        if path.stem in topologies:
            raise ConfigError(path, "", f"topology {path.stem!r} is also defined by "
                                        f"{topologies[path.stem].source}: keep one of the two files")
        topologies[path.stem] = load_topology_file(path)
    if not topologies:
        raise ConfigError(directory, "topologies_dir", "holds no *.yaml or *.yml topology file")
    return topologies

