"""Catalog policy on the Thrift API against the real HMS (issue 11, first methods): each user
sees only what a policy grants; a hidden object is answered exactly as HMS answers a missing
one; methods the policy cannot judge are refused (fail closed); nothing refused reaches HMS.Columns: a denied column is gone from tables, partitions, field lists, statistics and Spark's
schema properties; the audit line carries the decision."""

from __future__ import annotations

import base64
import json
import socket

import pytest
from thrift.protocol import TJSONProtocol
from thrift.transport import THttpClient

from gateway.thrift.binary import encode_binary_call
from gateway.thrift.schema import TType, load_schema
from gateway.thrift.translate import binary_reply_to_tjson
from tests.support.big_table import raw_call
from tests.support.gateway import audit_record, htpasswd_provider, metric, post, service, upstream_calls
from tests.support.policy import ANALYSTS, CATALOG_POLICY, POLICY_FILE, POLICY_PATH
from tests.support.thrift_gen import hive_metastore_modules

pytestmark = pytest.mark.integration

PASSWORD = "pw-123456"
METHODS = ["get_all_databases", "get_databases", "get_database", "get_all_tables", "get_tables",
           "get_tables_by_type", "get_table", "get_partition_names", "get_partitions", "get_all_functions",
           "drop_table", "create_database", "get_table_meta", "get_table_objects_by_name", "get_role_names",
           "get_fields", "get_schema", "get_table_column_statistics", "get_table_req", "get_partitions_by_names",
           "alter_table", "get_partition"]


@pytest.fixture(scope="module")
def gateway(hms, module_gateway_factory):
    svc = dict(service([f"thrift://127.0.0.1:{hms.port}"], methods=METHODS), policy_file=POLICY_PATH)
    topology = {"providers": {"authentication": [htpasswd_provider()], "identity_assertion": ANALYSTS},
                "services": [svc]}
    return module_gateway_factory({"default": topology}, {"alice": PASSWORD, "bob": PASSWORD, "carol": PASSWORD},
                                  files={POLICY_FILE: CATALOG_POLICY})


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
    refused = call(gateway, "alice", "get_role_names")
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


def client(gw, user: str, request_id: str = "cols"):
    service_mod, _ = hive_metastore_modules()
    transport = THttpClient.THttpClient(gw.url(), ssl_context=gw.ssl_context())
    token = base64.b64encode(f"{user}:{PASSWORD}".encode()).decode()
    transport.setCustomHeaders({"Authorization": f"Basic {token}", "X-Request-Id": f"{request_id}-{user}"})
    return service_mod.Client(TJSONProtocol.TJSONProtocol(transport))


def test_denied_columns_are_removed(gateway, direct):
    alice, bob = client(gateway, "alice"), client(gateway, "bob")
    full = direct.get_table("sales", "orders")
    assert "customer" in [c.name for c in full.sd.cols] and "customer" in full.parameters["spark.sql.sources.schema"]
    table = alice.get_table("sales", "orders")
    assert [c.name for c in table.sd.cols] == [c.name for c in full.sd.cols if c.name != "customer"]
    schema = json.loads(table.parameters["spark.sql.sources.schema"])  # Spark's schema, rewritten
    assert [f["name"] for f in schema["fields"]] == [c.name for c in table.sd.cols]
    assert all("customer" not in value for value in table.parameters.values())
    assert [c.name for c in alice.get_fields("sales", "orders")] == [c.name for c in table.sd.cols]
    (listed,) = alice.get_table_objects_by_name("sales", ["orders"])
    assert [c.name for c in listed.sd.cols] == [c.name for c in table.sd.cols]
    assert alice.get_table("sales", "customers").sd.cols == direct.get_table("sales", "customers").sd.cols

    # a partitioned table: every partition's storage descriptor loses the column
    assert [c.name for c in bob.get_table("hmshttptestdatabase", "test_table").sd.cols] == ["name"]
    assert [c.name for c in bob.get_schema("hmshttptestdatabase", "test_table")] == ["name", "hair_color"]
    parts = bob.get_partitions("hmshttptestdatabase", "test_table", -1)
    assert len(parts) == 2 and all([c.name for c in p.sd.cols] == ["name"] for p in parts)
    direct_parts = direct.get_partitions("hmshttptestdatabase", "test_table", -1)
    assert all("age" in [c.name for c in p.sd.cols] for p in direct_parts)
    by_names = bob.get_partitions_by_names("hmshttptestdatabase", "test_table", ["hair_color=black"])
    assert [c.name for c in by_names[0].sd.cols] == ["name"]
    # a denied column's statistics are answered as HMS answers a column without statistics
    with pytest.raises(Exception, match="unknown result"):
        bob.get_table_column_statistics("hmshttptestdatabase", "test_table", "age")


def test_alter_table_needs_every_column_and_the_audit_line_tells_the_decision(gateway):
    before = metric(gateway, "hms_gateway_policy_decisions_total", outcome="columns_hidden")
    client(gateway, "alice", "audit").get_table("sales", "orders")
    record = audit_record(gateway, "audit-alice")
    assert (record["policy_decision"], record["policy_access"], record["policy_id"]) == ("allowed", "_any", 1)
    assert record["policy_columns_hidden"] == 1
    assert metric(gateway, "hms_gateway_policy_decisions_total", outcome="columns_hidden") >= before + 1

    listing = call(gateway, "alice", "get_all_databases")
    assert strings(listing) == ["sales"]
    # bob may drop in the spec database but not alter; with a hidden column, no alter either way
    body = '{"1":{"str":"hmshttptestdatabase"},"2":{"str":"test_table"},"3":{"rec":{}}}'
    refused = call(gateway, "bob", "alter_table", body)
    assert "does not have privileges for ALTER on hmshttptestdatabase.test_table" in json.dumps(refused)


def test_a_skewed_table_keeps_its_skew_map_and_loses_denied_columns(gateway, direct, hms):
    """A list-bucketed table (SKEWED BY ... STORED AS DIRECTORIES): SkewedInfo's
    map<list<string>,string> reaches the client whole while the denied column goes.

    No Python client can hold that map (Apache's generated code and thriftpy2 both make a dict
    with list keys), so the TJSON bytes are compared: HMS's own reply, translated, minus the
    denied column, is what carol must get, byte for byte."""
    _, t = hive_metastore_modules()
    location = f"file:{hms.warehouse_dir}/skewdb.db/events"
    direct.create_database(t.Database("skewdb", "list bucketing", f"file:{hms.warehouse_dir}/skewdb.db", {}))
    skew = t.SkewedInfo(["name"], [["a"], ["b"]], {("a",): f"{location}/name=a", ("b",): f"{location}/name=b"})

    def sd(where: str):
        return t.StorageDescriptor(
            cols=[t.FieldSchema("name", "string", None), t.FieldSchema("secret", "string", None)],
            location=where, inputFormat="org.apache.hadoop.mapred.TextInputFormat",
            outputFormat="org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat", compressed=False,
            numBuckets=-1, serdeInfo=t.SerDeInfo(None, "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe", {}),
            bucketCols=[], sortCols=[], parameters={}, skewedInfo=skew, storedAsSubDirectories=True)
    direct.create_table(t.Table(tableName="events", dbName="skewdb", owner="carol", sd=sd(location),
                                partitionKeys=[t.FieldSchema("day", "string", None)], parameters={},
                                tableType="MANAGED_TABLE"))
    assert direct.add_partitions([t.Partition(["d1"], "skewdb", "events", sd=sd(f"{location}/day=d1"),
                                              parameters={})]) == 1

    schema = load_schema()
    denied = b',{"1":{"str":"secret"},"2":{"str":"string"}}'
    db_table = [(1, TType.STRING, "skewdb"), (2, TType.STRING, "events")]
    calls = [
        ("get_table", db_table, '{"1":{"str":"skewdb"},"2":{"str":"events"}}', 1),
        ("get_table_objects_by_name", [(1, TType.STRING, "skewdb"), (2, TType.LIST, ["events"])],
         '{"1":{"str":"skewdb"},"2":{"lst":["str",1,"events"]}}', 1),
        ("get_partitions", db_table + [(3, TType.I16, -1)], '{"1":{"str":"skewdb"},"2":{"str":"events"},"3":{"i16":-1}}', 1),
        ("get_partition", db_table + [(3, TType.LIST, ["d1"])],
         '{"1":{"str":"skewdb"},"2":{"str":"events"},"3":{"lst":["str",1,"d1"]}}', 1),
        ("get_partitions_by_names", db_table + [(3, TType.LIST, ["day=d1"])],
         '{"1":{"str":"skewdb"},"2":{"str":"events"},"3":{"lst":["str",1,"day=d1"]}}', 1),
    ]
    with socket.create_connection((hms.host, hms.port)) as sock:
        for method, fields, args, objects in calls:
            hms_reply = binary_reply_to_tjson(raw_call(sock, encode_binary_call(method, 7, fields)), schema)
            for entry in skew.skewedColValueLocationMaps.items():  # HMS kept the map
                key, value = entry
                assert f'["str",1,"{key[0]}"]:"{value}"'.encode() in hms_reply, (method, hms_reply)
            assert hms_reply.count(denied) == objects, method
            expected = hms_reply.replace(denied, b"").replace(b'["rec",2,{"1":{"str":"name"}', b'["rec",1,{"1":{"str":"name"}')
            status, _, body = post(gateway, f'[1,"{method}",1,7,{args}]', auth=("carol", PASSWORD))
            assert status == 200, (method, body)
            # thriftpy2 writes the IDL default of Table.temporary (optional bool = false), which
            # HMS 2.3 leaves out, on every table it re-encodes
            assert b'"14":{"tf"' not in expected
            assert body.replace(b',"14":{"tf":0}', b"") == expected, method
            assert b"secret" not in body
