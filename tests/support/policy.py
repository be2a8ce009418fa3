"""Catalog policies shared by the integration tests, and where a test gateway keeps its policy file.

A policy's text goes into the gateway's directory with the factory's ``files={POLICY_FILE: text}``;
a service names it with ``"policy_file": POLICY_PATH``.
"""

from __future__ import annotations

from tests.support.gateway import in_workdir

__all__ = ["ANALYSTS", "CATALOG_POLICY", "POLICY_FILE", "POLICY_PATH"]

#: The policy file's name in the gateway's directory.
POLICY_FILE = "catalog.yaml"
#: ``POLICY_FILE`` as a service's ``policy_file`` names it.
POLICY_PATH = in_workdir(POLICY_FILE)

#: ``providers.identity_assertion`` putting alice in group ``analysts`` (of :data:`CATALOG_POLICY`).
ANALYSTS = {"group_mapping": "alice=analysts"}

#: Over the session catalog: analysts read sales without orders.customer; bob reads the spec
#: database (and may drop its tables) without test_table.age; carol reads skewdb without secret.
CATALOG_POLICY = """
policies:
  - id: 1
    name: analysts read sales
    resources: {database: [sales], table: ["*"], column: ["*"]}
    allow: [{groups: [analysts], accesses: [select]}]
  - id: 2
    name: bob reads the spec database and may drop its tables
    resources: {database: [hmshttptestdatabase], table: ["*"], column: ["*"]}
    allow: [{users: [bob], accesses: [select, drop]}]
  - id: 3
    name: analysts do not see who ordered
    resources: {database: [sales], table: [orders], column: [customer]}
    deny: [{groups: [analysts], accesses: [select]}]
  - id: 4
    name: bob does not see ages
    resources: {database: [hmshttptestdatabase], table: [test_table], column: [age]}
    deny: [{users: [bob], accesses: [select]}]
  - id: 5
    name: carol reads the skewed database
    resources: {database: [skewdb], table: ["*"], column: ["*"]}
    allow: [{users: [carol], accesses: [select]}]
  - id: 6
    name: carol does not see secrets
    resources: {database: [skewdb], table: ["*"], column: [secret]}
    deny: [{users: [carol], accesses: [select]}]
"""
