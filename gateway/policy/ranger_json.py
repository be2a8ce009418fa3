"""Apache Ranger's policy JSON, loaded unchanged, for a Hive service.

Two shapes are read, both as Ranger writes them:

* Ranger Admin's export (``GET /service/plugins/policies/exportJson``, the UI's "Export"):
  ``{"metaDataInfo": {...}, "policies": [RangerPolicy, ...]}``;
* the plugin policy download (``GET /service/plugins/policies/download/{serviceName}``,
  Ranger's ``ServicePolicies``, also what plugins cache in ``policycache/``):
  ``{"serviceName": ..., "policyVersion": ..., "policies": [...], "serviceDef": {...}, ...}``.

Kept: access policies (``policyType`` 0) on the ``database`` > ``table`` > ``column``
hierarchy, and on ``url`` (``isRecursive`` kept; the locations a client names itself,
:mod:`gateway.policy.urls`). Left out and listed in :attr:`PolicySet.skipped`: policies on other
Hive resources (``udf``, ``hiveservice``, ``global``), masking and row-filter policies, and policies
of other service types. Refused (:class:`~gateway.config.ConfigError`), because evaluating
them without their meaning would grant or deny the wrong thing: enabled policies with roles,
conditions or validity schedules, and incremental ``policyDeltas``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from gateway.config import ConfigError, _validate
from gateway.policy.model import LEVELS, URL, Policy, PolicyItem, PolicySet, ResourceSpec, expand_accesses

_POLICY_TYPE_ACCESS = 0
_ITEM_LISTS = (
    ("policyItems", "allow"),
    ("allowExceptions", "allow_exceptions"),
    ("denyPolicyItems", "deny"),
    ("denyExceptions", "deny_exceptions"),
)


class _Json(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    @field_validator("*", mode="before")
    @classmethod
    def _null_is_empty(cls, value: Any, info) -> Any:
        if value is None:  # Ranger writes null for an empty list or map at times
            default = cls.model_fields[info.field_name].default
            return default
        return value


class _Access(_Json):
    type: str
    isAllowed: bool = True


class _Item(_Json):
    accesses: list[_Access] = []
    users: list[str] = []
    groups: list[str] = []
    roles: list[str] = []
    conditions: list[Any] = []


class _Resource(_Json):
    values: list[str] = []
    isExcludes: bool = False
    isRecursive: bool = False


class _Policy(_Json):
    id: int
    name: str = ""
    service: str | None = None
    serviceType: str | None = None
    isEnabled: bool = True
    policyType: int = _POLICY_TYPE_ACCESS
    policyPriority: int = 0
    isDenyAllElse: bool = False
    resources: dict[str, _Resource] = {}
    policyItems: list[_Item] = []
    allowExceptions: list[_Item] = []
    denyPolicyItems: list[_Item] = []
    denyExceptions: list[_Item] = []
    conditions: list[Any] = []
    validitySchedules: list[Any] = []


class _Download(_Json):
    policies: list[_Policy] = []


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(path, "", f"cannot read: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(path, "", f"not valid JSON: {exc}") from None


def _items(policy: _Policy, field: str, key: str, path: Path) -> tuple[PolicyItem, ...]:
    out = []
    for i, item in enumerate(getattr(policy, field)):
        where = f"{key}.{field}[{i}]"
        if item.roles:
            raise ConfigError(path, f"{where}.roles", "Ranger roles are not supported: name users and groups")
        if item.conditions:
            raise ConfigError(path, f"{where}.conditions", "policy item conditions are not supported")
        try:
            accesses = expand_accesses([a.type for a in item.accesses if a.isAllowed])
        except ValueError as exc:
            raise ConfigError(path, f"{where}.accesses", str(exc)) from None
        out.append(PolicyItem(accesses, frozenset(item.users), frozenset(item.groups)))
    return tuple(out)


def _convert(policy: _Policy, key: str, path: Path) -> Policy | None:
    """The policy in the model, or None when it does not concern catalog access."""
    levels = LEVELS[: len(policy.resources)]
    url = set(policy.resources) == {URL}
    if policy.policyType != _POLICY_TYPE_ACCESS or not levels or (set(policy.resources) != set(levels) and not url):
        return None
    if policy.isEnabled:
        for field in ("conditions", "validitySchedules"):
            if getattr(policy, field):
                raise ConfigError(path, f"{key}.{field}", f"policy {field} are not supported")
    resources = []
    for name in () if url else levels:
        spec = policy.resources[name]
        if not spec.values:
            raise ConfigError(path, f"{key}.resources.{name}.values", "names no value")
        resources.append(ResourceSpec(tuple(spec.values), spec.isExcludes))
    items = {ours: _items(policy, field, key, path) for field, ours in _ITEM_LISTS}
    locations = None
    if url:
        spec = policy.resources[URL]
        if not spec.values:
            raise ConfigError(path, f"{key}.resources.url.values", "names no value")
        if spec.isExcludes:
            raise ConfigError(path, f"{key}.resources.url.isExcludes", "Hive's url resource has no excludes")
        locations = ResourceSpec(tuple(spec.values), recursive=spec.isRecursive)
    return Policy(
        id=policy.id,
        name=policy.name or f"policy {policy.id}",
        resources=tuple(resources),
        url=locations,
        priority=policy.policyPriority,
        deny_all_else=policy.isDenyAllElse,
        enabled=policy.isEnabled,
        **items,
    )


def load_ranger_json(path: Path) -> PolicySet:
    """Read a Ranger export or plugin download of one Hive service.

    Raises :class:`~gateway.config.ConfigError` (file, key, reason) on unreadable or invalid
    JSON, unsupported features (see the module docstring), or policies of several services.
    """
    data = _read_json(path)
    if isinstance(data, list):
        data = {"policies": data}
    if not isinstance(data, dict):
        raise ConfigError(path, "", "must be a Ranger export or policy download (a JSON object)")
    if data.get("policyDeltas") and not data.get("policies"):
        raise ConfigError(path, "policyDeltas", "incremental policy deltas are not supported: download the full policies")
    if data.get("serviceDef") and isinstance(data["serviceDef"], dict):
        kind = data["serviceDef"].get("name")
        if kind and kind != "hive":
            raise ConfigError(path, "serviceDef.name", f"is {kind!r}; only Hive service policies apply")
    parsed = _validate(_Download, data, path)
    services = sorted({p.service for p in parsed.policies if p.service and p.serviceType in (None, "hive")})
    if len(services) > 1:
        raise ConfigError(path, "policies", f"hold policies of several services ({', '.join(services)}): export one")
    kept, skipped, seen = [], [], set()
    for i, raw in enumerate(parsed.policies):
        if raw.serviceType not in (None, "hive"):
            skipped.append(raw.id)
            continue
        if raw.id in seen:
            raise ConfigError(path, f"policies[{i}].id", f"policy id {raw.id} is used twice")
        seen.add(raw.id)
        policy = _convert(raw, f"policies[{i}]", path)
        (kept.append(policy) if policy is not None else skipped.append(raw.id))
    return PolicySet(tuple(kept), str(path), tuple(skipped))
