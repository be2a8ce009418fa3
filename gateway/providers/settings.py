"""The settings of the Knox providers other than authentication (whose settings models live
with each provider, :mod:`gateway.providers.authentication.settings`): identity assertion
(principal and group mapping, impersonation through Hadoop proxy-user rules) and the per-service
ACL of authorization. Read from the topology file (``providers.identity_assertion``,
``services[].authorization``); :mod:`gateway.config` places them."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from gateway.providers.knox_syntax import parse_group_mapping, parse_principal_mapping
from gateway.settings_model import SettingsModel, address_pattern


class ProxyUserRule(SettingsModel):
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
        return [address_pattern(h) for h in hosts]


class ImpersonationConfig(SettingsModel):
    """``doAs`` (Knox/Hadoop): ``?doAs=<user>`` acts as another user, only as ``proxy_users``
    allow; without proxy users, impersonation is off."""

    #: Authenticated (mapped) user name → what it may impersonate.
    proxy_users: dict[str, ProxyUserRule] = {}


class IdentityAssertionConfig(SettingsModel):
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


class AuthorizationConfig(SettingsModel):
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
        return [address_pattern(ip) for ip in ips]

    @field_validator("mode", mode="before")
    @classmethod
    def _mode(cls, mode: Any) -> Any:
        return mode.upper() if isinstance(mode, str) else mode
