"""Apache Knox's one-line mapping syntax for identity assertion, parsed into plain dicts.

Knox's ``Default`` identity-assertion provider takes ``principal.mapping`` and
``group.principal.mapping`` as ``actual[,another-actual]=mapped;...`` (Knox
``PrincipalMapper``): ``"guest,alice=hdfs;mary=alice2"`` maps guest and alice to hdfs and mary
to alice2; ``"*=users;alice,bob=admins"`` puts everyone in group users and alice and bob also in
admins. These functions are pure; :mod:`gateway.config` calls them while validating YAML.
"""

from __future__ import annotations

import re

# A user or group name: printable, no separators of the syntax, no whitespace inside.
_NAME = re.compile(r"[^\s,;=]{1,256}")


def _names(text: str, what: str) -> list[str]:
    names = [n.strip() for n in text.split(",")]
    for name in names:
        if not _NAME.fullmatch(name):
            raise ValueError(f"{what} {name!r} is not a valid name")
    return names


def _entries(mapping: str) -> list[tuple[list[str], list[str]]]:
    out = []
    for entry in mapping.split(";"):
        if not entry.strip():
            continue
        left, sep, right = entry.partition("=")
        if not sep:
            raise ValueError(f"entry {entry.strip()!r} has no '=' (expected actual[,actual]=mapped)")
        out.append((_names(left, "principal"), _names(right, "mapped name")))
    return out


def parse_principal_mapping(mapping: str) -> dict[str, str]:
    """``"guest,alice=hdfs;mary=alice2"`` → ``{"guest": "hdfs", "alice": "hdfs", "mary": "alice2"}``.

    Raises ``ValueError`` on a malformed entry, several mapped names, or a principal mapped twice.
    """
    table: dict[str, str] = {}
    for principals, mapped in _entries(mapping):
        if len(mapped) != 1:
            raise ValueError(f"principals {','.join(principals)} map to more than one user")
        for principal in principals:
            if principal in table:
                raise ValueError(f"principal {principal!r} is mapped twice")
            table[principal] = mapped[0]
    return table


def parse_group_mapping(mapping: str) -> dict[str, list[str]]:
    """``"*=users;alice,bob=admins"`` → ``{"*": ["users"], "alice": ["admins"], "bob": ["admins"]}``.

    ``*`` stands for every user. A user named in several entries gets every group named.
    Raises ``ValueError`` on a malformed entry.
    """
    table: dict[str, list[str]] = {}
    for users, groups in _entries(mapping):
        for user in users:
            known = table.setdefault(user, [])
            known.extend(g for g in groups if g not in known)
    return table
