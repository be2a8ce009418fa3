"""Apache Ranger's policy JSON, loaded unchanged, for a Hive service.

Two shapes are read, both as Ranger writes them:

* Ranger Admin's export (``GET /service/plugins/policies/exportJson``, the UI's "Export"):
  ``{"metaDataInfo": {...}, "policies": [RangerPolicy, ...]}``;
* the plugin policy download (``GET /service/plugins/policies/download/{serviceName}``,
  Ranger's ``ServicePolicies``, also what plugins cache in ``policycache/``):
  ``{"serviceName": ..., "policyVersion": ..., "policies": [...], "serviceDef": {...}, ...}``.

Kept: access policies (``policyType`` 0) on the ``database`` > ``table`` > ``column``
hierarchy, and on ``url`` (``isRecursive`` kept; the locations a client names itself,
:mod:`gateway.policy.urls`); data-mask policies (``policyType`` 1, ``dataMaskPolicyItems``) and
row-filter policies (``policyType`` 2, ``rowFilterPolicyItems``), checked by
:func:`gateway.policy.restrictions.check_policy`. Mask types and their transformers are the
file's ``serviceDef.dataMaskDef`` (a plugin download carries it), else Ranger's Hive service
definition; so is whether mask and filter resources take wildcards (Hive's: no). Left out and
listed in :attr:`PolicySet.skipped`: policies on other Hive resources (``udf``,
``hiveservice``, ``global``) and policies of other service types. Refused
(:class:`~gateway.config.ConfigError`), because evaluating them without their meaning would
grant, deny, filter or mask the wrong thing: enabled policies with roles, conditions or validity
schedules, mask or filter policies :func:`~gateway.policy.restrictions.check_policy` refuses,
and incremental ``policyDeltas``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from gateway.config import ConfigError, _validate
from gateway.policy.model import (
    HIVE_MASK_TYPES, LEVELS, POLICY_ACCESS, POLICY_DATAMASK, POLICY_ROWFILTER, URL, DataMaskItem, MaskType, Policy,
    PolicyItem, PolicySet, ResourceSpec, RowFilterItem, expand_accesses,
)
from gateway.policy.restrictions import Unsupported, check_policy

_POLICY_TYPE_ACCESS = POLICY_ACCESS
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


class _DataMaskInfo(_Json):
    dataMaskType: str = ""
    conditionExpr: str | None = None
    valueExpr: str | None = None


class _RowFilterInfo(_Json):
    filterExpr: str | None = None


class _Item(_Json):
    accesses: list[_Access] = []
    users: list[str] = []
    groups: list[str] = []
    roles: list[str] = []
    conditions: list[Any] = []
    dataMaskInfo: _DataMaskInfo | None = None
    rowFilterInfo: _RowFilterInfo | None = None


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
    dataMaskPolicyItems: list[_Item] = []
    rowFilterPolicyItems: list[_Item] = []
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
            raise ConfigError(path, f"{where}.roles", f"policy {policy.id}: Ranger roles are not supported: name users and groups")
        if item.conditions:
            raise ConfigError(path, f"{where}.conditions", f"policy {policy.id}: policy item conditions are not supported")
        try:
            accesses = expand_accesses([a.type for a in item.accesses if a.isAllowed])
        except ValueError as exc:
            raise ConfigError(path, f"{where}.accesses", str(exc)) from None
        out.append(PolicyItem(accesses, frozenset(item.users), frozenset(item.groups)))
    return tuple(out)


class _ServiceDef:
    """What the file's service definition says of masks and filters: the mask types, and
    whether mask/filter resources take wildcards (Ranger merges ``dataMaskDef.resources``
    ``matcherOptions`` over the service's resources; the Hive definition says ``false``)."""

    def __init__(self, data: dict[str, Any], path: Path):
        service_def = data.get("serviceDef") if isinstance(data.get("serviceDef"), dict) else None
        self.mask_types = dict(HIVE_MASK_TYPES)
        self.wildcards = {POLICY_DATAMASK: False, POLICY_ROWFILTER: False}
        if service_def is None:
            return
        base = {r.get("name"): _wildcard(r, True) for r in service_def.get("resources") or () if isinstance(r, dict)}
        for policy_type, name in ((POLICY_DATAMASK, "dataMaskDef"), (POLICY_ROWFILTER, "rowFilterDef")):
            part = service_def.get(name) if isinstance(service_def.get(name), dict) else {}
            resources = [r for r in part.get("resources") or () if isinstance(r, dict)]
            self.wildcards[policy_type] = bool(resources) and all(
                _wildcard(r, base.get(r.get("name"), True)) for r in resources)
        masks = (service_def.get("dataMaskDef") or {}).get("maskTypes") if isinstance(service_def.get("dataMaskDef"), dict) else None
        if masks:
            self.mask_types = {}
            for i, m in enumerate(masks):
                if not isinstance(m, dict) or not isinstance(m.get("name"), str):
                    raise ConfigError(path, f"serviceDef.dataMaskDef.maskTypes[{i}].name", "names no mask type")
                transformer = m.get("transformer")
                self.mask_types[m["name"]] = MaskType(m["name"], str(m.get("label") or m["name"]),
                                                      transformer if isinstance(transformer, str) and transformer else None)


def _wildcard(resource: dict[str, Any], default: bool) -> bool:
    options = resource.get("matcherOptions") if isinstance(resource.get("matcherOptions"), dict) else {}
    value = options.get("wildCard")
    return default if value is None else str(value).lower() == "true"  # Boolean.parseBoolean


def _restriction_items(policy: _Policy, key: str, path: Path) -> dict[str, tuple]:
    """The data-mask or row-filter items of a mask or filter policy, in the order written."""
    field = "dataMaskPolicyItems" if policy.policyType == POLICY_DATAMASK else "rowFilterPolicyItems"
    who = _items(policy, field, key, path)
    out = []
    for i, (raw, item) in enumerate(zip(getattr(policy, field), who)):
        if policy.policyType == POLICY_DATAMASK:
            info = raw.dataMaskInfo
            if info is None or not info.dataMaskType:
                raise ConfigError(path, f"{key}.{field}[{i}].dataMaskInfo.dataMaskType",
                                  f"policy {policy.id}: names no mask type")
            if info.conditionExpr:
                raise ConfigError(path, f"{key}.{field}[{i}].dataMaskInfo.conditionExpr",
                                  f"policy {policy.id}: mask conditions are not evaluated")
            out.append(DataMaskItem(item, info.dataMaskType, info.valueExpr or None))
        else:
            out.append(RowFilterItem(item, (raw.rowFilterInfo.filterExpr or "") if raw.rowFilterInfo else ""))
    return {"data_mask" if policy.policyType == POLICY_DATAMASK else "row_filter": tuple(out)}


def _convert(policy: _Policy, key: str, path: Path, service_def: "_ServiceDef") -> Policy | None:
    """The policy in the model, or None when it does not concern catalog access."""
    levels = LEVELS[: len(policy.resources)]
    url = set(policy.resources) == {URL}
    restriction = policy.policyType in (POLICY_DATAMASK, POLICY_ROWFILTER)
    if policy.policyType not in (_POLICY_TYPE_ACCESS, POLICY_DATAMASK, POLICY_ROWFILTER) or not levels \
            or (set(policy.resources) != set(levels) and (not url or restriction)):
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
    if restriction:
        built = Policy(id=policy.id, name=policy.name or f"policy {policy.id}", resources=tuple(resources),
                       priority=policy.policyPriority, enabled=policy.isEnabled, policy_type=policy.policyType,
                       **_restriction_items(policy, key, path))
        try:  # a disabled policy is never evaluated: nothing to refuse
            if built.enabled:
                check_policy(built, service_def.mask_types, wildcards=service_def.wildcards[policy.policyType])
        except Unsupported as exc:
            raise ConfigError(path, f"{key}.{exc.key}", f"policy {policy.id}: {exc.reason}") from None
        return built
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
    service_def = _ServiceDef(data, path)
    kept, skipped, seen = [], [], set()
    for i, raw in enumerate(parsed.policies):
        if raw.serviceType not in (None, "hive"):
            skipped.append(raw.id)
            continue
        if raw.id in seen:
            raise ConfigError(path, f"policies[{i}].id", f"policy id {raw.id} is used twice")
        seen.add(raw.id)
        policy = _convert(raw, f"policies[{i}]", path, service_def)
        (kept.append(policy) if policy is not None else skipped.append(raw.id))
    return PolicySet(tuple(kept), str(path), tuple(skipped), service_def.mask_types)
