"""HMS Thrift objects in Glue's shapes, checked against botocore's own Glue model (the shapes
boto3 parses), Glue's pagination tokens, Glue's error bodies, and HMS calls built and read
through the IDL."""

from __future__ import annotations

import json
import sys

import pytest
from botocore.loaders import Loader
from botocore.model import ServiceModel
from botocore.parsers import JSONParser
from botocore.validate import ParamValidator

from gateway.glue import shapes
from gateway.glue.errors import EntityNotFound, InvalidInput
from gateway.glue.pagination import max_results, page
from gateway.thrift.objects import decode_args, decode_struct, encode_reply
from gateway.thrift.errors import ProtocolError
from gateway.thrift.schema import load_schema
from gateway.upstream.errors import UpstreamBadReply
from gateway.upstream.metastore import MetastoreClient, NoSuchObjectException, decode_result, encode_call

SCHEMA = load_schema()
#: The thriftpy2 module of the bundled Hive 2.3 IDL (Table, Database, Partition…).
IDL = sys.modules[SCHEMA.methods["get_table"].result_class.thrift_spec[0][2].__module__]
GLUE = ServiceModel(Loader().load_service_model("glue", "service-2"), "glue")


def fields(*pairs: tuple[str, str]) -> list:
    return [IDL.FieldSchema(name=n, type=t, comment=None) for n, t in pairs]


def sample_table(db="sales", name="customers", cols=(("customer", "string"), ("ssn", "string"),
                                                      ("country", "string")), **extra):
    """A Hive table as HMS 2.3 answers for a Spark-made partitioned ORC table."""
    sd = IDL.StorageDescriptor(
        cols=fields(*cols), location=f"file:/warehouse/{db}.db/{name}",
        inputFormat="org.apache.hadoop.hive.ql.io.orc.OrcInputFormat",
        outputFormat="org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat", compressed=False,
        numBuckets=-1, serdeInfo=IDL.SerDeInfo(name=None, serializationLib="org.apache.hadoop.hive.ql.io.orc.OrcSerde",
                                               parameters={"serialization.format": "1"}),
        bucketCols=[], sortCols=[IDL.Order(col="customer", order=1)], parameters={},
        skewedInfo=IDL.SkewedInfo(skewedColNames=["country"], skewedColValues=[["US"], ["F$R"]],
                                  skewedColValueLocationMaps={("US",): "file:/w/us"}),
        storedAsSubDirectories=False)
    values = dict(tableName=name, dbName=db, owner="spark", createTime=1700000000, lastAccessTime=0,
                  retention=0, sd=sd, partitionKeys=fields(("since", "date")),
                  parameters={"comment": "who buys", "spark.sql.sources.provider": "orc"},
                  viewOriginalText=None, viewExpandedText=None, tableType="MANAGED_TABLE")
    values.update(extra)
    return IDL.Table(**values)


def sample_partition(values=("2019-03-01",), db="sales", name="customers"):
    return IDL.Partition(values=list(values), dbName=db, tableName=name, createTime=1700000100,
                         lastAccessTime=0, sd=sample_table(db, name).sd, parameters={"numFiles": "1"})


def valid(shape_name: str, value: dict) -> None:
    """``value`` is a valid instance of Glue's ``shape_name`` (botocore's own validator)."""
    report = ParamValidator().validate(value, GLUE.shape_for(shape_name))
    assert not report.has_errors(), report.generate_report()


def test_table_maps_every_hive_part_into_glue_shapes():
    out = shapes.table(sample_table(), "123456789012", lake_formation=True)
    valid("Table", out)
    assert out["Name"] == "customers" and out["DatabaseName"] == "sales" and out["Owner"] == "spark"
    assert out["CreateTime"] == 1700000000 and "LastAccessTime" not in out  # 0: never
    sd = out["StorageDescriptor"]
    assert [c["Name"] for c in sd["Columns"]] == ["customer", "ssn", "country"]
    assert sd["Columns"][0] == {"Name": "customer", "Type": "string"}
    assert sd["SerdeInfo"] == {"SerializationLibrary": "org.apache.hadoop.hive.ql.io.orc.OrcSerde",
                               "Parameters": {"serialization.format": "1"}}
    assert sd["SortColumns"] == [{"Column": "customer", "SortOrder": 1}]
    assert sd["SkewedInfo"] == {"SkewedColumnNames": ["country"], "SkewedColumnValues": ["2$US", "3$F$R"],
                                "SkewedColumnValueLocationMaps": {"2$US": "file:/w/us"}}
    assert out["PartitionKeys"] == [{"Name": "since", "Type": "date"}]
    assert out["TableType"] == "MANAGED_TABLE" and out["Description"] == "who buys"
    assert out["Parameters"]["spark.sql.sources.provider"] == "orc"
    assert out["IsRegisteredWithLakeFormation"] is True and out["CatalogId"] == "123456789012"


def test_column_filter_keeps_only_the_named_columns_case_insensitively():
    out = shapes.table(sample_table(cols=(("Customer", "string"), ("ssn", "string"))), "c", {"customer"})
    assert [c["Name"] for c in out["StorageDescriptor"]["Columns"]] == ["Customer"]
    assert out["PartitionKeys"] == [{"Name": "since", "Type": "date"}]


def test_views_keep_their_text():
    view = sample_table(name="adults", tableType="VIRTUAL_VIEW", viewOriginalText="SELECT 1",
                        viewExpandedText="SELECT 1 AS `_c0`")
    out = shapes.table(view, "c")
    assert (out["ViewOriginalText"], out["ViewExpandedText"]) == ("SELECT 1", "SELECT 1 AS `_c0`")


def test_database_and_partition_shapes_are_what_boto3_parses():
    database = shapes.database(IDL.Database(name="sales", description="second database",
                                            locationUri="file:/w/sales.db", parameters={}), "c")
    valid("Database", database)
    assert database == {"Name": "sales", "Description": "second database", "LocationUri": "file:/w/sales.db",
                        "Parameters": {}, "CatalogId": "c"}
    partition = shapes.partition(sample_partition(), "c", {"customer"})
    valid("Partition", partition)
    assert partition["Values"] == ["2019-03-01"] and partition["CreationTime"] == 1700000100
    assert [c["Name"] for c in partition["StorageDescriptor"]["Columns"]] == ["customer"]
    assert "Columns" not in shapes.partition(sample_partition(), "c", with_columns=False)["StorageDescriptor"]


def test_boto3s_parser_reads_a_response_body_back():
    body = json.dumps({"Table": shapes.table(sample_table(), "c")}).encode()
    parsed = JSONParser().parse({"status_code": 200, "headers": {}, "body": body},
                                GLUE.operation_model("GetTable").output_shape)
    assert parsed["Table"]["CreateTime"].year == 2023
    assert parsed["Table"]["StorageDescriptor"]["Columns"][1]["Name"] == "ssn"


def test_error_bodies_are_what_boto3_reads_as_error_codes():
    response = EntityNotFound("Table customers not found.").response("req-1")
    assert response.status == 400 and response.content_type == "application/x-amz-json-1.1"
    assert response.headers["x-amzn-RequestId"] == "req-1"
    parsed = JSONParser().parse({"status_code": 400, "headers": {}, "body": response.body}, None)
    assert parsed["Error"] == {"Code": "EntityNotFoundException", "Message": "Table customers not found."}


def test_a_bad_next_token_is_invalid_input():
    """Glue's wording of gateway.paging's refusals (tests/unit/test_paging.py tests the tokens)."""
    with pytest.raises(InvalidInput, match="^Invalid NextToken$"):
        page(["a"], str.lower, operation="GetTables", scope=[], token="%%%", limit=1)
    _, token = page(["a", "b"], str.lower, operation="GetTables", scope=["sales"], token=None, limit=1)
    with pytest.raises(InvalidInput, match="^Invalid NextToken: it belongs to another request$"):
        page(["a", "b"], str.lower, operation="GetTables", scope=["finance"], token=token, limit=1)


@pytest.mark.parametrize("value, ok", [(None, 100), (1, 1), (100, 100), (0, None), (101, None),
                                       ("5", None), (True, None), (2.5, None)])
def test_max_results_is_validated(value, ok):
    if ok is None:
        with pytest.raises(InvalidInput):
            max_results(value, 100)
    else:
        assert max_results(value, 100) == ok


def test_calls_are_built_and_replies_read_through_the_idl():
    call = encode_call(SCHEMA, "get_table", {"dbname": "sales", "tbl_name": "customers"}, 9)
    args = decode_args(call, SCHEMA.methods["get_table"])
    assert (args.dbname, args.tbl_name) == ("sales", "customers")
    result = SCHEMA.methods["get_table"].result_class
    table = sample_table()
    table.sd.skewedInfo = None  # see the next test
    reply = encode_reply("get_table", 9, result(success=table))
    assert decode_result(SCHEMA, "get_table", reply).tableName == "customers"
    missing = encode_reply("get_table", 9, result(o2=IDL.NoSuchObjectException(message="sales.x table not found")))
    with pytest.raises(NoSuchObjectException) as caught:
        decode_result(SCHEMA, "get_table", missing)
    assert caught.value.message == "sales.x table not found"
    with pytest.raises(UpstreamBadReply):
        decode_result(SCHEMA, "get_table", b"\x80\x01\x00\x02garbage")


async def test_a_list_bucketed_table_decodes_without_its_location_map():
    """thriftpy2 cannot decode map<list<string>,string> (list keys are unhashable): the IDL's
    own classes fail, the metastore client falls back to a copy that skips that map."""
    result = SCHEMA.methods["get_table"].result_class
    reply = encode_reply("get_table", 9, result(success=sample_table()))
    with pytest.raises(ProtocolError):
        decode_struct(reply, result)

    class Upstream:
        async def call(self, message, **_):
            return reply

    table = await MetastoreClient(Upstream(), SCHEMA).call("get_table", dbname="sales", tbl_name="customers")
    assert table.sd.skewedInfo.skewedColValues == [["US"], ["F$R"]]
    assert table.sd.skewedInfo.skewedColValueLocationMaps == {}
    assert shapes.table(table, "c")["StorageDescriptor"]["SkewedInfo"]["SkewedColumnValueLocationMaps"] == {}
