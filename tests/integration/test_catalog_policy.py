"""Catalog policy on the Thrift API against the real HMS (issue 11, first methods): each user
sees only what a policy grants; a hidden object is answered exactly as HMS answers a missing
one; methods the policy cannot judge are refused (fail closed); nothing refused reaches HMS."""

from __future__ import annotations

import json

import pytest

from tests.support.gateway import post, service, start_gateway, upstream_calls

pytestmark = pytest.mark.integration

PASSWORD = "pw-123456"
POLICY = """
policies:
  - id: 1
    name: analysts read sales
    resources: {database: [sales], table: ["*"], column: ["*"]}
    allow: [{groups: [analysts], accesses: [select]}]
  - id: 2
    name: bob reads the spec database and may drop its tables
    resources: {database: [hmshttptestdatabase], table: ["*"], column: ["*"]}
    allow: [{users: [bob], accesses: [select, drop]}]
"""
METHODS = ["get_all_databases", "get_databases", "get_database", "get_all_tables", "get_tables",
           "get_tables_by_type", "get_table", "get_partition_names", "get_partitions", "get_all_functions",
           "drop_table", "create_database", "get_table_meta", "get_table_objects_by_name"]


@pytest.fixture(scope="module")
def gateway(hms, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("gateway-policy")
    (workdir / "catalog.yaml").write_text(POLICY)
    svc = dict(service([f"thrift://127.0.0.1:{hms.port}"], methods=METHODS),
               policy_file=str(workdir / "catalog.yaml"))
    topology = {"providers": {
        "authentication": [{"type": "htpasswd", "realm": "HMS Gateway", "users_file": str(workdir / "users.htpasswd")}],
        "identity_assertion": {"group_mapping": "alice=analysts"},
    }, "services": [svc]}
    gw = start_gateway(workdir, {"default": topology}, {"alice": PASSWORD, "bob": PASSWORD})
    yield gw
    gw.stop()


def call(gw, user: str, method: str, args: str = "{}") -> list:
    status, _, body = post(gw, f'[1,"{method}",1,7,{args}]', auth=(user, PASSWORD))
    assert status == 200, body
    return json.loads(body)


def strings(reply: list) -> list[str]:
    return reply[4]["0"]["lst"][2:]


def test_listings_show_only_what_a_policy_grants(gateway, direct):
    assert "default" in direct.get_all_databases()
    assert strings(call(gateway, "alice", "get_all_databases")) == ["sales"]
    assert strings(call(gateway, "bob", "get_databases", '{"1":{"str":"*"}}')) == ["hmshttptestdatabase"]
    assert strings(call(gateway, "alice", "get_all_tables", '{"1":{"str":"sales"}}')) == direct.get_all_tables("sales")
    assert strings(call(gateway, "bob", "get_all_tables", '{"1":{"str":"sales"}}')) == []
    assert strings(call(gateway, "bob", "get_tables", '{"1":{"str":"hmshttptestdatabase"},"2":{"str":"*"}}')) \
        == direct.get_tables("hmshttptestdatabase", "*")


def test_a_hidden_object_is_answered_as_hms_answers_a_missing_one(gateway, direct):
    hidden_db = call(gateway, "alice", "get_database", '{"1":{"str":"hmshttptestdatabase"}}')
    missing_db = call(gateway, "bob", "get_database", '{"1":{"str":"no_such_db_anywhere"}}')  # HMS's own answer
    assert hidden_db[2] == missing_db[2] == 2
    assert hidden_db[4] == {"1": {"rec": {"1": {"str": "hmshttptestdatabase"}}}}
    assert missing_db[4] == {"1": {"rec": {"1": {"str": "no_such_db_anywhere"}}}}

    args = '{"1":{"str":"hmshttptestdatabase"},"2":{"str":"test_table"}}'
    missing_table = '{"1":{"str":"hmshttptestdatabase"},"2":{"str":"no_such_table"}}'
    assert call(gateway, "alice", "get_table", args)[4] == \
        {"2": {"rec": {"1": {"str": "hmshttptestdatabase.test_table table not found"}}}}
    assert call(gateway, "bob", "get_table", missing_table)[4] == \
        {"2": {"rec": {"1": {"str": "hmshttptestdatabase.no_such_table table not found"}}}}  # HMS's own
    hidden_parts = call(gateway, "alice", "get_partitions", args[:-1] + ',"3":{"i16":-1}}')[4]
    missing_parts = call(gateway, "bob", "get_partitions", missing_table[:-1] + ',"3":{"i16":-1}}')[4]
    (field,) = missing_parts  # the exception field HMS itself uses
    assert hidden_parts == {field: {"rec": {"1": {"str": "hmshttptestdatabase.test_table table not found"}}}}
    assert call(gateway, "bob", "get_table", args)[4]["0"]["rec"]  # bob may see it

    hidden = call(gateway, "alice", "get_partition_names", args[:-1] + ',"3":{"i16":-1}}')
    missing = call(gateway, "bob", "get_partition_names",
                   '{"1":{"str":"hmshttptestdatabase"},"2":{"str":"no_such_table"},"3":{"i16":-1}}')
    assert hidden[2] == missing[2] == 3 and hidden[4] == missing[4]  # HMS's TApplicationException


def test_nothing_refused_reaches_hms_and_unjudged_methods_are_refused(gateway):
    before = upstream_calls(gateway)
    call(gateway, "alice", "get_table", '{"1":{"str":"hmshttptestdatabase"},"2":{"str":"test_table"}}')
    refused = call(gateway, "alice", "get_all_functions")
    assert upstream_calls(gateway) == before
    assert "does not have privileges" in json.dumps(refused)


def test_writes_need_the_matching_access(gateway):
    drop = '{"1":{"str":"hmshttptestdatabase"},"2":{"str":"no_such_table"},"3":{"tf":0}}'
    before = upstream_calls(gateway)
    refused = call(gateway, "alice", "drop_table", drop)
    create = call(gateway, "alice", "create_database", '{"1":{"rec":{"1":{"str":"alice_db"}}}}')
    assert upstream_calls(gateway) == before  # refused writes never reach HMS
    assert refused[4] == {"2": {"rec": {"1": {"str": "User alice does not have privileges for DROP on "
                                                    "hmshttptestdatabase.no_such_table"}}}}
    assert "does not have privileges for CREATE on alice_db" in json.dumps(create)
    # bob may drop there: the call reaches HMS, which answers for the table that is not there
    allowed = call(gateway, "bob", "drop_table", drop)
    assert upstream_calls(gateway) == before + 1
    assert list(allowed[4]) == ["1"]  # HMS's own NoSuchObjectException (field 1)


def test_table_objects_and_metas_are_filtered_too(gateway, direct):
    """HIVE-25680: get_table_meta went unfiltered by HMS's own hook; so did get_table_objects_by_name."""
    metas = call(gateway, "alice", "get_table_meta", '{"1":{"str":"*"},"2":{"str":"*"},"3":{"lst":["str",0]}}')
    listed = metas[4]["0"]["lst"][2:]
    assert listed and all(meta["1"]["str"] == "sales" for meta in listed)
    assert len(listed) == len(direct.get_table_meta("sales", "*", []))
    by_name = '{"1":{"str":"hmshttptestdatabase"},"2":{"lst":["str",1,"test_table"]}}'
    assert call(gateway, "alice", "get_table_objects_by_name", by_name)[4]["0"]["lst"][:2] == ["rec", 0]
    assert call(gateway, "bob", "get_table_objects_by_name", by_name)[4]["0"]["lst"][:2] == ["rec", 1]
