"""The bulk listing filter: which names of a listing (databases, or the tables of one database)
one user may see, for thousands of names at once; what ``PolicyEngine.visible_databases`` and
``visible_tables`` use, deciding as ``PolicyEngine.visible`` does name by name.

A :class:`NameFilter` is built once per (user, groups, database) from the policies in play
(the engine caches it): every literal and ``prefix*`` value as one trie-shaped regex, matched
with the live wildcard values (those whose literal runs occur in the listing) in one pass over
the newline-joined listing (:func:`visible_names`); only the names it finds are looked at, and
a decision is made once per distinct set of matching policies.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Sequence
from functools import lru_cache
from itertools import compress

from gateway.policy.compiled import PolicyEntry

#: The ``_any`` verdict of matched (entry, descendant) pairs in evaluation order (the engine's).
Decide = Callable[[list], bool]
_FILTER_VERDICTS = 1024

#: Regex nesting a trie may reach before a flat alternation is used instead (``re`` recurses).
_TRIE_DEPTH = 64


def _trie(words: dict[str, str]) -> str | None:
    """Regex source matching exactly each ``word + tail`` of ``words`` (word → tail regex),
    factored as a trie so that a line costs a few character tests, not one per word; None
    without words."""
    root: dict = {}
    for word, tail in words.items():
        node = root
        for char in word:
            node = node.setdefault(char, {})
        node.setdefault("", []).append(tail)

    def emit(node: dict, depth: int) -> str:
        if depth > _TRIE_DEPTH:
            raise RecursionError
        alternatives = []
        for char, child in node.items():
            if char == "":
                alternatives.extend(child)
                continue
            run = char  # a chain of single-child nodes is one literal run
            while len(child) == 1 and "" not in child:
                (char, child), = child.items()
                run += char
            alternatives.append(re.escape(run) + emit(child, depth + 1))
        return alternatives[0] if len(alternatives) == 1 else "(?:" + "|".join(alternatives) + ")"

    try:
        return emit(root, 0) if root else None
    except RecursionError:
        return "(?:" + "|".join(re.escape(word) + tail for word, tail in words.items()) + ")"


@lru_cache(maxsize=256)  # a source may hold every value of many policies
def _line_regex(source: str) -> re.Pattern[str]:
    """``source`` as whole lines of a listing joined with newlines and framed by newlines:
    ``findall`` returns each line it matches (``.`` stops at a newline: no line spills)."""
    return re.compile("\n(" + source + ")(?=\n)")


#: Up to this many distinct names decided unlike the rest are found by substring search.
_FEW = 8


def _lines_of(framed: str, names: set[str]) -> list[int]:
    """The line numbers, ascending, of ``names`` in ``framed`` (lines framed by newlines)."""
    found = []
    for name in names:
        needle = "\n" + name + "\n"
        at = framed.find(needle)
        while at >= 0:
            found.append(at)
            at = framed.find(needle, at + 1)
    found.sort()
    lines, line, previous = [], 0, 0
    for at in found:
        line += framed.count("\n", previous, at)
        previous = at
        lines.append(line)
    return lines


class NameFilter:
    """What one subject's policies say about the names at one level (databases; or the tables
    of one database), worked out once per (user, groups, database) for every listing.

    ``constant``: (entry, descendant) of the policies whose level is ``*``, the same for every
    name; ``variable``: the others, bit ``i`` of a name's signature when policy ``i`` matches it.
    An excluding level matches every name but its hits, so a signature is ``base ^ hits``: only
    the names some value matches (found by one regex pass over the listing) need a look.
    """

    __slots__ = ("constant", "variable", "base", "literals", "prefixes", "lengths", "trie", "wild", "runs",
                 "level", "user", "_decide", "_values", "_verdicts")

    def __init__(self, entries: tuple[PolicyEntry, ...], k: int, user: str, decide: Decide):
        self.level, self.user, self._decide = k, user, decide
        self.constant: list[tuple[PolicyEntry, bool]] = []
        self.variable: list[tuple[PolicyEntry, bool]] = []
        for entry in entries:
            if entry.policy.depth <= k:
                continue  # says nothing about the level below
            pair = (entry, not entry.policy.deep_any[k + 1])
            (self.constant if entry.policy.matchers[k].match_any else self.variable).append(pair)
        self.base = 0
        self.literals: dict[str, int] = {}  # value → the bits of the policies naming it
        self.prefixes: dict[str, int] = {}
        # wildcard regex source → [regex, policy bits, bits of its values (below)]
        self.wild: dict[str, list] = {}
        self.runs: dict[str, int] = {}  # a literal run of wildcard values → the values holding it
        self._values = 0
        low_user = user.lower()
        for i, (entry, _) in enumerate(self.variable):
            bit = 1 << i
            matcher = entry.policy.matchers[k].for_user(low_user)
            if matcher.excludes:
                self.base |= bit
            for value in matcher.literals:
                self.literals[value] = self.literals.get(value, 0) | bit
            for value in matcher.prefixes:
                self.prefixes[value] = self.prefixes.get(value, 0) | bit
            if matcher.wild:
                self._add_wild(matcher.wild, matcher.regex, bit, matcher.needles)
            if matcher.user_values:  # the user name holds a wildcard character
                regex = matcher.user_pattern(low_user)
                self._add_wild(regex.pattern, regex, bit, ((),))
        self.lengths = sorted({len(p) for p in self.prefixes})
        self.trie = _trie({**{v: "" for v in self.literals}, **{p: "[^\n]*" for p in self.prefixes}})
        self._verdicts: dict[int, bool] = {}

    def _add_wild(self, source: str, regex, bit: int, needles: tuple[tuple[str, ...], ...]) -> None:
        """One level's wildcard values; ``needles``: each value's literal runs (a listing
        lacking one of them cannot hold a name the value matches)."""
        known = self.wild.setdefault(source, [regex, 0, 0])
        known[1] |= bit
        for runs in needles:
            value = 1 << self._values
            self._values += 1
            known[2] |= value
            for run in set(runs):
                self.runs[run] = self.runs.get(run, 0) | value

    def verdict(self, signature: int) -> bool:
        """``_any`` for a name matched by the variable policies of ``signature``, remembered:
        listings polled again and again meet the same few signatures."""
        verdict = self._verdicts.get(signature)
        if verdict is None:
            if len(self._verdicts) >= _FILTER_VERDICTS:
                self._verdicts.clear()
            chosen = self.constant + [v for i, v in enumerate(self.variable) if signature >> i & 1]
            chosen.sort(key=lambda ed: ed[0].policy.order)
            verdict = self._verdicts[signature] = self._decide(chosen)
        return verdict

    def hits(self, framed: str) -> dict[str, int]:
        """Lower-cased names of the listing ``framed`` (each name followed and preceded by a
        newline, none holding one) that some value matches → the bits of the policies whose
        values match them."""
        # Wildcard values one of whose literal runs is missing from the listing match nothing.
        dead = 0
        for run, values in self.runs.items():
            if run not in framed:
                dead |= values
        live = [(source, regex, bits) for source, (regex, bits, values) in self.wild.items() if values & ~dead]
        sources = ([] if self.trie is None else [self.trie]) + [source for source, _, _ in live]
        if not sources:
            return {}
        found = set(_line_regex("|".join(sources)).findall(framed))
        literals, prefixes, lengths = self.literals, self.prefixes, self.lengths
        out = {}
        for name in found:
            bits = literals.get(name, 0)
            for n in lengths:
                if n > len(name):
                    break
                bits |= prefixes.get(name[:n], 0)
            for _, regex, mask in live:
                if mask & ~bits and regex.fullmatch(name) is not None:
                    bits |= mask
            out[name] = bits
        return out


def visible_names(names_filter: NameFilter, names: Sequence[str]) -> list[str]:
    """The names of ``names`` (one listing at ``names_filter``'s level) its policies show, in
    order (``PolicyEngine.visible`` for each)."""
    if not names_filter.variable:
        return list(names) if names_filter.verdict(0) else []
    if not names:
        return []
    block = "\n".join(names)
    if block.count("\n") != len(names) - 1:  # a name holding a newline: one by one
        return [n for n in names if _visible_one(names_filter, n.lower())]
    framed = "\n" + block.lower() + "\n"
    base, verdict = names_filter.base, names_filter.verdict
    usual = verdict(base)
    unusual = {name for name, bits in names_filter.hits(framed).items() if verdict(base ^ bits) != usual}
    if not unusual:
        return list(names) if usual else []
    if len(unusual) <= _FEW:
        lines = _lines_of(framed, unusual)
        if not usual:
            return [names[i] for i in lines]
        shown = list(names)
        for i in reversed(lines):
            del shown[i]
        return shown
    flagged = map(unusual.__contains__, framed[1:-1].split("\n"))  # C-level passes: no loop per name
    return list(compress(names, map(operator.not_, flagged) if usual else flagged))


def _visible_one(names_filter: NameFilter, name: str) -> bool:
    """``name`` (lower-cased) judged alone, each variable policy's level matched in turn."""
    signature = 0
    k, user = names_filter.level, names_filter.user
    for i, (entry, _) in enumerate(names_filter.variable):
        if entry.policy.matchers[k].match(name, user):
            signature |= 1 << i
    return names_filter.verdict(signature)
