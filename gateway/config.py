"""Configuration as data: YAML files validated once at start-up into typed, frozen objects.

Two kinds of file, after Apache Knox:

* the gateway file (``config/gateway.yaml``): listeners, TLS, limits, the topology directory;
* one topology file per topology (``config/topologies/<name>.yaml``): its providers
  (authentication, ...) and services (kind, path, upstream, the kind's own ``options``).

Each component's settings model lives beside the component (``providers/settings.py``,
``upstream/settings.py``, ``observability/settings.py``, each authentication provider's module,
each service kind's ``Options``); this module assembles them into the two files' models.
Relative paths inside a file are resolved against that file's directory. Every problem is raised
as :class:`ConfigError` naming the file, the key and the reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, Union

import yaml
from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from gateway.observability.settings import AuditConfig, LoggingConfig
from gateway.providers.authentication.registry import PROVIDERS, settings_models
from gateway.providers.authentication.settings import FailureThrottle
from gateway.providers.settings import AuthorizationConfig, IdentityAssertionConfig
from gateway.settings_model import SettingsModel, network
from gateway.upstream.settings import UpstreamConfig
from gateway.validation_errors import reported_error


class ConfigError(Exception):
    """A configuration file is unreadable or invalid; ``str()`` is ``"<file>: <key>: <reason>"``."""

    def __init__(self, file: Path | str, key: str, reason: str):
        self.file, self.key, self.reason = str(file), key, reason
        super().__init__(f"{file}: {key or '(top level)'}: {reason}")


class Listener(SettingsModel):
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
        return [network(c) for c in cidrs]

    @model_validator(mode="after")
    def _proxy_protocol_needs_trust(self) -> "GatewayListener":
        if self.proxy_protocol and not self.trusted_proxies:
            raise ValueError("proxy_protocol needs trusted_proxies: the proxies allowed to connect")
        return self


class Listeners(SettingsModel):
    gateway: GatewayListener = GatewayListener(port=8443)
    management: Listener = Listener(port=9464)


class TLSConfig(SettingsModel):
    """Server TLS. ``minimum_version`` below 1.2 is refused (MS-HMSHTTP 2.1 requires TLS)."""

    certificate: Path
    private_key: Path
    minimum_version: Literal["1.2", "1.3"] = "1.2"
    #: OpenSSL cipher string for TLS 1.2; ``None`` keeps Python's secure default.
    ciphers: str | None = None
    #: PEM CA bundle that client certificates must chain to. When set, the listener asks for a
    #: client certificate (optional: other providers still work) for the ``mtls`` provider.
    client_ca: Path | None = None


class Limits(SettingsModel):
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


class Reload(SettingsModel):
    #: How often the topology directory is checked for added, changed or removed files.
    interval_seconds: float = Field(default=2.0, gt=0)


class Shutdown(SettingsModel):
    """On SIGTERM: ``/readyz`` turns unready, then after ``drain_delay_seconds`` the listener
    closes and requests in flight get up to ``grace_seconds`` to finish."""

    drain_delay_seconds: float = Field(default=0.0, ge=0)
    grace_seconds: float = Field(default=30.0, ge=0)


class GatewayConfig(SettingsModel):
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


class Providers(SettingsModel):
    authentication: list[AuthenticationProvider] = Field(min_length=1)
    #: Slow-down then 429 for addresses whose credentials keep failing.
    failure_throttle: FailureThrottle = FailureThrottle()
    identity_assertion: IdentityAssertionConfig = IdentityAssertionConfig()


#: The reason a service-level ``methods:`` (before issue 21) is refused.
_MOVED_METHODS = ("methods moved to options.methods (a setting of the hms-thrift kind): "
                  "write options: {methods: [...]}")


class ServiceConfig(SettingsModel):
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


class TopologyConfig(SettingsModel):
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

