"""The project's own policy file (YAML): Ranger's Hive policy model in the gateway's words.

```yaml
policies:
  - id: 10
    name: analysts read sales
    priority: normal            # normal (0) or override (1): Ranger's policyPriority
    deny_all_else: false        # Ranger's isDenyAllElse
    enabled: true               # Ranger's isEnabled
    resources:                  # database, then optionally table, then column
      database: [sales]
      table: ["*"]
      column: {values: ["ssn", "card_*"], excludes: true}   # Ranger's isExcludes
    allow:            [{groups: [analysts], accesses: [select]}]
    allow_exceptions: [{users: [intern], accesses: [select]}]
    deny:             []
    deny_exceptions:  []
  - id: 11
    name: etl places tables under s3://lake/etl   # Ranger Hive's url resource
    resources:
      url: {values: ["s3://lake/etl"], recursive: true}
    allow: [{users: [etl], accesses: [read, write]}]
  - id: 20
    name: mask card numbers                # Ranger data-mask policy (policyType 1)
    resources: {database: [sales], table: [customers], column: [card]}
    data_mask:                             # in order: the first item naming the user decides
      - {users: [auditor], mask: MASK_NONE}
      - {groups: [public], mask: MASK_SHOW_LAST_4}    # a mask type of Ranger's Hive service def
      - {groups: [ops], mask: CUSTOM, value_expr: "concat('x', substr({col}, -2))"}
  - id: 21
    name: analysts see EMEA orders         # Ranger row-filter policy (policyType 2)
    resources: {database: [sales], table: [orders]}
    row_filter:
      - {groups: [analysts], filter: "region = 'EMEA'"}
```

A data-mask policy names database, table and column, a row-filter policy database and table,
each without wildcards (Hive's ``dataMaskDef``/``rowFilterDef``); their items take
``accesses`` ``[select]`` by default.

Raises :class:`gateway.config.ConfigError` naming the file, the key and the reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from gateway.config import ConfigError, _read_yaml, _validate
from gateway.policy.model import (
    HIVE_MASK_TYPES,
    POLICY_ACCESS,
    POLICY_DATAMASK,
    POLICY_ROWFILTER,
    PRIORITY_NORMAL,
    PRIORITY_OVERRIDE,
    DataMaskItem,
    Policy,
    PolicyItem,
    PolicySet,
    ResourceSpec,
    RowFilterItem,
    expand_accesses,
)
from gateway.policy.restrictions import Unsupported, check_policy
from gateway.settings_model import SettingsModel

#: Ranger JSON's key names (what check_policy reports) -> this file's.
_KEYS = (("dataMaskPolicyItems", "data_mask"), ("rowFilterPolicyItems", "row_filter"),
         (".dataMaskInfo.dataMaskType", ".mask"), (".dataMaskInfo.valueExpr", ".value_expr"),
         (".rowFilterInfo.filterExpr", ".filter"), (".values", ""))


class _Values(SettingsModel):
    values: list[str] = Field(min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:  # a bare list (or one string) of values
        if isinstance(value, str):
            return {"values": [value]}
        return {"values": value} if isinstance(value, list) else value


class _Resource(_Values):
    excludes: bool = False


class _Who(SettingsModel):
    users: list[str] = []
    groups: list[str] = []
    accesses: list[str] = ["select"]

    @field_validator("accesses")
    @classmethod
    def _known(cls, accesses: list[str]) -> list[str]:
        expand_accesses(accesses)
        return accesses

    @model_validator(mode="after")
    def _someone(self) -> "_Who":
        if not self.users and not self.groups:
            raise ValueError("names no users and no groups (use groups: [public] for everyone)")
        return self

    def who(self) -> PolicyItem:
        return PolicyItem(expand_accesses(self.accesses), frozenset(self.users), frozenset(self.groups))


class _Item(_Who):
    accesses: list[str] = Field(min_length=1)

    def build(self) -> PolicyItem:
        return self.who()


class _MaskItem(_Who):
    mask: str
    value_expr: str | None = None

    def build(self) -> DataMaskItem:
        return DataMaskItem(self.who(), self.mask, self.value_expr)


class _FilterItem(_Who):
    filter: str

    def build(self) -> RowFilterItem:
        return RowFilterItem(self.who(), self.filter)


class _Url(_Values):
    recursive: bool = False  # Ranger's isRecursive


class _Resources(SettingsModel):
    database: _Resource | None = None
    table: _Resource | None = None
    column: _Resource | None = None
    url: _Url | None = None

    @model_validator(mode="after")
    def _contiguous(self) -> "_Resources":
        if self.url is not None:
            if self.database is not None or self.table is not None or self.column is not None:
                raise ValueError("url stands alone: a url policy names no database, table or column")
            return self
        if self.database is None:
            raise ValueError("names database (or url)")
        if self.column is not None and self.table is None:
            raise ValueError("column needs table")
        return self


class _Policy(SettingsModel):
    id: int
    name: str = ""
    enabled: bool = True
    priority: Literal["normal", "override"] = "normal"
    deny_all_else: bool = False
    resources: _Resources
    allow: list[_Item] = []
    allow_exceptions: list[_Item] = []
    deny: list[_Item] = []
    deny_exceptions: list[_Item] = []
    data_mask: list[_MaskItem] = []
    row_filter: list[_FilterItem] = []

    @model_validator(mode="after")
    def _one_kind(self) -> "_Policy":
        kinds = [k for k in ("data_mask", "row_filter") if getattr(self, k)]
        access = any((self.allow, self.allow_exceptions, self.deny, self.deny_exceptions, self.deny_all_else))
        if len(kinds) > 1 or (kinds and access):
            raise ValueError("a policy is an access, a data_mask or a row_filter policy, not several")
        return self

    def build(self) -> Policy:
        r = self.resources
        levels = [x for x in (r.database, r.table, r.column) if x is not None]
        return Policy(
            id=self.id,
            name=self.name or f"policy {self.id}",
            resources=tuple(ResourceSpec(tuple(x.values), x.excludes) for x in levels),
            url=None if r.url is None else ResourceSpec(tuple(r.url.values), recursive=r.url.recursive),
            allow=tuple(i.build() for i in self.allow),
            allow_exceptions=tuple(i.build() for i in self.allow_exceptions),
            deny=tuple(i.build() for i in self.deny),
            deny_exceptions=tuple(i.build() for i in self.deny_exceptions),
            priority=PRIORITY_OVERRIDE if self.priority == "override" else PRIORITY_NORMAL,
            deny_all_else=self.deny_all_else,
            enabled=self.enabled,
            policy_type=POLICY_DATAMASK if self.data_mask else POLICY_ROWFILTER if self.row_filter else POLICY_ACCESS,
            data_mask=tuple(i.build() for i in self.data_mask),
            row_filter=tuple(i.build() for i in self.row_filter),
        )


class _PolicyFile(SettingsModel):
    policies: list[_Policy]

    @field_validator("policies")
    @classmethod
    def _unique_ids(cls, policies: list[_Policy]) -> list[_Policy]:
        seen: set[int] = set()
        for policy in policies:
            if policy.id in seen:
                raise ValueError(f"policy id {policy.id} is used twice")
            seen.add(policy.id)
        return policies


def load_yaml_policies(path: Path) -> PolicySet:
    """Read and validate a YAML policy file. Raises :class:`~gateway.config.ConfigError`."""
    parsed = _validate(_PolicyFile, _read_yaml(path), path)
    built = tuple(p.build() for p in parsed.policies)
    for i, policy in enumerate(built):
        if policy.policy_type == POLICY_ACCESS or not policy.enabled:  # a disabled one is never evaluated
            continue
        try:
            check_policy(policy, HIVE_MASK_TYPES)
        except Unsupported as exc:
            key = exc.key
            for theirs, ours in _KEYS:
                key = key.replace(theirs, ours)
            raise ConfigError(path, f"policies[{i}].{key}", f"policy {policy.id}: {exc.reason}") from None
    return PolicySet(built, str(path))
