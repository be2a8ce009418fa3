"""Ranger Hive's ``url`` resource in the one policy evaluator: loaded from Ranger JSON and the
project's YAML, matched as Ranger's URL matcher does (wildcards, ``isRecursive``,
case-sensitive), decided as every other policy (priority, deny before allow, no verdict is a
denial), and never confused with database policies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.config import ConfigError
from gateway.policy import CatalogView, Resource, load_policies, load_policy_file
from gateway.policy.urls import UrlMatcher, normal_url


def _ranger(policy_id, resources, items, deny=(), priority=0):
    def item(users, accesses):
        return {"users": list(users), "groups": [], "accesses": [{"type": a, "isAllowed": True} for a in accesses]}
    return {"id": policy_id, "name": f"p{policy_id}", "isEnabled": True, "policyType": 0, "policyPriority": priority,
            "resources": resources, "policyItems": [item(*i) for i in items],
            "denyPolicyItems": [item(*i) for i in deny]}


POLICIES = {"policies": [
    _ranger(1, {"database": {"values": ["*"]}}, [(["alice", "bob"], ["all"])]),
    _ranger(2, {"url": {"values": ["s3a://lake/sec_a"], "isRecursive": True}}, [(["alice"], ["read", "write"])]),
    _ranger(3, {"url": {"values": ["file:///wh/shared/*.json"]}}, [(["bob"], ["read"])]),
    _ranger(4, {"url": {"values": ["s3://lake/sec_a/locked"], "isRecursive": True}}, [], deny=[(["alice"], ["write"])]),
]}


@pytest.fixture
def engine(tmp_path: Path):
    path = tmp_path / "ranger.json"
    path.write_text(json.dumps(POLICIES))
    return load_policy_file(path)


@pytest.mark.parametrize("user, url, access, allowed", [
    ("alice", "s3://lake/sec_a", "write", True),
    ("alice", "s3a://lake/sec_a/t/data", "read", True),
    ("alice", "s3://lake/sec_a/", "write", True),
    ("alice", "s3://lake/sec_ab", "write", False),          # a segment boundary
    ("alice", "s3://lake/SEC_A", "write", False),           # case-sensitive
    ("alice", "s3://lake/sec_a/locked/x", "write", False),  # deny beats allow
    ("alice", "s3://lake/sec_a/locked/x", "read", True),
    ("bob", "s3://lake/sec_a", "read", False),
    ("bob", "file:/wh/shared/m.json", "read", True),
    ("bob", "/wh/shared/m.json", "read", True),
    ("bob", "/wh/shared/m.json", "write", False),
    ("bob", "/wh/shared", "read", False),                   # not recursive, and not what the value names
])
def test_url_decisions(engine, user, url, access, allowed):
    assert engine.evaluate_url(user, [], url, access).allowed is allowed


def test_url_policies_do_not_touch_database_decisions(engine):
    assert engine.evaluate("alice", [], Resource("sec_a"), "create").allowed
    assert engine.evaluate_url("alice", [], "s3://elsewhere/x", "read").policy_id == -1
    assert len(engine) == 4
    view = CatalogView(engine, "alice")
    assert view.may_url("write", "s3://lake/sec_a/t") and not view.may_url("write", "s3://lake/other")
    assert CatalogView(None, "anyone").may_url("write", "s3://anywhere")


def test_yaml_url_policies(tmp_path: Path):
    path = tmp_path / "catalog.yaml"
    path.write_text("""
policies:
  - id: 1
    name: etl places tables
    resources: {url: {values: ["s3://lake/etl"], recursive: true}}
    allow: [{users: [etl], accesses: [read, write]}]
""")
    engine = load_policy_file(path)
    assert engine.evaluate_url("etl", [], "s3://lake/etl/t", "write").allowed
    assert not engine.evaluate_url("etl", [], "s3://lake/etl2", "write").allowed
    path.write_text("""
policies:
  - id: 1
    resources: {database: [x], url: ["s3://lake"]}
    allow: [{users: [etl], accesses: [read]}]
""")
    with pytest.raises(ConfigError, match="url stands alone"):
        load_policies(path)


def test_ranger_url_with_excludes_is_refused(tmp_path: Path):
    path = tmp_path / "ranger.json"
    path.write_text(json.dumps({"policies": [_ranger(1, {"url": {"values": ["s3://x"], "isExcludes": True}},
                                                     [(["a"], ["read"])])]}))
    with pytest.raises(ConfigError, match="excludes"):
        load_policies(path)


def test_normal_form_and_wildcards():
    assert normal_url("/x/") == normal_url("file:/x") == normal_url("FILE:///x") == "file:///x"
    assert normal_url("file:///") == "file:///"
    assert UrlMatcher(("/",), recursive=True).match("file:///anything/below")
    assert UrlMatcher(("s3://b/*/t",), recursive=False).match("s3://b/ns/t")
    assert not UrlMatcher(("s3://b/?/t",), recursive=False).match("s3://b/ns/t")
    assert UrlMatcher(("s3://b/x/*",), recursive=True).match("s3://b/x")
