"""The one evaluator of catalog policies, after Apache Ranger's policy engine.

Semantics follow ``RangerPolicyEngineImpl`` and ``RangerDefaultPolicyEvaluator``
(apache/ranger ``agents-common``), checked against the decisions of Ranger's own test cases
(``agents-common/src/test/resources/policyengine/test_policyengine_hive*.json``):

* **Resource match** (``RangerDefaultPolicyResourceMatcher.getMatchType``). A request names a
  database, optionally a table, optionally a column; each named level must match the policy's
  level (values with ``*``/``?``, case-insensitive, ``isExcludes`` inverts). A request deeper
  than the policy does not match (a database-only policy says nothing about tables). A request
  shallower than the policy matches as SELF when every deeper policy level is ``*`` (Ranger's
  ``isMatchAny``), else as DESCENDANT: the policy covers something below the requested object.
* **One policy, one access type** (``evaluatePolicyItems``/``getMatchingPolicyItem``): a deny
  item naming the user and the access decides *deny* unless a deny exception names them too;
  then an allow item decides *allow* unless an allow exception names them; otherwise
  ``isDenyAllElse`` decides *deny*; otherwise the policy has no say.
* **Across policies** (``RangerPolicyEngineImpl.evaluatePoliciesNoAudit`` and the per-access
  merge in ``evaluatePolicyItems``): the verdict of the highest ``policyPriority`` wins; at equal
  priority deny beats allow. Disabled policies are never evaluated. No verdict: denied, policy
  id ``-1`` (Ranger's "no policy decided").
* **Locations** (Hive's ``url`` resource, :meth:`PolicyEngine.evaluate_url`): the ``url``
  policies alone, matched by :mod:`gateway.policy.urls`, decided as above.
* **A concrete access** counts SELF matches only. **``_any``** (listings, ``use db``) counts
  SELF and DESCENDANT matches, ignoring denials from DESCENDANT matches (Ranger's
  ``ignoreDescendantDeny``); it is allowed when one access type is allowed, and denied by a
  policy only when every access type is decided and denied (Ranger's ``getCompositeAccessResult``).

* **Row filters and masks** (``RangerPolicyEngineImpl.evalRowFilterPolicies`` and
  ``evalDataMaskPolicies``, :meth:`PolicyEngine.row_filter`, :meth:`PolicyEngine.data_mask`):
  the row-filter policies (database/table) or data-mask policies (database/table/column) whose
  resource is the requested one (SELF), by priority then file order; in a policy the first item
  (in the order written, as Ranger keeps them) naming the user and ``select`` decides; the first
  policy with such an item decides for the request. None decides: no filter, no mask, policy id
  ``-1``.

Deciding policy when several policies of equal priority give the same verdict: the first in
file order (Ranger orders such ties by an internal evaluation-cost estimate, so the reported id
may differ from Ranger's there; the decision itself does not).

Performance: wildcard values are compiled to regular expressions once at load; the policies
that can concern a user (by user, group, ``public``, ``{USER}``) are worked out once per
(user, groups) and cached. :meth:`PolicyEngine.visible_tables` and
:meth:`PolicyEngine.visible_databases` use the bulk listing filter of
:mod:`gateway.policy.listing`, built once per (user, groups, database) and cached here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from gateway.policy.compiled import CompiledPolicy, Lru, PolicyEntry
from gateway.policy.listing import NameFilter, visible_names
from gateway.policy.model import (
    ACCESS_TYPES, ALL, ANY_ACCESS, HIVE_MASK_TYPES, LEVELS, POLICY_ACCESS, POLICY_DATAMASK, POLICY_ROWFILTER,
    SELECT, MaskType, Policy, PolicySet,
)
from gateway.policy.urls import UrlMatcher, normal_url

_SUBJECT_CACHE_SIZE = 1024
_DATABASE_CACHE_SIZE = 8192
_FILTER_CACHE_SIZE = 2048
NO_POLICY = -1


class Resource(NamedTuple):
    """A catalog object: a database, a table in it, or a column of that table."""

    database: str
    table: str | None = None
    column: str | None = None

    def levels(self) -> tuple[str, ...]:
        """The named levels, lower-cased, top down. Raises ``ValueError`` when a level is
        skipped (a column without a table), which Ranger never matches."""
        if self.column is not None and self.table is None:
            raise ValueError("a column needs its table")
        named = (self.database, self.table, self.column)
        return tuple(v.lower() for v in named if v is not None)


@dataclass(frozen=True, slots=True)
class Decision:
    """The outcome of one request: ``policy_id`` is the deciding policy, or ``-1`` when no
    policy decided (then ``allowed`` is False), as Ranger's ``RangerAccessResult`` reports."""

    allowed: bool
    policy_id: int
    access: str
    policy_name: str | None = None

    @property
    def reason(self) -> str:
        verdict = "allowed" if self.allowed else "denied"
        if self.policy_id == NO_POLICY:
            return f"{verdict}: no policy decided (policy id -1)"
        return f"{verdict} by policy {self.policy_id} ({self.policy_name})"




@dataclass(frozen=True, slots=True)
class RowFilterResult:
    """Ranger's row-filter result for one table: ``filter_expr`` the Hive SQL expression, None
    when no filter applies (no item decided, or the deciding item's expression is empty);
    ``policy_id`` the deciding policy, ``-1`` when none decided."""

    filter_expr: str | None
    policy_id: int = -1
    policy_name: str | None = None


@dataclass(frozen=True, slots=True)
class DataMaskResult:
    """Ranger's data-mask result for one column: ``mask_type`` (None: no policy decided), the
    type's definition ``mask`` (None when the file's service definition does not name the type),
    ``value_expr`` for ``CUSTOM``, ``policy_id`` the deciding policy or ``-1``."""

    mask_type: str | None
    policy_id: int = -1
    policy_name: str | None = None
    value_expr: str | None = None
    mask: MaskType | None = None

    @property
    def masked(self) -> bool:
        """Ranger's ``isMaskEnabled``: a mask type other than ``MASK_NONE`` applies."""
        return bool(self.mask_type) and self.mask_type.upper() != "MASK_NONE"


def _granted(items, exceptions, user: str, groups: frozenset[str]) -> frozenset[str]:
    granted: set[str] = set()
    for item in items:
        if item.applies_to(user, groups):
            granted |= item.accesses
    for item in exceptions:
        if item.applies_to(user, groups):
            granted -= item.accesses
    return frozenset(granted)


def _entries(policies: Iterable[CompiledPolicy], user: str, groups: frozenset[str]) -> tuple[PolicyEntry, ...]:
    """The policies of ``policies`` that concern ``user`` (in ``groups``), each with what its
    items decide for them."""
    out = []
    for compiled in policies:
        p = compiled.policy
        denied = _granted(p.deny, p.deny_exceptions, user, groups)
        allowed = _granted(p.allow, p.allow_exceptions, user, groups)
        if denied or allowed or p.deny_all_else:
            out.append(PolicyEntry(compiled, denied, allowed, p.deny_all_else))
    return tuple(out)


def _decide(matched: Iterable[tuple[PolicyEntry, bool]], access: str) -> Decision:
    """One access type across the matched policies, each with ``descendant`` (its denials
    ignored); ``matched`` in evaluation order (priority, then file order)."""
    best: tuple[PolicyEntry, bool] | None = None
    for entry, descendant in matched:
        if best is not None and entry.policy.priority < best[0].policy.priority:
            break  # a lower priority never overrides a decision
        verdict = entry.verdict(access)
        if verdict is None or (descendant and verdict is False):
            continue
        if best is None or (best[1] and not verdict):  # at equal priority, deny beats allow
            best = (entry, verdict)
    if best is None:
        return Decision(False, NO_POLICY, access)
    return Decision(best[1], best[0].policy.id, access, best[0].policy.name)


def _decide_any(matched: Sequence[tuple[PolicyEntry, bool]]) -> Decision:
    """Ranger's ``_any``: allowed if one access type is; denied by a policy if all are denied."""
    first_denial = None
    undecided = False
    for access in ACCESS_TYPES:
        decision = _decide(matched, access)
        if decision.allowed:
            return Decision(True, decision.policy_id, ANY_ACCESS, decision.policy_name)
        if decision.policy_id == NO_POLICY:
            undecided = True
        elif first_denial is None:
            first_denial = decision
    if undecided or first_denial is None:
        return Decision(False, NO_POLICY, ANY_ACCESS)
    return Decision(False, first_denial.policy_id, ANY_ACCESS, first_denial.policy_name)


def _ordered(policies: Sequence[Policy], policy_type: int) -> tuple[CompiledPolicy, ...]:
    """The enabled policies of one type, compiled, in evaluation order (priority, file order)."""
    chosen = [p for p in policies if p.enabled and p.policy_type == policy_type]
    order = sorted(range(len(chosen)), key=lambda i: (-chosen[i].priority, i))
    return tuple(CompiledPolicy(chosen[i], rank) for rank, i in enumerate(order))


class _TableIndex:
    """Row-filter or data-mask policies by the (database, table) they name: Hive's mask and
    filter resources are literal values (no wildcards), so a request looks up its table instead
    of matching every policy; the few that match otherwise (``{USER}``, excludes, wildcards a
    file's service definition turns on) are tried for every table, in evaluation order."""

    def __init__(self, policies: Sequence[CompiledPolicy]):
        self.exact: dict[tuple[str, str], list[CompiledPolicy]] = {}
        general = []
        for compiled in policies:
            database, table = compiled.matchers[0], compiled.matchers[1]
            if any(m.excludes or m.match_any or m.user_values or m.prefixes or m.regex is not None
                   for m in (database, table)):
                general.append(compiled)
                continue
            for d in database.literals:
                for t in table.literals:
                    self.exact.setdefault((d, t), []).append(compiled)
        self.general = tuple(general)

    def candidates(self, database: str, table: str) -> Sequence[CompiledPolicy]:
        """The policies that may match ``database.table`` (lower-cased), in evaluation order."""
        found = self.exact.get((database, table), ())
        if not self.general:
            return found
        return sorted((*found, *self.general), key=lambda c: c.order)


def _first_item(policies: Sequence[CompiledPolicy], user: str, groups: Iterable[str],
                levels: tuple[str, ...], field: str):
    """(policy, item) of the first policy whose resource is ``levels`` (SELF) with an item for
    the user and ``select``, the first such item; None when none."""
    groups = groups if isinstance(groups, frozenset) else frozenset(groups)
    for compiled in policies:
        if compiled.depth != len(levels) or not all(m.match(v, user) for m, v in zip(compiled.matchers, levels)):
            continue
        for item in getattr(compiled.policy, field):
            if SELECT in item.who.accesses and item.who.applies_to(user, groups):
                return compiled, item
    return None


def _allowed_any(matched: Sequence[tuple[PolicyEntry, bool]]) -> bool:
    return _decide_any(matched).allowed




class PolicyEngine:
    """Evaluates a :class:`PolicySet` for requests. Built once per policy file (topology
    build or reload); immutable afterwards, safe to share between requests.

    ``user`` is the effective user name (after identity assertion), ``groups`` its groups;
    names of users and groups are case-sensitive, resource names case-insensitive.
    """

    def __init__(self, policies: PolicySet | Iterable[Policy]):
        policy_list = policies.policies if isinstance(policies, PolicySet) else tuple(policies)
        self.mask_types = dict(policies.mask_types) if isinstance(policies, PolicySet) else dict(HIVE_MASK_TYPES)
        self._row_filters = _ordered(policy_list, POLICY_ROWFILTER)
        self._data_masks = _ordered(policy_list, POLICY_DATAMASK)
        self._filter_index = _TableIndex(self._row_filters)
        self._mask_index = _TableIndex(self._data_masks)
        enabled = [p for p in policy_list if p.enabled and p.url is None and p.policy_type == POLICY_ACCESS]
        # Evaluation order: priority first (Ranger's PolicyEvalOrderComparator), then file order.
        order = sorted(range(len(enabled)), key=lambda i: (-enabled[i].priority, i))
        self._policies = tuple(CompiledPolicy(enabled[i], rank) for rank, i in enumerate(order))
        urls = [p for p in policy_list if p.enabled and p.url is not None and p.policy_type == POLICY_ACCESS]
        order = sorted(range(len(urls)), key=lambda i: (-urls[i].priority, i))
        self._url_policies = tuple(CompiledPolicy(urls[i], rank) for rank, i in enumerate(order))
        self._url_matchers = tuple(UrlMatcher(c.policy.url.values, c.policy.url.recursive)
                                   for c in self._url_policies)
        self._url_subjects = Lru(_SUBJECT_CACHE_SIZE)
        self._subjects = Lru(_SUBJECT_CACHE_SIZE)
        self._databases = Lru(_DATABASE_CACHE_SIZE)
        self._filters = Lru(_FILTER_CACHE_SIZE)

    def __len__(self) -> int:
        return len(self._policies) + len(self._url_policies) + len(self._row_filters) + len(self._data_masks)

    @property
    def has_restrictions(self) -> bool:
        """Whether any enabled row-filter or data-mask policy exists (cheap skip for callers)."""
        return bool(self._row_filters or self._data_masks)

    # --- the policies that concern one (user, groups), and one database, cached ------------

    def _subject(self, user: str, groups: Iterable[str]) -> tuple[PolicyEntry, ...]:
        key = (user, groups if isinstance(groups, frozenset) else frozenset(groups))
        entries = self._subjects.get(key)
        if entries is None:
            entries = self._subjects.put(key, _entries(self._policies, user, key[1]))
        return entries

    def _at_database(self, user: str, groups: Iterable[str], database: str) -> tuple[PolicyEntry, ...]:
        """The subject's policies whose database level matches ``database`` (lower-cased)."""
        entries = self._subject(user, groups)
        key = (id(entries), database)  # entries live as long as their cache slot
        hit = self._databases.get(key)
        if hit is None or hit[0] is not entries:
            hit = self._databases.put(key, (entries, tuple(
                e for e in entries if e.policy.matchers[0].match(database, user))))
        return hit[1]

    def _matches(
        self, user: str, groups: Iterable[str], levels: tuple[str, ...], any_access: bool
    ) -> list[tuple[PolicyEntry, bool]]:
        """(entry, descendant) for each policy whose resource matches ``levels``."""
        out = []
        r = len(levels)
        below = levels[1:]
        for entry in self._at_database(user, groups, levels[0]):
            compiled = entry.policy
            if r > compiled.depth:
                continue
            if below and not all(m.match(v, user) for m, v in zip(compiled.matchers[1:], below)):
                continue
            descendant = not compiled.deep_any[r]
            if descendant and not any_access:
                continue
            out.append((entry, descendant))
        return out

    # --- the API ---------------------------------------------------------------------------

    def evaluate(
        self, user: str, groups: Iterable[str], resource: Resource, access: str
    ) -> Decision:
        """Ranger's ``isAccessAllowed`` for one request: ``access`` is one of
        :data:`~gateway.policy.model.ACCESS_TYPES`, ``all``, or ``_any``.

        Raises ``ValueError`` for an unknown access type or a column without a table.
        """
        access = access.lower()
        if access != ANY_ACCESS and access != ALL and access not in ACCESS_TYPES:
            raise ValueError(f"unknown access type {access!r}")
        levels = resource.levels()
        any_access = access == ANY_ACCESS
        matched = self._matches(user, groups, levels, any_access)
        return _decide_any(matched) if any_access else _decide(matched, access)

    def evaluate_url(self, user: str, groups: Iterable[str], url: str, access: str) -> Decision:
        """Ranger's ``isAccessAllowed`` for Hive's ``url`` resource: ``access`` (``read`` or
        ``write``, Hive's url accesses; any of :data:`~gateway.policy.model.ACCESS_TYPES`) on the
        location ``url`` (compared in :func:`~gateway.policy.urls.normal_url` form), decided by
        the ``url`` policies alone, as :meth:`evaluate` decides (priority, deny before allow; no
        verdict: denied, policy id -1). Raises ``ValueError`` for an unknown access type."""
        access = access.lower()
        if access not in ACCESS_TYPES:
            raise ValueError(f"unknown access type {access!r}")
        key = (user, groups if isinstance(groups, frozenset) else frozenset(groups))
        entries = self._url_subjects.get(key)
        if entries is None:
            entries = self._url_subjects.put(key, _entries(self._url_policies, user, key[1]))
        url = normal_url(url)
        return _decide([(e, False) for e in entries if self._url_matchers[e.policy.order].match(url)], access)

    def row_filter(self, user: str, groups: Iterable[str], database: str, table: str) -> RowFilterResult:
        """Ranger's ``evalRowFilterPolicies`` for a ``select`` on ``database.table`` (see the
        module docstring). Never raises."""
        levels = (database.lower(), table.lower())
        hit = _first_item(self._filter_index.candidates(*levels), user, groups, levels, "row_filter")
        if hit is None:
            return RowFilterResult(None)
        compiled, item = hit
        return RowFilterResult(item.filter_expr or None, compiled.id, compiled.name)

    def data_mask(self, user: str, groups: Iterable[str], database: str, table: str, column: str) -> DataMaskResult:
        """Ranger's ``evalDataMaskPolicies`` for a ``select`` of ``database.table.column`` (see
        the module docstring). Never raises."""
        levels = (database.lower(), table.lower(), column.lower())
        hit = _first_item(self._mask_index.candidates(*levels[:2]), user, groups, levels, "data_mask")
        if hit is None:
            return DataMaskResult(None)
        compiled, item = hit
        return DataMaskResult(item.mask_type, compiled.id, compiled.name, item.value_expr,
                              self.mask_types.get(item.mask_type))

    def masked_column_names(self, user: str, groups: Iterable[str], database: str,
                            table: str) -> tuple[str, ...] | None:
        """The column names (lower-cased, ``{USER}`` put in) that data-mask policies on
        ``database.table`` name, or None when one naming columns by exclusion or by wildcard
        has an item masking the user (any column may be masked)."""
        levels = (database.lower(), table.lower())
        groups = groups if isinstance(groups, frozenset) else frozenset(groups)
        out: list[str] = []
        for compiled in self._mask_index.candidates(*levels):
            if not all(m.match(v, user) for m, v in zip(compiled.matchers[:2], levels)):
                continue
            spec, column = compiled.policy.resources[2], compiled.matchers[2]
            if spec.excludes or column.match_any or column.prefixes or column.regex is not None:
                item = next((i for i in compiled.policy.data_mask
                             if SELECT in i.who.accesses and i.who.applies_to(user, groups)), None)
                if item is not None and item.mask_type.upper() != "MASK_NONE":
                    return None
                continue
            out.extend(v.lower().replace("{user}", user.lower()) for v in spec.values)
        return tuple(dict.fromkeys(out))

    def visible(self, user: str, groups: Iterable[str], database: str, table: str | None = None) -> bool:
        """Whether a listing shows the database (or the table): ``_any`` access on it or on
        something below it."""
        return self.evaluate(user, groups, Resource(database, table), ANY_ACCESS).allowed

    def columns_uniform(
        self, user: str, groups: Iterable[str], database: str, table: str, access: str = "select"
    ) -> Decision | None:
        """The one decision every column of ``database.table`` gets for ``access``, or None when
        columns may differ (a policy matching the table names columns other than ``*``).

        Cheap (no column names needed): the Thrift service decides from a request alone whether
        a reply needs column filtering. Raises ``ValueError`` for an unknown access type.
        """
        levels = (database.lower(), table.lower())
        for entry in self._at_database(user, groups, levels[0]):
            compiled = entry.policy
            if compiled.depth == 3 and not compiled.matchers[2].match_any and compiled.matchers[1].match(levels[1], user):
                return None
        # Every column-level policy of the table is 'column: *': any name stands for all.
        return self.evaluate(user, groups, Resource(database, table, "*"), access)

    def visible_databases(self, user: str, groups: Iterable[str], names: Sequence[str]) -> list[str]:
        """The names of ``names`` the user may see, in order (``visible`` for each)."""
        return visible_names(self._name_filter(user, groups, None), names)

    def visible_tables(
        self, user: str, groups: Iterable[str], database: str, names: Sequence[str]
    ) -> list[str]:
        """The table names of ``database`` the user may see, in order (``visible`` for each)."""
        return visible_names(self._name_filter(user, groups, database), names)

    def listing_verdict(self, user: str, groups: Iterable[str], database: str | None = None) -> bool | None:
        """What a listing of the tables of ``database`` (None: of databases) shows the user
        whatever the names: True every name, False none, None it depends on the names. Lets a
        caller skip decoding a listing (``visible_tables``/``visible_databases`` agree)."""
        names_filter = self._name_filter(user, groups, database)
        return None if names_filter.variable else names_filter.verdict(0)

    def _name_filter(self, user: str, groups: Iterable[str], database: str | None) -> NameFilter:
        if database is None:
            entries, key = self._subject(user, groups), None
        else:
            key = database.lower()
            entries = self._at_database(user, groups, key)
        slot = (id(entries), key)  # entries live as long as their cache slot
        hit = self._filters.get(slot)
        if hit is None or hit[0] is not entries:
            level = 0 if database is None else 1
            hit = self._filters.put(slot, (entries, NameFilter(entries, level, user, _allowed_any)))
        return hit[1]


__all__ = ["DataMaskResult", "Decision", "NO_POLICY", "PolicyEngine", "Resource", "RowFilterResult", "LEVELS"]
