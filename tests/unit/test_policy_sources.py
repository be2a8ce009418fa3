"""Policy files: Ranger's JSON (Admin export, plugin download) loaded unchanged, the project's
YAML, and configuration errors naming the file, the key and the reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.config import ConfigError, load_topology_file
from gateway.policy import Resource, load_policies, load_policy_file


def ranger_policy(pid, resources, *, items=(), deny=(), service="prod_hive", **extra):
    """A policy as Ranger Admin writes it: every key present, empty lists included."""
    def item(users, groups, accesses):
        return {"accesses": [{"type": a, "isAllowed": True} for a in accesses], "users": users,
                "groups": groups, "roles": [], "conditions": [], "delegateAdmin": False}

    body = {
        "id": pid, "guid": f"guid-{pid}", "isEnabled": True, "version": 2, "service": service,
        "name": f"policy {pid}", "policyType": 0, "policyPriority": 0, "description": "",
        "isAuditEnabled": True,
        "resources": {k: {"values": v, "isExcludes": False, "isRecursive": False} for k, v in resources.items()},
        "conditions": [], "policyItems": [item(*i) for i in items], "denyPolicyItems": [item(*d) for d in deny],
        "allowExceptions": [], "denyExceptions": [], "dataMaskPolicyItems": [], "rowFilterPolicyItems": [],
        "serviceType": "hive", "options": {}, "validitySchedules": [], "policyLabels": [], "zoneName": "",
        "isDenyAllElse": False,
    }
    body.update(extra)
    return body


POLICIES = [
    # resources listed column, database, table: as Ranger's export orders its map
    ranger_policy(11, {"column": ["*"], "database": ["sales"], "table": ["*"]},
                  items=[([], ["analysts"], ["select"]), (["etl"], [], ["all"])]),
    ranger_policy(12, {"database": ["sales"], "table": ["payroll"], "column": ["*"]},
                  deny=[([], ["public"], ["select"])], policyPriority=0),
    ranger_policy(13, {"url": ["s3a://bucket/*"]}, items=[([], ["public"], ["read"])]),
    ranger_policy(14, {"database": ["*"], "udf": ["*"]}, items=[([], ["public"], ["create"])]),
    ranger_policy(15, {"database": ["sales"], "table": ["customers"], "column": ["ssn"]},
                  policyType=1, dataMaskPolicyItems=[{"accesses": [{"type": "select", "isAllowed": True}],
                                                      "users": [], "groups": ["public"],
                                                      "dataMaskInfo": {"dataMaskType": "MASK_HASH"}}]),
    ranger_policy(16, {"database": ["hr"], "table": ["*"]}, items=[([], ["hr"], ["select"])], isEnabled=False),
]

EXPORT = {
    "metaDataInfo": {"Host name": "ranger.example.com", "Exported by": "admin",
                     "Export time": "Mar 1, 2024, 10:00:00 AM", "Ranger apache version": "2.4.0"},
    "policies": POLICIES,
}

DOWNLOAD = {
    "serviceName": "prod_hive", "serviceId": 3, "policyVersion": 42, "policyUpdateTime": 1709287200000,
    "policies": [{k: v for k, v in p.items() if k != "serviceType"} for p in POLICIES],
    "serviceDef": {"name": "hive", "id": 3, "resources": [], "accessTypes": []},
    "auditMode": "audit-default", "serviceConfig": {}, "tagPolicies": None, "policyDeltas": None,
    "securityZones": None,
}


def refused(path: Path, key: str, reason: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_policies(path)
    assert (info.value.file, info.value.key) == (str(path), key)
    assert reason in info.value.reason


def write(path: Path, data) -> Path:
    path.write_text(data if isinstance(data, str) else json.dumps(data, indent=1))
    return path


@pytest.mark.parametrize("shape", [EXPORT, DOWNLOAD], ids=["admin-export", "plugin-download"])
def test_ranger_json_loaded_unchanged(tmp_path: Path, shape):
    path = write(tmp_path / "ranger.json", shape)
    loaded = load_policies(path)
    # 13: a url policy (locations); 15: a data-mask policy (issue 39)
    assert [p.id for p in loaded.policies] == [11, 12, 13, 15, 16]
    assert sorted(loaded.skipped) == [14]
    engine = load_policy_file(path)
    check = lambda user, groups, *r, access="select": (  # noqa: E731
        (d := engine.evaluate(user, groups, Resource(*r), access)).allowed, d.policy_id)
    assert check("ann", ["analysts"], "sales", "orders", "id") == (True, 11)
    assert check("ann", ["analysts"], "sales", "payroll", "amount") == (False, 12)
    assert check("etl", [], "sales", "orders", access="drop") == (True, 11)
    assert check("ann", ["hr"], "hr", "staff") == (False, -1)  # policy 16 is disabled
    assert engine.visible_tables("ann", ["analysts"], "sales", ["orders", "payroll"]) == ["orders"]
    mask = engine.data_mask("ann", ["analysts"], "sales", "customers", "ssn")
    assert (mask.mask_type, mask.policy_id) == ("MASK_HASH", 15)


YAML = """
policies:
  - id: 1
    name: analysts read sales
    resources:
      database: [sales]
      table: ["*"]
      column: {values: [ssn], excludes: true}
    allow: [{groups: [analysts], accesses: [select]}]
    allow_exceptions: [{users: [intern], accesses: [select]}]
  - id: 2
    name: nobody drops
    priority: override
    resources: {database: ["*"], table: ["*"]}
    deny: [{groups: [public], accesses: [drop]}]
    deny_exceptions: [{users: [dba], accesses: [drop]}]
  - id: 3
    resources: {database: [sales], table: ["*"]}
    allow: [{users: [dba, ann], accesses: [all]}]
  - id: 4
    enabled: false
    deny_all_else: true
    resources: {database: [sales]}
"""


def test_yaml_policies(tmp_path: Path):
    engine = load_policy_file(write(tmp_path / "policies.yaml", YAML))
    d = engine.evaluate("bea", ["analysts"], Resource("Sales", "orders", "amount"), "select")
    assert (d.allowed, d.policy_id, d.policy_name) == (True, 1, "analysts read sales")
    assert not engine.evaluate("bea", ["analysts"], Resource("sales", "orders", "ssn"), "select").allowed
    assert not engine.evaluate("intern", ["analysts"], Resource("sales", "orders", "amount"), "select").allowed
    d = engine.evaluate("ann", [], Resource("sales", "orders"), "drop")
    assert (d.allowed, d.policy_id) == (False, 2)
    d = engine.evaluate("dba", [], Resource("sales", "orders"), "drop")
    assert (d.allowed, d.policy_id) == (True, 3)
    assert engine.visible("bea", ["analysts"], "sales") and not engine.visible("zed", [], "sales")


@pytest.mark.parametrize("text,key,reason", [
    ("policies: [{id: 1, resources: {database: [d]}, allow: [{users: [a], accesses: [delete]}]}]",
     "policies[0].allow[0].accesses", "unknown access type 'delete'"),
    ("policies: [{id: 1, resources: {table: [t]}}]", "policies[0].resources", "names database (or url)"),
    ("policies: [{id: 1, resources: {database: [d], column: [c]}}]", "policies[0].resources", "column needs table"),
    ("policies: [{id: 1, resources: {database: [d]}}, {id: 1, resources: {database: [e]}}]",
     "policies", "policy id 1 is used twice"),
    ("policies: [{id: 1, resources: {database: [d]}, allow: [{accesses: [select]}]}]",
     "policies[0].allow[0]", "names no users and no groups"),
    ("policies: [{id: 1, priority: high, resources: {database: [d]}}]", "policies[0].priority", "'normal' or 'override'"),
])
def test_yaml_errors_name_file_key_and_reason(tmp_path: Path, text, key, reason):
    refused(write(tmp_path / "p.yaml", text), key, reason)


def _with(**change):
    return {"policies": [ranger_policy(7, {"database": ["d"], "table": ["*"]}, items=[(["a"], [], ["select"])], **change)]}


@pytest.mark.parametrize("data,key,reason", [
    ("{not json", "", "not valid JSON"),
    ([1], "policies[0]", "valid dictionary"),
    (_with(policyItems=[{"accesses": [{"type": "delete"}], "users": ["a"]}]),
     "policies[0].policyItems[0].accesses", "unknown access type 'delete'"),
    (_with(policyItems=[{"accesses": [{"type": "select"}], "roles": ["r1"]}]),
     "policies[0].policyItems[0].roles", "roles are not supported"),
    (_with(conditions=[{"type": "ip-range", "values": ["10.0.0.0/8"]}]), "policies[0].conditions", "not supported"),
    (_with(validitySchedules=[{"startTime": "2024/01/01 00:00:00"}]), "policies[0].validitySchedules", "not supported"),
    ({"serviceName": "s", "policyDeltas": [{"changeType": 1}]}, "policyDeltas", "not supported"),
    ({"serviceDef": {"name": "hdfs"}, "policies": []}, "serviceDef.name", "only Hive"),
    ({"policies": [ranger_policy(1, {"database": ["a"]}), ranger_policy(2, {"database": ["b"]}, service="other")]},
     "policies", "several services"),
])
def test_ranger_json_errors_name_file_key_and_reason(tmp_path: Path, data, key, reason):
    refused(write(tmp_path / "r.json", data), key, reason)


def test_topology_policy_file_resolved_and_checked(tmp_path: Path):
    (tmp_path / "users").write_text("")
    (tmp_path / "t").mkdir()
    write(tmp_path / "t" / "policies.yaml", YAML)
    topology = tmp_path / "t" / "default.yaml"
    body = """
providers: {authentication: [{type: htpasswd, users_file: ../users}]}
services:
  - path: hms
    upstream: {urls: ["thrift://hms:9083"]}
    policy_file: %s
"""
    write(topology, body % "policies.yaml")
    assert load_topology_file(topology).services[0].policy_file == tmp_path / "t" / "policies.yaml"
    write(topology, body % "missing.yaml")
    with pytest.raises(ConfigError) as info:
        load_topology_file(topology)
    assert (info.value.file, info.value.key) == (str(topology), "services[0].policy_file")
    assert "no such file" in info.value.reason
