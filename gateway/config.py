"""Configuration as data: YAML files validated once at start-up into typed, frozen objects.

Two kinds of file, after Apache Knox:

* the gateway file (``config/gateway.yaml``): listeners, TLS, limits, the topology directory;
* one topology file per topology (``config/topologies/<name>.yaml``): its providers
  (authentication, ...) and services (role, path, upstream, exposed methods).

Relative paths inside a file are resolved against that file's directory. Every problem is raised
as :class:`ConfigError` naming the file, the key and the reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, Union
from urllib.parse import urlsplit

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

#: The nine read methods of MS-HMSHTTP section 3.1.5, exposed when a service lists none.
SPEC_METHODS: tuple[str, ...] = (
    "get_all_databases",
    "get_databases",
    "get_database",
    "get_all_tables",
    "get_tables",
    "get_table",
    "get_tables_by_type",
    "get_partition_names",
    "get_partitions",
)


class ConfigError(Exception):
    """A configuration file is unreadable or invalid; ``str()`` is ``"<file>: <key>: <reason>"``."""

    def __init__(self, file: Path | str, key: str, reason: str):
        self.file, self.key, self.reason = str(file), key, reason
        super().__init__(f"{file}: {key or '(top level)'}: {reason}")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --- gateway file ---------------------------------------------------------------------------


class Listener(_Model):
    host: str = "0.0.0.0"
    port: int = Field(ge=0, le=65535)


class Listeners(_Model):
    gateway: Listener = Listener(port=8443)
    management: Listener = Listener(port=9464)


class TLSConfig(_Model):
    """Server TLS. ``minimum_version`` below 1.2 is refused (MS-HMSHTTP 2.1 requires TLS)."""

    certificate: Path
    private_key: Path
    minimum_version: Literal["1.2", "1.3"] = "1.2"
    #: OpenSSL cipher string for TLS 1.2; ``None`` keeps Python's secure default.
    ciphers: str | None = None


class Limits(_Model):
    #: Largest accepted request body in bytes; larger gets 413.
    max_request_bytes: int = Field(default=1024 * 1024, gt=0)
    #: Largest accepted upstream reply in bytes; larger gets 502.
    max_reply_bytes: int = Field(default=1024 * 1024 * 1024, gt=0)


class GatewayConfig(_Model):
    listeners: Listeners = Listeners()
    tls: TLSConfig
    limits: Limits = Limits()
    topologies_dir: Path = Path("topologies")
    #: The file this was read from (set by :func:`load_gateway_config`).
    source: Path | None = None


# --- topology files -------------------------------------------------------------------------


class HtpasswdProvider(_Model):
    """HTTP Basic (RFC 7617) against an Apache ``htpasswd`` file (bcrypt hashes, ``htpasswd -B``)."""

    type: Literal["htpasswd"]
    realm: str = "HMS Gateway"
    users_file: Path


AuthenticationProvider = Annotated[Union[HtpasswdProvider], Field(discriminator="type")]


class Providers(_Model):
    authentication: list[AuthenticationProvider] = Field(min_length=1)


class UpstreamConfig(_Model):
    """Where a service dispatches to: binary Thrift on TCP, as HMS listens on port 9083."""

    urls: list[str] = Field(min_length=1)
    transport: Literal["unframed", "framed"] = "unframed"
    connect_timeout_seconds: float = Field(default=5.0, gt=0)
    #: Time allowed for one call, from sending the request to the last byte of the reply.
    timeout_seconds: float = Field(default=60.0, gt=0)
    #: Idle connections kept per upstream URL.
    pool_size: int = Field(default=8, ge=0)

    @field_validator("urls")
    @classmethod
    def _thrift_urls(cls, urls: list[str]) -> list[str]:
        for url in urls:
            parts = urlsplit(url)
            if parts.scheme != "thrift" or not parts.hostname or not parts.port:
                raise ValueError(f"{url!r} is not a thrift://host:port URL")
        return urls


class ServiceConfig(_Model):
    role: str = "HMSHTTPTHRIFT"
    #: Path below ``/gateway/{topology}/``, without leading or trailing slash.
    path: str
    upstream: UpstreamConfig
    methods: list[str] = Field(default_factory=lambda: list(SPEC_METHODS), min_length=1)

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
        elif part in ("htpasswd",):  # discriminator tags pydantic inserts in the location
            continue
        else:
            out += f".{part}" if out else str(part)
    return out


def _validate(model: type[_M], data: dict[str, Any], path: Path) -> _M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        reason = err["msg"].removeprefix("Value error, ")
        raise ConfigError(path, _key(err["loc"]), reason) from None


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
        }
    )
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
        if isinstance(provider, HtpasswdProvider):
            users = _resolve(base, provider.users_file)
            if not users.is_file():
                raise ConfigError(
                    path, f"providers.authentication[{i}].users_file", f"no such file: {users}"
                )
            provider = provider.model_copy(update={"users_file": users})
        providers.append(provider)
    return cfg.model_copy(
        update={
            "providers": cfg.providers.model_copy(update={"authentication": providers}),
            "source": path,
        }
    )


def load_topologies(directory: Path) -> dict[str, TopologyConfig]:
    """Every ``*.yaml`` topology in ``directory``, by name. Raises :class:`ConfigError`."""
    if not directory.is_dir():
        raise ConfigError(directory, "topologies_dir", "no such directory")
    topologies = {p.stem: load_topology_file(p) for p in sorted(directory.glob("*.yaml"))}
    if not topologies:
        raise ConfigError(directory, "topologies_dir", "holds no *.yaml topology file")
    return topologies

