"""Catalog policies in Apache Ranger's Hive service model, as typed, frozen objects.

Both sources (:mod:`gateway.policy.yaml_source`, :mod:`gateway.policy.ranger_json`) produce
these; :mod:`gateway.policy.engine` evaluates them. Terms are Ranger's (``RangerPolicy``,
``RangerPolicyItem``, ``RangerPolicyResource``; Hive service definition ``ranger-servicedef-hive.json``):

* resources form the hierarchy ``database`` > ``table`` > ``column``; a policy names the first
  one, two or three levels, each a list of values with ``*``/``?`` wildcards, matched
  case-insensitively, optionally ``isExcludes`` (matches what the values do not);
* a ``url`` policy names a location instead (Ranger Hive's ``url`` resource: storage URIs with
  ``*``/``?`` wildcards, case-sensitive, ``isRecursive`` for everything below), asked for with
  ``read``/``write`` when a client names a location itself (:mod:`gateway.policy.urls`);
* access types are :data:`ACCESS_TYPES`; ``all`` grants every one of them;
* a policy item names users, groups (``public``: everyone) and ``{USER}`` (any user);
* a policy has allow items, allow exceptions, deny items and deny exceptions, a
  ``policyPriority`` (0 normal, 1 override), ``isDenyAllElse`` and ``isEnabled``;
* a policy's ``policyType`` is access (0), data mask (1: ``dataMaskPolicyItems`` on
  database/table/column, each with a mask type of the service definition's ``dataMaskDef``) or
  row filter (2: ``rowFilterPolicyItems`` on database/table, each with a Hive SQL
  ``filterExpr``). Their resources match without wildcards (Hive's ``dataMaskDef`` and
  ``rowFilterDef`` resources say ``wildCard: false``), and their items decide in the order written,
  the first naming the user wins.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: Hive access types of Ranger's Hive service definition that concern catalog objects, in the
#: order the ``_any`` access is checked; ``all`` implies each of them.
ACCESS_TYPES: tuple[str, ...] = (
    "select", "update", "create", "drop", "alter", "index", "lock", "read", "write",
)
ALL = "all"
#: Ranger's ``RangerPolicyEngine.ANY_ACCESS``: "some access", used for listings and ``use db``.
ANY_ACCESS = "_any"
#: Ranger's ``RangerPolicyEngine.GROUP_PUBLIC`` and ``USER_CURRENT``.
GROUP_PUBLIC = "public"
USER_CURRENT = "{USER}"
#: The resource levels, top down (Ranger Hive: database level 1, table 2, column 3).
LEVELS: tuple[str, ...] = ("database", "table", "column")
#: Ranger Hive's resource for storage locations (:mod:`gateway.policy.urls`).
URL = "url"
#: Ranger's ``policyPriority`` values.
PRIORITY_NORMAL, PRIORITY_OVERRIDE = 0, 1
#: Ranger's ``policyType`` values (``RangerPolicy.POLICY_TYPE_*``).
POLICY_ACCESS, POLICY_DATAMASK, POLICY_ROWFILTER = 0, 1, 2
#: The one access type of Hive's ``dataMaskDef`` and ``rowFilterDef``.
SELECT = "select"
#: Ranger's ``RangerPolicy.MASK_TYPE_NONE``/``MASK_TYPE_NULL``/``MASK_TYPE_CUSTOM``.
MASK_NONE, MASK_NULL, MASK_CUSTOM = "MASK_NONE", "MASK_NULL", "CUSTOM"
#: The column placeholders of a mask's Hive expression (Ranger's Hive plugin,
#: ``RangerHiveAuthorizer.addCellValueTransformerAndCheckIfTransformed``).
COLUMN_TOKEN, COLUMN_TYPE_TOKEN = "{col}", "{colType}"


@dataclass(frozen=True)
class MaskType:
    """One ``dataMaskDef.maskTypes`` entry: its ``name`` and the Hive ``transformer`` expression
    (``{col}`` the column), None when the type has none (``MASK_NULL``, ``MASK_NONE``, ``CUSTOM``)."""

    name: str
    label: str
    transformer: str | None = None


#: The mask types of Ranger's Hive service definition (apache/ranger
#: ``agents-common/src/main/resources/service-defs/ranger-servicedef-hive.json``,
#: ``dataMaskDef.maskTypes``), with each type's ``transformer`` as written there.
HIVE_MASK_TYPES: dict[str, MaskType] = {m.name: m for m in (
    MaskType("MASK", "Redact", "mask({col})"),
    MaskType("MASK_SHOW_LAST_4", "Partial mask: show last 4", "mask_show_last_n({col}, 4, 'x', 'x', 'x', -1, '1')"),
    MaskType("MASK_SHOW_FIRST_4", "Partial mask: show first 4", "mask_show_first_n({col}, 4, 'x', 'x', 'x', -1, '1')"),
    MaskType("MASK_HASH", "Hash", "mask_hash({col})"),
    MaskType(MASK_NULL, "Nullify"),
    MaskType(MASK_NONE, "Unmasked (retain original value)"),
    MaskType("MASK_DATE_SHOW_YEAR", "Date: show only year", "mask({col}, 'x', 'x', 'x', -1, '1', 1, 0, -1)"),
    MaskType(MASK_CUSTOM, "Custom"),
)}


def expand_accesses(accesses: "tuple[str, ...] | list[str]") -> frozenset[str]:
    """Access names as granted: ``all`` adds every type of :data:`ACCESS_TYPES` (Ranger's
    ``impliedGrants``). Raises ``ValueError`` naming an unknown access type."""
    out: set[str] = set()
    for access in accesses:
        name = access.lower()
        if name == ALL:
            out.update(ACCESS_TYPES)
        elif name not in ACCESS_TYPES:
            raise ValueError(f"unknown access type {access!r} (known: {', '.join(ACCESS_TYPES + (ALL,))})")
        out.add(name)
    return frozenset(out)


@dataclass(frozen=True)
class ResourceSpec:
    """One level of a policy's resource (Ranger ``RangerPolicyResource``)."""

    values: tuple[str, ...]
    excludes: bool = False
    #: Ranger's ``isRecursive`` (``url`` only): a value also matches every location below it.
    recursive: bool = False


@dataclass(frozen=True)
class PolicyItem:
    """Who (users, groups, ``public``, ``{USER}``) gets which accesses (Ranger ``RangerPolicyItem``)."""

    accesses: frozenset[str]
    users: frozenset[str] = frozenset()
    groups: frozenset[str] = frozenset()

    def applies_to(self, user: str, groups: frozenset[str]) -> bool:
        """Ranger ``RangerDefaultPolicyItemEvaluator.matchUserGroupAndOwner`` without roles."""
        return (
            user in self.users
            or USER_CURRENT in self.users
            or GROUP_PUBLIC in self.groups
            or not self.groups.isdisjoint(groups)
        )


@dataclass(frozen=True)
class DataMaskItem:
    """A ``dataMaskPolicyItems`` entry: who (``who.accesses`` holds ``select`` for Hive), the
    mask type's name and, for ``CUSTOM``, its Hive ``valueExpr``."""

    who: PolicyItem
    mask_type: str
    value_expr: str | None = None


@dataclass(frozen=True)
class RowFilterItem:
    """A ``rowFilterPolicyItems`` entry: who, and the Hive SQL ``filterExpr`` ("" filters nothing,
    as Ranger's Hive plugin reads an empty expression)."""

    who: PolicyItem
    filter_expr: str


@dataclass(frozen=True)
class Policy:
    """One access policy. ``resources`` holds the named levels top down (1 to 3 of
    :data:`LEVELS`), or nothing for a ``url`` policy, whose locations are ``url``;
    ``priority`` is Ranger's ``policyPriority``."""

    id: int
    name: str
    resources: tuple[ResourceSpec, ...]
    allow: tuple[PolicyItem, ...] = ()
    allow_exceptions: tuple[PolicyItem, ...] = ()
    deny: tuple[PolicyItem, ...] = ()
    deny_exceptions: tuple[PolicyItem, ...] = ()
    priority: int = PRIORITY_NORMAL
    deny_all_else: bool = False
    enabled: bool = True
    url: ResourceSpec | None = None
    #: Ranger's ``policyType``; a data mask policy has ``data_mask`` items, a row filter policy
    #: ``row_filter`` items, and neither has access items.
    policy_type: int = POLICY_ACCESS
    data_mask: tuple[DataMaskItem, ...] = ()
    row_filter: tuple[RowFilterItem, ...] = ()


@dataclass(frozen=True)
class PolicySet:
    """What one policy file holds: the policies, what the loader left out (policies on other
    resources such as ``udf``), by id, and the mask types the policies may name (the file's
    service definition's, else :data:`HIVE_MASK_TYPES`)."""

    policies: tuple[Policy, ...]
    source: str = ""
    skipped: tuple[int, ...] = field(default=())
    mask_types: dict[str, MaskType] = field(default_factory=lambda: dict(HIVE_MASK_TYPES))
