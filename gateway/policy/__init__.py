"""Catalog authorization in Apache Ranger's Hive model: who may see and use which database,
table and column.

``load_policy_file(path)`` reads a policy file (``*.json``: Ranger's export or plugin download,
loaded unchanged; otherwise the project's YAML) into a :class:`PolicyEngine`;
``engine.evaluate(user, groups, Resource(db, table, column), access)`` gives a
:class:`Decision`, ``engine.visible_tables(...)``/``visible_databases(...)`` filter listings.
A service kind asks one :class:`CatalogView` per request (``CatalogView(engine, user, groups)``)
what the user sees: objects, listings, columns, and how much was hidden.
"""

from __future__ import annotations

from pathlib import Path

from gateway.policy.engine import Decision, PolicyEngine, Resource
from gateway.policy.model import ACCESS_TYPES, ALL, ANY_ACCESS, Policy, PolicySet
from gateway.policy.view import CatalogView


def load_policies(path: Path | str) -> PolicySet:
    """The policies of a file: Ranger JSON for ``*.json``, the project's YAML otherwise.

    Raises :class:`gateway.config.ConfigError` naming the file, the key and the reason.
    """
    from gateway.policy.ranger_json import load_ranger_json
    from gateway.policy.yaml_source import load_yaml_policies

    path = Path(path)
    return load_ranger_json(path) if path.suffix.lower() == ".json" else load_yaml_policies(path)


def load_policy_file(path: Path | str) -> PolicyEngine:
    """A ready :class:`PolicyEngine` for a policy file (see :func:`load_policies`); call it
    when a topology is built, so a topology reload reloads its policies."""
    return PolicyEngine(load_policies(path))


__all__ = [
    "ACCESS_TYPES", "ALL", "ANY_ACCESS", "CatalogView", "Decision", "Policy", "PolicyEngine", "PolicySet",
    "Resource", "load_policies", "load_policy_file",
]
