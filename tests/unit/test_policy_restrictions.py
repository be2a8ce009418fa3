"""Row-filter and data-mask policies: Apache Ranger's own policy-engine cases for Hive masks and
row filters (vendored in tests/support/ranger/, see its README), run through the gateway's one
engine, and the rules Ranger's engine and Hive plugin follow that those cases do not cover."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.config import ConfigError
from gateway.policy import load_policy_file
from gateway.policy.engine import DataMaskResult
from gateway.policy.model import HIVE_MASK_TYPES
from gateway.policy.restrictions import mask_expression, table_restrictions

RANGER = Path(__file__).resolve().parents[1] / "support" / "ranger"
MASK_FILTER = RANGER / "test_policyengine_hive_mask_filter.json"


def _ranger_cases(path: Path):
    data = json.loads(path.read_text())
    for case in data["tests"]:
        yield pytest.param(case, id=case["name"][:70])


@pytest.fixture(scope="module")
def ranger_engine():
    return load_policy_file(MASK_FILTER)


def _expected(result: dict, key: str):
    """Ranger's expected result in either of its shapes (``additionalInfo`` since Ranger 2.5)."""
    info = result.get("additionalInfo", result)
    return info.get(key), result["policyId"]


@pytest.mark.parametrize("case", list(_ranger_cases(MASK_FILTER)))
def test_ranger_hive_mask_filter_cases(ranger_engine, case):
    request = case["request"]
    elements = request["resource"]["elements"]
    user, groups = request["user"], request["userGroups"]
    assert request["accessType"] == "select"
    if "dataMaskResult" in case:
        mask_type, policy_id = _expected(case["dataMaskResult"], "maskType")
        got = ranger_engine.data_mask(user, groups, elements["database"], elements["table"], elements["column"])
        assert (got.mask_type, got.policy_id) == (mask_type, policy_id)
    else:
        filter_expr, policy_id = _expected(case["rowFilterResult"], "filterExpr")
        got = ranger_engine.row_filter(user, groups, elements["database"], elements["table"])
        assert (got.filter_expr, got.policy_id) == (filter_expr, policy_id)


def test_ranger_cases_cover_both_kinds():
    data = json.loads(MASK_FILTER.read_text())
    kinds = {("dataMaskResult" in c, "rowFilterResult" in c) for c in data["tests"]}
    assert kinds == {(True, False), (False, True)}


def test_ranger_attribute_macros_are_refused():
    """Ranger expands ``${{USER.dept}}`` from usersync's attributes; the gateway has none, so the
    file is refused naming the policy and the key, not evaluated with the macro unexpanded."""
    path = RANGER / "test_policyengine_hive_mask_filter_with_req_expressions.json"
    with pytest.raises(ConfigError) as err:
        load_policy_file(path)
    assert err.value.key == "policies[1].dataMaskPolicyItems[0].dataMaskInfo.valueExpr"
    assert "policy 101" in err.value.reason and "macros" in err.value.reason


# --- Ranger's rules beyond its cases --------------------------------------------------------


def _write(tmp_path: Path, policies: list[dict], name: str = "p.json", **extra) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"policies": policies, **extra}))
    return path


def mask_policy(pid, items, *, column="ssn", priority=0, enabled=True, table="people"):
    return {"id": pid, "name": f"m{pid}", "policyType": 1, "policyPriority": priority, "isEnabled": enabled,
            "resources": {"database": {"values": ["hr"]}, "table": {"values": [table]},
                          "column": {"values": [column]}},
            "dataMaskPolicyItems": items}


def filter_policy(pid, items, *, priority=0):
    return {"id": pid, "name": f"f{pid}", "policyType": 2, "policyPriority": priority,
            "resources": {"database": {"values": ["hr"]}, "table": {"values": ["people"]}},
            "rowFilterPolicyItems": items}


def mitem(mask, users=(), groups=(), value=None):
    info = {"dataMaskType": mask, **({"valueExpr": value} if value else {})}
    return {"accesses": [{"type": "select", "isAllowed": True}], "users": list(users), "groups": list(groups),
            "dataMaskInfo": info}


def fitem(expr, users=(), groups=()):
    return {"accesses": [{"type": "select", "isAllowed": True}], "users": list(users), "groups": list(groups),
            "rowFilterInfo": {"filterExpr": expr}}


def test_item_order_first_match_wins_and_mask_none_exempts(tmp_path):
    engine = load_policy_file(_write(tmp_path, [mask_policy(5, [
        mitem("MASK_NONE", users=["auditor"]),
        mitem("MASK_HASH", groups=["public"]),
        mitem("MASK_NULL", users=["auditor", "bob"]),
    ])]))
    assert engine.data_mask("auditor", [], "hr", "people", "ssn").mask_type == "MASK_NONE"
    assert not engine.data_mask("auditor", [], "hr", "people", "ssn").masked
    bob = engine.data_mask("bob", ["staff"], "HR", "People", "SSN")  # names match case-insensitively
    assert (bob.mask_type, bob.policy_id, bob.masked) == ("MASK_HASH", 5, True)


def test_priority_then_file_order(tmp_path):
    engine = load_policy_file(_write(tmp_path, [
        mask_policy(1, [mitem("MASK", users=["bob"])]),
        mask_policy(2, [mitem("MASK_NONE", users=["bob"])], priority=1),
        filter_policy(3, [fitem("region = 'EU'", groups=["emea"])]),
        filter_policy(4, [fitem("region = 'US'", groups=["emea"])]),
        filter_policy(6, [fitem("", users=["boss"])], priority=1),
    ]))
    assert engine.data_mask("bob", [], "hr", "people", "ssn").policy_id == 2
    assert engine.row_filter("ann", ["emea"], "hr", "people").filter_expr == "region = 'EU'"
    boss = engine.row_filter("boss", ["emea"], "hr", "people")
    assert (boss.filter_expr, boss.policy_id) == (None, 6)  # an empty filter decides: none


def test_disabled_and_user_macro(tmp_path):
    engine = load_policy_file(_write(tmp_path, [
        mask_policy(1, [mitem("MASK", users=["bob"])], enabled=False),
        mask_policy(2, [mitem("MASK_SHOW_LAST_4", users=["{USER}"])], table="{USER}_notes"),
    ]))
    assert engine.data_mask("bob", [], "hr", "people", "ssn").policy_id == -1
    assert engine.data_mask("bob", [], "hr", "bob_notes", "ssn").mask_type == "MASK_SHOW_LAST_4"
    assert engine.data_mask("bob", [], "hr", "ann_notes", "ssn").policy_id == -1


@pytest.mark.parametrize("policy,key,words", [
    (mask_policy(7, [mitem("SHUFFLE", users=["bob"])]),
     "policies[0].dataMaskPolicyItems[0].dataMaskInfo.dataMaskType", "not a mask type"),
    (mask_policy(7, [mitem("CUSTOM", users=["bob"])]),
     "policies[0].dataMaskPolicyItems[0].dataMaskInfo.valueExpr", "needs valueExpr"),
    (mask_policy(7, [mitem("MASK", users=["bob"])], column="ssn*"),
     "policies[0].resources.column.values", "without wildcards"),
    (mask_policy(7, [{**mitem("MASK", users=["bob"]), "roles": ["r"]}]),
     "policies[0].dataMaskPolicyItems[0].roles", "roles"),
    (mask_policy(7, [{**mitem("MASK", users=["bob"]), "dataMaskInfo": {"dataMaskType": "MASK",
                                                                        "conditionExpr": "x > 1"}}]),
     "policies[0].dataMaskPolicyItems[0].dataMaskInfo.conditionExpr", "conditions"),
    (mask_policy(7, [{**mitem("MASK", users=["bob"]), "accesses": [{"type": "update", "isAllowed": True}]}]),
     "policies[0].dataMaskPolicyItems[0].accesses", "select only"),
    (filter_policy(7, [fitem("dept = '${{USER.dept}}'", users=["bob"])]),
     "policies[0].rowFilterPolicyItems[0].rowFilterInfo.filterExpr", "macros"),
    ({**filter_policy(7, [fitem("x = 1", users=["bob"])]),
      "resources": {"database": {"values": ["hr"]}, "table": {"values": ["people"]}, "column": {"values": ["a"]}}},
     "policies[0].resources", "exactly database and table"),
])
def test_unsupported_mask_and_filter_policies_are_refused(tmp_path, policy, key, words):
    with pytest.raises(ConfigError) as err:
        load_policy_file(_write(tmp_path, [policy]))
    assert err.value.key == key
    assert "policy 7" in err.value.reason and words in err.value.reason


def test_a_disabled_policy_is_not_refused_for_what_is_never_evaluated(tmp_path):
    engine = load_policy_file(_write(tmp_path, [mask_policy(7, [mitem("SHUFFLE", users=["bob"])], enabled=False)]))
    assert engine.data_mask("bob", [], "hr", "people", "ssn").policy_id == -1


def test_service_def_of_the_file_defines_mask_types_and_wildcards(tmp_path):
    service_def = {"name": "hive", "resources": [{"name": "database"}, {"name": "table"}, {"name": "column"}],
                   "dataMaskDef": {"maskTypes": [{"name": "MASK_X", "transformer": "mask_x({col})"}],
                                   "resources": [{"name": "database"}, {"name": "table"}, {"name": "column"}]}}
    engine = load_policy_file(_write(tmp_path, [mask_policy(1, [mitem("MASK_X", users=["bob"])], column="s*")],
                                     serviceDef=service_def))
    got = engine.data_mask("bob", [], "hr", "people", "ssn")
    assert got.mask_type == "MASK_X" and mask_expression(got, "ssn") == "mask_x(ssn)"


def test_yaml_form(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("""
policies:
  - id: 1
    resources: {database: [hr], table: [people], column: [ssn]}
    data_mask:
      - {users: [auditor], mask: MASK_NONE}
      - {groups: [public], mask: CUSTOM, value_expr: "concat('x', substr({col}, -2))"}
  - id: 2
    resources: {database: [hr], table: [people]}
    row_filter:
      - {groups: [emea], filter: "region = 'EU'"}
""")
    engine = load_policy_file(path)
    r = table_restrictions(engine, "ann", ["emea"], "hr", "people", ["name", "ssn"])
    assert r.row_filter == "region = 'EU'" and r.row_filter_policy == 2
    assert r.masks["ssn"].expression == "concat('x', substr(ssn, -2))" and set(r.masks) == {"ssn"}
    assert r.applies and r.policy_ids == (1, 2)
    assert not table_restrictions(engine, "auditor", [], "hr", "people", ["ssn"]).applies


@pytest.mark.parametrize("text,key,words", [
    ("resources: {database: [hr], table: [people], column: [ssn]}\n    data_mask: [{users: [a], mask: NOPE}]",
     "policies[0].data_mask[0].mask", "not a mask type"),
    ("resources: {database: [hr], table: ['*']}\n    row_filter: [{users: [a], filter: 'x = 1'}]",
     "policies[0].resources.table", "without wildcards"),
    ("resources: {database: [hr], table: [t]}\n    row_filter: [{users: [a], filter: 'x = 1'}]\n"
     "    allow: [{users: [a], accesses: [select]}]", "policies[0]", "not several"),
])
def test_yaml_refusals(tmp_path, text, key, words):
    path = tmp_path / "p.yaml"
    path.write_text(f"policies:\n  - id: 9\n    {text}\n")
    with pytest.raises(ConfigError) as err:
        load_policy_file(path)
    assert err.value.key.startswith(key) and words in err.value.reason


@pytest.mark.parametrize("mask,expected", [
    ("MASK", "mask(card)"),
    ("MASK_SHOW_LAST_4", "mask_show_last_n(card, 4, 'x', 'x', 'x', -1, '1')"),
    ("MASK_SHOW_FIRST_4", "mask_show_first_n(card, 4, 'x', 'x', 'x', -1, '1')"),
    ("MASK_HASH", "mask_hash(card)"),
    ("MASK_NULL", "NULL"),
    ("MASK_NONE", "card"),
    ("MASK_DATE_SHOW_YEAR", "mask(card, 'x', 'x', 'x', -1, '1', 1, 0, -1)"),
])
def test_hive_transformers(mask, expected):
    result = DataMaskResult(mask, 1, "p", None, HIVE_MASK_TYPES[mask])
    assert mask_expression(result, "card") == expected


def test_custom_expression_and_column_type():
    custom = DataMaskResult("CUSTOM", 1, "p", "cast(null as {colType}) /* {col} */", HIVE_MASK_TYPES["CUSTOM"])
    assert mask_expression(custom, "c", "int") == "cast(null as int) /* c */"
    assert mask_expression(custom, "c") == "cast(null as string) /* c */"  # the Hive plugin's fallback


def test_restrictions_without_column_names(tmp_path):
    excluded = mask_policy(3, [mitem("MASK", users=["bob"])])
    excluded["resources"]["column"]["isExcludes"] = True
    engine = load_policy_file(_write(tmp_path, [mask_policy(1, [mitem("MASK", users=["bob"])]), excluded]))
    named = table_restrictions(engine, "ann", [], "hr", "people")
    assert not named.applies
    bob = table_restrictions(engine, "bob", [], "hr", "people")
    assert bob.applies and not bob.complete  # a mask on columns named by exclusion: fail closed
    assert table_restrictions(None, "bob", [], "hr", "people").applies is False


def test_policies_found_by_table_and_by_user_macro_keep_their_evaluation_order(tmp_path):
    """The engine looks policies up by their literal table; ``{USER}`` ones are tried for every
    table, merged back in priority and file order."""
    engine = load_policy_file(_write(tmp_path, [
        mask_policy(1, [mitem("MASK_HASH", users=["bob"])], table="{USER}_notes"),
        mask_policy(2, [mitem("MASK", users=["bob"])], table="bob_notes"),
        mask_policy(3, [mitem("MASK_NULL", users=["bob"])], table="bob_notes", column="body", priority=1),
        mask_policy(4, [mitem("MASK_NONE", users=["bob"])], table="{USER}_notes", column="body"),
    ]))
    assert engine.data_mask("bob", [], "hr", "bob_notes", "ssn").policy_id == 1
    assert engine.data_mask("bob", [], "hr", "bob_notes", "body").policy_id == 3
    r = table_restrictions(engine, "bob", [], "hr", "bob_notes", ["ssn", "body", "other"])
    assert {c: m.policy_id for c, m in r.masks.items()} == {"ssn": 1, "body": 3}
