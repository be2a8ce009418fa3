"""Kerberos principal → short user name, with Hadoop's ``auth_to_local`` rules.

Syntax and semantics follow Hadoop ``org.apache.hadoop.security.authentication.util.KerberosName``
(the ``hadoop.security.auth_to_local`` property Knox's HadoopAuth provider uses):

* ``DEFAULT``: a principal of the default realm maps to its first component
  (``alice@EXAMPLE.COM`` → ``alice``, ``HTTP/h@EXAMPLE.COM`` → ``HTTP``);
* ``RULE:[n:format](regex)s/pattern/replacement/[g][/L]``: for principals with ``n`` components,
  build ``format`` (``$0`` realm, ``$1``.. components), and if ``regex`` matches it entirely
  apply the sed-style substitution (``g``: every match; ``/L``: lower-case the result).

Rules are tried in order; the first that applies wins. A result containing ``/`` or ``@``, or no
rule applying, means no local name (the request is refused).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_RULE = re.compile(
    r"^RULE:\[(\d+):([^\]]*)\]"  # [n:format]
    r"(?:\(([^)]*)\))?"  # (regex), optional
    r"(?:s/([^/]*)/([^/]*)/(g)?)?"  # s/pattern/replacement/g, optional
    r"/?(L)?$"
)


@dataclass(frozen=True)
class _Rule:
    components: int | None  # None: DEFAULT
    fmt: str = ""
    match: re.Pattern[str] | None = None
    pattern: re.Pattern[str] | None = None
    replacement: str = ""
    global_: bool = False
    lower: bool = False

    def apply(self, realm: str, parts: list[str], default_realm: str) -> str | None:
        if self.components is None:
            return parts[0] if realm == default_realm else None
        if len(parts) != self.components:
            return None
        values = [realm, *parts]
        try:
            name = re.sub(r"\$(\d+)", lambda m: values[int(m.group(1))], self.fmt)
        except IndexError:
            return None
        if self.match is not None and not self.match.fullmatch(name):
            return None
        if self.pattern is not None:
            name = self.pattern.sub(self.replacement, name, count=0 if self.global_ else 1)
        return name.lower() if self.lower else name


def _java_replacement(text: str) -> str:
    # Java's "$1" group references become Python's "\g<1>"; other backslashes stay literal.
    return re.sub(r"\$(\d+)", r"\\g<\1>", text.replace("\\", "\\\\"))


def parse_rules(rules: list[str]) -> tuple[_Rule, ...]:
    """Compile rule strings. Raises ValueError naming the first rule that does not parse."""
    out = []
    for text in rules:
        text = text.strip()
        if text == "DEFAULT":
            out.append(_Rule(None))
            continue
        m = _RULE.match(text)
        if m is None:
            raise ValueError(f"not an auth_to_local rule: {text!r}")
        n, fmt, regex, pattern, replacement, g, lower = m.groups()
        try:
            out.append(_Rule(
                components=int(n),
                fmt=fmt,
                match=re.compile(regex) if regex is not None else None,
                pattern=re.compile(pattern) if pattern is not None else None,
                replacement=_java_replacement(replacement or ""),
                global_=bool(g),
                lower=bool(lower),
            ))
        except re.error as exc:
            raise ValueError(f"bad regular expression in rule {text!r}: {exc}") from None
    return tuple(out)


class NameRules:
    """``short_name(principal)`` with rules compiled once; ``default_realm`` for ``DEFAULT``."""

    def __init__(self, rules: list[str], default_realm: str):
        self._rules = parse_rules(rules)
        self.default_realm = default_realm

    def short_name(self, principal: str) -> str | None:
        """The local user name, or None when no rule maps ``principal`` to a simple name."""
        name, at, realm = principal.rpartition("@")
        if not at:
            name, realm = principal, self.default_realm
        if not name:
            return None
        parts = name.split("/")
        for rule in self._rules:
            result = rule.apply(realm, parts, self.default_realm)
            if result is None:
                continue
            if not result or "/" in result or "@" in result:
                return None
            return result
        return None
