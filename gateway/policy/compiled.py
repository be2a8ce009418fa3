"""Catalog policies compiled for matching, and what one subject's policies are: the values of
each resource level as sets, prefixes and one regex (:class:`LevelMatcher`), a policy with its
levels compiled (:class:`CompiledPolicy`) and a policy as it concerns one (user, groups)
(:class:`PolicyEntry`). The evaluator (:mod:`gateway.policy.engine`) and its bulk listing
filter (:mod:`gateway.policy.listing`) both read them; neither imports the other's types.
Semantics: Ranger's ``RangerDefaultPolicyResourceMatcher`` and ``getMatchingPolicyItem``, as
the engine's docstring describes.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from functools import lru_cache
from typing import NamedTuple

from gateway.policy.model import Policy, ResourceSpec

__all__ = ["USER_TOKEN", "CompiledPolicy", "LevelMatcher", "Lru", "PolicyEntry"]

USER_TOKEN = "{user}"  # Ranger's {USER} resource macro, after lower-casing


class Lru(OrderedDict):
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
        parts = [_to_regex(p)[3:-1] for p in value.split(USER_TOKEN)]
        alternatives.append("(?:" + re.escape(user).join(parts) + ")")
    return re.compile("|".join(alternatives), re.DOTALL)


class LevelMatcher:
    """One policy level, compiled: exact values in a set, wildcard values in one regex."""

    __slots__ = ("key", "excludes", "match_any", "literals", "prefixes", "regex", "user_values",
                 "wild", "needles", "spec", "_per_user")

    def __init__(self, spec: ResourceSpec):
        values = [v.lower() for v in spec.values]
        self.spec = spec
        self.key = (tuple(sorted(set(values))), spec.excludes)
        self.excludes = spec.excludes
        self.match_any = "*" in values and not spec.excludes  # Ranger's isMatchAny
        self.user_values = tuple(v for v in values if USER_TOKEN in v)
        static = [v for v in values if USER_TOKEN not in v]
        self.literals = frozenset(v for v in static if not _has_wildcard(v))
        # 'prefix*', the usual Ranger value, as a prefix; other wildcard values as one regex
        self.prefixes = tuple(v[:-1] for v in static if v.endswith("*") and not _has_wildcard(v[:-1]))
        wild_values = [v for v in static if _has_wildcard(v) and not (v.endswith("*") and not _has_wildcard(v[:-1]))]
        wild = "|".join(_to_regex(v) for v in wild_values)
        # Each wildcard value's literal runs: a listing lacking one of them cannot match it.
        self.needles = tuple(tuple(r for r in re.split(r"[*?]", v) if r) for v in wild_values)
        self.wild = wild  # the wildcard values as one regex source, or ""
        self.regex = re.compile(wild, re.DOTALL) if wild else None
        self._per_user: Lru | None = None

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

    def for_user(self, user: str) -> "LevelMatcher":
        """This level with ``{USER}`` replaced by ``user`` (lower-cased): plain values that batch
        matching handles (literals, prefixes, one regex pass). Itself when it names no
        ``{USER}``, or when the user name holds a wildcard character or the macro itself."""
        if not self.user_values or _has_wildcard(user) or USER_TOKEN in user:
            return self
        if self._per_user is None:
            self._per_user = Lru(256)
        hit = self._per_user.get(user)
        if hit is None:
            values = tuple(v.replace(USER_TOKEN, user) for v in (x.lower() for x in self.spec.values))
            hit = self._per_user.put(user, LevelMatcher(ResourceSpec(values, self.spec.excludes)))
        return hit


class CompiledPolicy:
    """A policy with its levels compiled; ``deep_any[r]``: every level below the first ``r``
    is ``*``, so a request naming ``r`` levels is a SELF match."""

    __slots__ = ("policy", "id", "name", "priority", "order", "matchers", "depth", "deep_any")

    def __init__(self, policy: Policy, order: int):
        self.policy = policy
        self.id, self.name, self.priority, self.order = policy.id, policy.name, policy.priority, order
        self.matchers = tuple(LevelMatcher(spec) for spec in policy.resources)
        self.depth = len(self.matchers)
        self.deep_any = tuple(
            all(m.match_any for m in self.matchers[r:]) for r in range(self.depth + 1)
        )


class PolicyEntry(NamedTuple):
    """A policy as it concerns one (user, groups): the accesses its deny and allow items
    decide for them after exceptions, and whether it denies everything else."""

    policy: CompiledPolicy
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
