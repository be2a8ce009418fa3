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
* **A concrete access** counts SELF matches only. **``_any``** (listings, ``use db``) counts
  SELF and DESCENDANT matches, ignoring denials from DESCENDANT matches (Ranger's
  ``ignoreDescendantDeny``); it is allowed when one access type is allowed, and denied by a
  policy only when every access type is decided and denied (Ranger's ``getCompositeAccessResult``).

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

import re
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

from gateway.policy.listing import NameFilter, visible_names

from gateway.policy.model import (
    ACCESS_TYPES,
    ALL,
    ANY_ACCESS,
    LEVELS,
    Policy,
    PolicySet,
    ResourceSpec,
)

_USER_TOKEN = "{user}"  # Ranger's {USER} resource macro, after lower-casing
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


def _has_wildcard(value: str) -> bool:
    return "*" in value or "?" in value


def _to_regex(value: str) -> str:
    """Ranger's wildcard value as a regex: ``*`` any run, ``?`` one character, the rest literal
    (unlike fnmatch, ``[...]`` is literal, as in ``RangerAbstractResourceMatcher``)."""
    return "(?:" + re.escape(value).replace(r"\*", ".*").replace(r"\?", ".") + ")"


@lru_cache(maxsize=4096)
def _user_regex(values: tuple[str, ...], user: str) -> re.Pattern[str]:
    """Values holding ``{USER}``, with the user's (lower-cased) name put in, as one regex."""
    alternatives = []
    for value in values:
        parts = [_to_regex(p)[3:-1] for p in value.split(_USER_TOKEN)]
        alternatives.append("(?:" + re.escape(user).join(parts) + ")")
    return re.compile("|".join(alternatives), re.DOTALL)


class _LevelMatcher:
    """One policy level, compiled: exact values in a set, wildcard values in one regex."""

    __slots__ = ("key", "excludes", "match_any", "literals", "prefixes", "regex", "user_values",
                 "wild", "needles", "spec", "_per_user")

    def __init__(self, spec: ResourceSpec):
        values = [v.lower() for v in spec.values]
        self.spec = spec
        self.key = (tuple(sorted(set(values))), spec.excludes)
        self.excludes = spec.excludes
        self.match_any = "*" in values and not spec.excludes  # Ranger's isMatchAny
        self.user_values = tuple(v for v in values if _USER_TOKEN in v)
        static = [v for v in values if _USER_TOKEN not in v]
        self.literals = frozenset(v for v in static if not _has_wildcard(v))
        # 'prefix*', the usual Ranger value, as a prefix; other wildcard values as one regex
        self.prefixes = tuple(v[:-1] for v in static if v.endswith("*") and not _has_wildcard(v[:-1]))
        wild_values = [v for v in static if _has_wildcard(v) and not (v.endswith("*") and not _has_wildcard(v[:-1]))]
        wild = "|".join(_to_regex(v) for v in wild_values)
        # Each wildcard value's literal runs: a listing lacking one of them cannot match it.
        self.needles = tuple(tuple(r for r in re.split(r"[*?]", v) if r) for v in wild_values)
        self.wild = wild  # the wildcard values as one regex source, or ""
        self.regex = re.compile(wild, re.DOTALL) if wild else None
        self._per_user: _Lru | None = None

    def match(self, value: str, user: str) -> bool:
        """``value`` lower-cased."""
        if self.match_any:
            return True
        hit = (
            value in self.literals
            or value.startswith(self.prefixes)
            or (self.regex is not None and self.regex.fullmatch(value) is not None)
            or (bool(self.user_values) and self.user_pattern(user.lower()).fullmatch(value) is not None)
        )
        return hit != self.excludes

    def user_pattern(self, user: str) -> re.Pattern[str]:
        """The ``{USER}`` values with ``user`` (lower-cased) put in, as one regex."""
        return _user_regex(self.user_values, user)

    def for_user(self, user: str) -> "_LevelMatcher":
        """This level with ``{USER}`` replaced by ``user`` (lower-cased): plain values that batch
        matching handles (literals, prefixes, one regex pass). Itself when it names no
        ``{USER}``, or when the user name holds a wildcard character or the macro itself."""
        if not self.user_values or _has_wildcard(user) or _USER_TOKEN in user:
            return self
        if self._per_user is None:
            self._per_user = _Lru(256)
        hit = self._per_user.get(user)
        if hit is None:
            values = tuple(v.replace(_USER_TOKEN, user) for v in (x.lower() for x in self.spec.values))
            hit = self._per_user.put(user, _LevelMatcher(ResourceSpec(values, self.spec.excludes)))
        return hit


class _Compiled:
    """A policy with its levels compiled; ``deep_any[r]``: every level below the first ``r``
    is ``*``, so a request naming ``r`` levels is a SELF match."""

    __slots__ = ("policy", "id", "name", "priority", "order", "matchers", "depth", "deep_any")

    def __init__(self, policy: Policy, order: int):
        self.policy = policy
        self.id, self.name, self.priority, self.order = policy.id, policy.name, policy.priority, order
        self.matchers = tuple(_LevelMatcher(spec) for spec in policy.resources)
        self.depth = len(self.matchers)
        self.deep_any = tuple(
            all(m.match_any for m in self.matchers[r:]) for r in range(self.depth + 1)
        )


class _Entry(NamedTuple):
    """A policy as it concerns one (user, groups): the accesses its deny and allow items
    decide for them after exceptions, and whether it denies everything else."""

    policy: _Compiled
    denied: frozenset[str]
    allowed: frozenset[str]
    deny_all_else: bool

    def verdict(self, access: str) -> bool | None:
        """True allow, False deny, None no say (Ranger ``getMatchingPolicyItem`` order)."""
        if access in self.denied:
            return False
        if access in self.allowed:
            return True
        return False if self.deny_all_else else None


def _granted(items, exceptions, user: str, groups: frozenset[str]) -> frozenset[str]:
    granted: set[str] = set()
    for item in items:
        if item.applies_to(user, groups):
            granted |= item.accesses
    for item in exceptions:
        if item.applies_to(user, groups):
            granted -= item.accesses
    return frozenset(granted)


def _decide(matched: Iterable[tuple[_Entry, bool]], access: str) -> Decision:
    """One access type across the matched policies, each with ``descendant`` (its denials
    ignored); ``matched`` in evaluation order (priority, then file order)."""
    best: tuple[_Entry, bool] | None = None
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


def _decide_any(matched: Sequence[tuple[_Entry, bool]]) -> Decision:
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


def _allowed_any(matched: Sequence[tuple[_Entry, bool]]) -> bool:
    return _decide_any(matched).allowed


class _Lru(OrderedDict):
    """A bounded map dropping the least recently used entry."""

    def __init__(self, size: int):
        super().__init__()
        self.size = size

    def get(self, key):
        value = super().get(key)
        if value is not None:
            self.move_to_end(key)
        return value

    def put(self, key, value):
        self[key] = value
        if len(self) > self.size:
            self.popitem(last=False)
        return value


class PolicyEngine:
    """Evaluates a :class:`PolicySet` for requests. Built once per policy file (topology
    build or reload); immutable afterwards, safe to share between requests.

    ``user`` is the effective user name (after identity assertion), ``groups`` its groups;
    names of users and groups are case-sensitive, resource names case-insensitive.
    """

    def __init__(self, policies: PolicySet | Iterable[Policy]):
        policy_list = policies.policies if isinstance(policies, PolicySet) else tuple(policies)
        enabled = [p for p in policy_list if p.enabled]
        # Evaluation order: priority first (Ranger's PolicyEvalOrderComparator), then file order.
        order = sorted(range(len(enabled)), key=lambda i: (-enabled[i].priority, i))
        self._policies = tuple(_Compiled(enabled[i], rank) for rank, i in enumerate(order))
        self._subjects = _Lru(_SUBJECT_CACHE_SIZE)
        self._databases = _Lru(_DATABASE_CACHE_SIZE)
        self._filters = _Lru(_FILTER_CACHE_SIZE)

    def __len__(self) -> int:
        return len(self._policies)

    # --- the policies that concern one (user, groups), and one database, cached ------------

    def _subject(self, user: str, groups: Iterable[str]) -> tuple[_Entry, ...]:
        key = (user, groups if isinstance(groups, frozenset) else frozenset(groups))
        entries = self._subjects.get(key)
        if entries is None:
            out = []
            for compiled in self._policies:
                p = compiled.policy
                denied = _granted(p.deny, p.deny_exceptions, user, key[1])
                allowed = _granted(p.allow, p.allow_exceptions, user, key[1])
                if denied or allowed or p.deny_all_else:
                    out.append(_Entry(compiled, denied, allowed, p.deny_all_else))
            entries = self._subjects.put(key, tuple(out))
        return entries

    def _at_database(self, user: str, groups: Iterable[str], database: str) -> tuple[_Entry, ...]:
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
    ) -> list[tuple[_Entry, bool]]:
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


__all__ = ["Decision", "NO_POLICY", "PolicyEngine", "Resource", "LEVELS"]
