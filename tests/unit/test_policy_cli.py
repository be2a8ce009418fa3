"""``hms-gateway policy check`` on a temporary gateway file, topology and policy file."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.cli import main

POLICIES = """
policies:
  - id: 21
    name: analysts read sales
    resources: {database: [sales], table: ["*"], column: ["*"]}
    allow: [{groups: [analysts], accesses: [select]}]
  - id: 22
    name: no payroll
    resources: {database: [sales], table: [payroll], column: ["*"]}
    deny: [{groups: [public], accesses: [all]}]
"""


def setup(tmp: Path, services: str) -> Path:
    (tmp / "topologies").mkdir()
    (tmp / "users").write_text("")
    (tmp / "policies").mkdir()  # not in topologies_dir: every *.yaml there is a topology
    (tmp / "policies" / "catalog.yaml").write_text(POLICIES)
    (tmp / "topologies" / "default.yaml").write_text(
        "providers: {authentication: [{type: htpasswd, users_file: ../users}]}\nservices:\n" + services
    )
    gateway = tmp / "gateway.yaml"
    gateway.write_text("tls: {certificate: c.pem, private_key: k.pem}\ntopologies_dir: topologies\n")
    return gateway


ONE = """
  - path: hms
    upstream: {urls: ["thrift://hms:9083"]}
    policy_file: ../policies/catalog.yaml
  - path: open
    upstream: {urls: ["thrift://hms:9083"]}
"""


def check(gateway: Path, *args: str) -> list[str]:
    return ["policy", "check", "--config", str(gateway), "--topology", "default", *args]


@pytest.mark.parametrize("args,code,line", [
    (["--user", "bea", "--groups", "staff,analysts", "--database", "sales", "--table", "orders",
      "--column", "id", "--access", "select"], 0, "allowed policy=21 (analysts read sales)"),
    (["--user", "bea", "--groups", "analysts", "--database", "sales", "--table", "payroll",
      "--access", "select"], 1, "denied policy=22 (no payroll)"),
    (["--user", "zed", "--database", "sales", "--access", "select"], 1, "denied policy=-1"),
    (["--user", "bea", "--groups", "analysts", "--database", "SALES"], 0, "allowed policy=21 (analysts read sales)"),
    (["--user", "bea", "--groups", "analysts", "--database", "sales", "--service", "/hms/", "--table", "x"], 0,
     "allowed policy=21 (analysts read sales)"),
])
def test_policy_check_prints_the_decision_and_policy(tmp_path: Path, capsys, args, code, line):
    gateway = setup(tmp_path, ONE)
    assert main(check(gateway, *args)) == code
    assert capsys.readouterr().out.strip() == line


def test_policy_check_refusals(tmp_path: Path, capsys):
    gateway = setup(tmp_path, ONE + ONE.replace("path: hms", "path: hms2").replace("path: open", "path: open2"))
    assert main(check(gateway, "--user", "bea", "--database", "sales")) == 2
    assert "several services have a policy_file" in capsys.readouterr().err
    assert main(check(gateway, "--user", "bea", "--database", "sales", "--service", "open")) == 2
    assert "--service: no service 'open' with a policy_file (there are: hms, hms2)" in capsys.readouterr().err
    assert main(check(gateway, "--service", "hms2", "--user", "bea", "--database", "sales", "--access", "delete")) == 2
    assert "unknown access type" in capsys.readouterr().err
    argv = check(gateway, "--service", "hms", "--user", "u", "--database", "d")
    argv[argv.index("default")] = "nope"
    assert main(argv) == 2
    assert "no topology 'nope'" in capsys.readouterr().err
    (tmp_path / "policies" / "catalog.yaml").write_text("policies: [{id: x}]")
    assert main(check(gateway, "--service", "hms", "--user", "u", "--database", "d")) == 2
    err = capsys.readouterr().err
    assert "catalog.yaml: policies[0].id:" in err


def test_policy_check_applies_the_topologys_identity_assertion(tmp_path: Path, capsys):
    """As the running gateway: principal mapping first, then the group mapping of the mapped user."""
    gateway = setup(tmp_path, ONE)
    topology = tmp_path / "topologies" / "default.yaml"
    topology.write_text(topology.read_text().replace(
        "providers: {", 'providers: {identity_assertion: {principal_mapping: "bea@EXAMPLE.COM=bea", '
                        'group_mapping: "bea=analysts"}, '))
    argv = check(gateway, "--user", "bea@EXAMPLE.COM", "--database", "sales", "--access", "select")
    assert main(argv) == 0
    assert capsys.readouterr().out.strip() == "allowed policy=21 (analysts read sales)"


def test_policy_check_finds_the_topology_with_a_policy(tmp_path: Path, capsys):
    gateway = setup(tmp_path, ONE)
    (tmp_path / "topologies" / "other.yml").write_text(
        "providers: {authentication: [{type: htpasswd, users_file: ../users}]}\n"
        "services: [{path: x, upstream: {urls: ['thrift://hms:9083']}}]\n")
    argv = ["policy", "check", "--config", str(gateway), "--user", "bea", "--groups", "analysts",
            "--database", "sales"]
    assert main(argv) == 0
    assert capsys.readouterr().out.strip() == "allowed policy=21 (analysts read sales)"


REPO = Path(__file__).resolve().parents[2]


def test_policy_check_on_the_shipped_config_says_no_policy_applies(capsys):
    """config/ ships no policy_file: the answer says so, not '--service' that nobody gave."""
    config = str(REPO / "config" / "gateway.yaml")
    assert main(["policy", "check", "--config", config, "--user", "alice", "--database", "sales"]) == 2
    err = capsys.readouterr().err
    assert "--topology: no topology has a service with a policy_file" in err
    argv = ["policy", "check", "--config", config, "--topology", "default", "--user", "alice",
            "--database", "sales"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "default.yaml: services: no service of this topology has a policy_file" in err
    assert "--service" not in err


RESTRICTED = POLICIES + """
  - id: 23
    name: analysts see EU orders
    resources: {database: [sales], table: [orders]}
    row_filter: [{users: [boss], filter: ""}, {groups: [analysts], filter: "region = 'EU'"}]
  - id: 24
    name: card numbers masked
    resources: {database: [sales], table: [orders], column: [card]}
    data_mask: [{groups: [analysts], mask: MASK_SHOW_LAST_4}]
"""


@pytest.mark.parametrize("args,lines", [
    (["--user", "bea", "--groups", "analysts", "--database", "sales", "--table", "orders", "--column", "card",
      "--access", "select"],
     ["allowed policy=21 (analysts read sales)",
      "row-filter policy=23 (analysts see EU orders): region = 'EU'",
      "mask policy=24 (card numbers masked): MASK_SHOW_LAST_4 -> mask_show_last_n(card, 4, 'x', 'x', 'x', -1, '1')"]),
    (["--user", "boss", "--groups", "analysts", "--database", "sales", "--table", "orders", "--access", "select"],
     ["allowed policy=21 (analysts read sales)", "row-filter policy=23 (analysts see EU orders): none (exempt)"]),
    (["--user", "bea", "--groups", "analysts", "--database", "sales", "--table", "items", "--access", "select"],
     ["allowed policy=21 (analysts read sales)"]),
])
def test_check_shows_the_row_filter_and_mask_with_their_policy_ids(tmp_path: Path, capsys, args, lines):
    gateway = setup(tmp_path, ONE)
    (tmp_path / "policies" / "catalog.yaml").write_text(RESTRICTED)
    assert main(check(gateway, *args)) == 0
    assert capsys.readouterr().out.splitlines() == lines


def _metadata(tmp: Path, *columns: tuple[str, object]) -> Path:
    """An Iceberg table metadata file of ``sales.orders`` with optional ``columns`` (name, type)."""
    from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
    from pyiceberg.schema import Schema
    from pyiceberg.table.metadata import new_table_metadata
    from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
    from pyiceberg.types import NestedField

    schema = Schema(*(NestedField(i, name, kind, required=False) for i, (name, kind) in enumerate(columns, 1)))
    metadata = new_table_metadata(schema, UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, "file:///w/sales/orders")
    path = tmp / "00001.metadata.json"
    path.write_text(metadata.model_dump_json())
    return path


def test_check_with_a_schema_prints_the_read_restrictions_a_load_carries(tmp_path: Path, capsys):
    """Issue 49: ``--schema`` (the table's metadata file) prints the spec's ``read-restrictions``
    of a trusted engine's load for the user, checked against the vendored spec; ``none`` when
    nothing restricts; ``refused`` (exit 1) when a policy cannot be stated; 2 for a file that
    is no table metadata."""
    import json

    from pyiceberg.types import LongType, StringType

    from tests.support.iceberg.spec import check_read_restrictions

    gateway = setup(tmp_path, ONE)
    (tmp_path / "policies" / "catalog.yaml").write_text(RESTRICTED)
    schema = _metadata(tmp_path, ("id", LongType()), ("region", StringType()), ("card", StringType()))
    ask = ["--user", "bea", "--groups", "analysts", "--database", "sales", "--table", "orders", "--access", "select",
           "--schema", str(schema)]
    assert main(check(gateway, *ask)) == 0
    *_, last = capsys.readouterr().out.splitlines()
    assert last.startswith("read-restrictions: ")
    stated = json.loads(last.removeprefix("read-restrictions: "))
    region = {"type": "reference", "id": 2}
    assert stated == {"required-row-filter": {"type": "and", "left": {"type": "not-null", "child": region}, "right": {
        "type": "eq", "left": region, "right": {"type": "literal", "value": "EU"}}},
        "required-column-projections": [{"field-id": 3, "action": "show-last-4"}]}
    check_read_restrictions(stated)
    assert main(check(gateway, *ask[:7], "items", *ask[8:])) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "read-restrictions: none"
    no_region = _metadata(tmp_path, ("id", LongType()), ("card", StringType()))
    assert main(check(gateway, *ask[:-1], str(no_region))) == 1
    assert capsys.readouterr().out.splitlines()[-1] == (
        "read-restrictions: refused: policy 23: 'region' cannot be stated as an Iceberg read restriction: the "
        "table's current schema has no such column")
    (tmp_path / "bad.json").write_text("{}")
    assert main(check(gateway, *ask[:-1], str(tmp_path / "bad.json"))) == 2
    assert "not an Iceberg table metadata file" in capsys.readouterr().err
