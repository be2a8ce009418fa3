"""Service kind ``explorer`` (gateway/explorer/kind.py) with a fake step chain: what it
serves, its headers, 405/404, no path traversal, authentication before anything, options.
The browser side is tested in tests/integration/test_explorer.py and test_explorer_tjson.py."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from aiohttp.test_utils import make_mocked_request

from gateway.config import ConfigError, ServiceConfig
from gateway.explorer import METHODS, load_assets
from gateway.pipeline.outcomes import MethodNotAllowed, NotFound, Unauthenticated
from gateway.services import service_kind
from gateway.services.base import ServiceContext, validate_options
from gateway.explorer.kind import ExplorerOptions, ExplorerService
from gateway.thrift.schema import load_schema

SPARK_JS = Path(__file__).resolve().parents[2] / "gateway" / "explorer" / "static" / "spark.js"


class FakeChain:
    def __init__(self, refuse: bool = False):
        self.refuse, self.seen = refuse, []

    async def on_request(self, exchange) -> None:
        self.seen.append(exchange.request.path_qs)
        if self.refuse:
            raise Unauthenticated("no credentials", [("WWW-Authenticate", 'Basic realm="HMS Gateway"')])


def _siblings(methods=METHODS) -> dict[str, ServiceConfig]:
    return {
        "hmshttpthrift/api/hms": ServiceConfig(path="hmshttpthrift/api/hms", options={"methods": list(methods)}),
        "events": ServiceConfig(kind="event-stream", path="events"),
        "iceberg": ServiceConfig(kind="iceberg-rest", path="iceberg"),
    }


def _service(chain=None, topology="sandbox", siblings=None, **options) -> ExplorerService:
    siblings = _siblings() if siblings is None else siblings
    options = {"thrift_service": "hmshttpthrift/api/hms", **options}
    config = ServiceConfig(kind="explorer", path="explorer", options=options)
    ctx = ServiceContext(topology, config, load_schema(), None, ExplorerOptions.model_validate(options),
                         chain=chain or FakeChain(), source="topologies/sandbox.yaml",
                         index=1, siblings=siblings,
                         sibling_options={p: service_kind(s.kind).Options.model_validate(s.options)
                                          for p, s in siblings.items()})
    return ExplorerService.build(ctx)


@pytest.mark.parametrize("siblings, options, key, reason", [
    ({}, {}, "thrift_service", "no hms-thrift service 'hmshttpthrift/api/hms'"),
    (_siblings(METHODS[:-1]), {}, "thrift_service", f"does not expose {METHODS[-1]}"),
    (_siblings(), {"events_service": "feed"}, "events_service", "no event-stream service 'feed'"),
    (_siblings(), {"events_service": "hmshttpthrift/api/hms"}, "events_service", "no event-stream service"),
    (_siblings(), {"iceberg_service": "events"}, "iceberg_service", "no iceberg-rest service 'events'"),
])
def test_services_the_page_calls_are_checked_at_start_up(siblings, options, key, reason):
    with pytest.raises(ConfigError) as caught:
        _service(siblings=siblings, **options)
    assert caught.value.key == f"services[1].options.{key}"
    assert reason in caught.value.reason and caught.value.file == "topologies/sandbox.yaml"


async def _get(service, target: str, method: str = "GET"):
    exchange = SimpleNamespace(request=make_mocked_request(method, target))
    return await service.handle(exchange)


async def test_the_page_names_the_thrift_service_and_sends_the_security_headers():
    response, outcome = await _get(_service(page_size=50), "/gateway/sandbox/explorer")
    page = response.body.decode()
    assert outcome == "ok" and response.content_type == "text/html"
    assert '<meta name="hms-thrift-url" content="/gateway/sandbox/hmshttpthrift/api/hms">' in page
    assert '<meta name="hms-page-size" content="50">' in page
    csp = response.headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "connect-src 'self'" in csp and "default-src 'none'" in csp
    assert "unsafe-inline" not in csp and "http" not in csp
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["Referrer-Policy"] == "no-referrer"
    assert "<script>" not in page and " on" not in page.replace(" one", "")  # no inline script


async def test_the_live_panel_follows_the_events_service_only_when_configured():
    response, _ = await _get(_service(events_service="events"), "/gateway/sandbox/explorer")
    assert '<meta name="hms-events-url" content="/gateway/sandbox/events">' in response.body.decode()
    response, _ = await _get(_service(), "/gateway/sandbox/explorer")
    assert '<meta name="hms-events-url" content="">' in response.body.decode()


async def test_iceberg_tables_are_loaded_through_the_iceberg_service_only_when_configured():
    response, _ = await _get(_service(iceberg_service="iceberg"), "/gateway/sandbox/explorer")
    assert '<meta name="hms-iceberg-url" content="/gateway/sandbox/iceberg">' in response.body.decode()
    response, _ = await _get(_service(), "/gateway/sandbox/explorer")
    assert '<meta name="hms-iceberg-url" content="">' in response.body.decode()


async def test_every_static_file_is_served_with_its_type_and_nothing_from_elsewhere():
    service = _service()
    for name, expected in [("app.js", "text/javascript"), ("tjson.js", "text/javascript"),
                           ("spark.js", "text/javascript"), ("iceberg.js", "text/javascript"), ("explorer.css", "text/css")]:
        response, _ = await _get(service, f"/gateway/sandbox/explorer?asset={name}")
        assert response.content_type == expected
        assert response.body == load_assets()[name].body
        assert b"http://" not in response.body and b"https://" not in response.body  # no CDN
    response, _ = await _get(service, "/gateway/sandbox/explorer?asset=schema.json")
    assert set(json.loads(response.body)["methods"]) == set(METHODS)


@pytest.mark.parametrize("name", [
    "../app.js", "..%2Fapp.js", "%2e%2e/app.js", "static/app.js", "/etc/passwd", "../../../../etc/passwd",
    "app.js/", "APP.JS", "app.js%00", "__init__.py", "", ".", "..", "static",
])
async def test_unknown_asset_names_are_404_and_never_reach_the_filesystem(name):
    with pytest.raises(NotFound):
        await _get(_service(), f"/gateway/sandbox/explorer?asset={name}")


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"])
async def test_only_get_is_allowed(method):
    chain = FakeChain()
    with pytest.raises(MethodNotAllowed) as caught:
        await _get(_service(chain), "/gateway/sandbox/explorer", method)
    assert dict(caught.value.headers)["Allow"] == "GET"
    assert chain.seen == []


async def test_authentication_comes_first_even_for_unknown_assets():
    chain = FakeChain(refuse=True)
    service = _service(chain)
    for target in ["/gateway/sandbox/explorer", "/gateway/sandbox/explorer?asset=app.js",
                   "/gateway/sandbox/explorer?asset=../../etc/passwd"]:
        with pytest.raises(Unauthenticated):
            await _get(service, target)
    assert len(chain.seen) == 3


@pytest.mark.parametrize("options, key", [
    ({}, "thrift_service"),
    ({"thrift_service": "../hmshttpthrift"}, "thrift_service"),
    ({"thrift_service": "a//b"}, "thrift_service"),
    ({"thrift_service": "a/./b"}, "thrift_service"),
    ({"thrift_service": 'x"><script>'}, "thrift_service"),
    ({"thrift_service": "hms", "page_size": 5}, "page_size"),
    ({"thrift_service": "hms", "events_service": "../events"}, "events_service"),
    ({"thrift_service": "hms", "colour": "red"}, "colour"),
])
def test_bad_options_name_the_file_and_key(options, key):
    with pytest.raises(ConfigError) as caught:
        validate_options(ExplorerOptions, "topologies/sandbox.yaml", 1, "explorer", options)
    assert f"services[1].options.{key}" in str(caught.value) or "services[1].options" in str(caught.value)
    assert "sandbox.yaml" in str(caught.value)


def test_spark_restoration_follows_hive_external_catalog(tmp_path):
    # A non-Hive-compatible data source table: HMS holds `col array<string>`; the schema, its
    # partition column (moved last), bucketing, location ("path") and statistics are properties.
    schema = json.dumps({"type": "struct", "fields": [
        {"name": "dt", "type": "string", "nullable": True, "metadata": {}},
        {"name": "id", "type": "long", "nullable": False, "metadata": {"comment": "the <id>"}},
        {"name": "tags", "type": {"type": "array", "elementType": "string", "containsNull": True},
         "nullable": True, "metadata": {}},
        {"name": "code", "type": "string", "nullable": True, "metadata": {"__CHAR_VARCHAR_TYPE_STRING": "varchar(8)"}},
        {"name": "price", "type": "decimal(10,2)", "nullable": True, "metadata": {}},
    ]})
    props = {
        "spark.sql.sources.provider": "json",
        "spark.sql.sources.schema.numParts": "3",
        "spark.sql.sources.schema.part.0": schema[:40], "spark.sql.sources.schema.part.1": schema[40:90],
        "spark.sql.sources.schema.part.2": schema[90:],
        "spark.sql.sources.schema.numPartCols": "1", "spark.sql.sources.schema.partCol.0": "dt",
        "spark.sql.sources.schema.numBuckets": "4", "spark.sql.sources.schema.numBucketCols": "1",
        "spark.sql.sources.schema.bucketCol.0": "id", "spark.sql.sources.schema.numSortCols": "0",
        "spark.sql.statistics.totalSize": "1234", "spark.sql.statistics.numRows": "10",
        "spark.sql.statistics.colStats.id.version": "2", "spark.sql.statistics.colStats.id.min": "1",
        "spark.sql.statistics.colStats.id.max": "99", "spark.sql.create.version": "3.5.1", "owner_team": "x",
    }
    script = tmp_path / "restore.js"
    script.write_text(
        f"const S = require({json.dumps(str(SPARK_JS))});\n"
        f"const props = new Map(Object.entries({json.dumps(props)}));\n"
        "const table = { tableType: 'EXTERNAL_TABLE', parameters: props,\n"
        "  sd: { cols: [{ name: 'col', type: 'array<string>', comment: 'from deserializer' }], location: 'file:/w/t-__PLACEHOLDER__',\n"
        "        serdeInfo: { parameters: new Map([['PATH', 'file:/data/t']]) } }, partitionKeys: [] };\n"
        "const r = S.restore(table);\n"
        "const broken = new Map(props); broken.delete('spark.sql.sources.schema.part.1');\n"
        "let error = null; try { S.restore({ ...table, parameters: broken }); } catch (e) { error = e.constructor.name + ': ' + e.message; }\n"
        "console.log(JSON.stringify({ ...r, properties: [...r.properties], stats: { ...r.stats, colStats: [...r.stats.colStats].map(([k, v]) => [k, [...v]]) }, error }));\n"
    )
    out = json.loads(subprocess.run(["node", str(script)], capture_output=True, text=True, check=True, timeout=60).stdout)
    assert out["dataSource"] and out["restoredSchema"] and out["provider"] == "json"
    assert [(c["name"], c["type"], c["nullable"]) for c in out["schema"]] == [
        ("id", "bigint", False), ("tags", "array<string>", True), ("code", "varchar(8)", True),
        ("price", "decimal(10,2)", True), ("dt", "string", True)]
    assert out["schema"][0]["comment"] == "the <id>"
    assert out["partitionColumns"] == ["dt"]
    assert out["bucketSpec"] == {"numBuckets": 4, "bucketColumns": ["id"], "sortColumns": []}
    assert out["location"] == "file:/data/t"
    assert out["stats"]["sizeInBytes"] == "1234" and out["stats"]["rowCount"] == "10"
    assert out["stats"]["colStats"] == [["id", [["version", "2"], ["min", "1"], ["max", "99"]]]]
    assert out["createVersion"] == "3.5.1"
    assert out["properties"] == [["owner_team", "x"]]  # spark.sql.* are Spark's, not the user's
    assert out["error"] == "CorruptedMetadata: 3 parts of 'spark.sql.sources.schema' expected, part 1 is missing"


def test_iceberg_metadata_keeps_64_bit_snapshot_ids_exact_and_writes_types_as_text(tmp_path):
    """iceberg.js in node: both ways of parsing (the reviver's source text, and quoting big
    integers outside strings) give the same exact values; nested types print as one line."""
    iceberg_js = SPARK_JS.with_name("iceberg.js")
    text = ('{"s": "x\\\\\\"9007199254740993 -1", "id": 1460364180338279891, "small": 12, '
            '"min": -9223372036854775808, "f": 1.5e3, "l": [9007199254740993]}')
    script = tmp_path / "iceberg.js"
    script.write_text(
        f"const I = require({json.dumps(str(iceberg_js))});\n"
        f"const text = {json.dumps(text)};\n"
        "const type = {type: 'struct', fields: [{name: 'a', type: {type: 'list', element: 'long'}},"
        " {name: 'm', type: {type: 'map', key: 'string', value: 'decimal(9,2)'}}]};\n"
        "console.log(JSON.stringify({quoted: I.parse(text, false), revived: I.REVIVER_SOURCE ? I.parse(text, true) : null,"
        " type: I.typeText(type)}));\n")
    out = json.loads(subprocess.run(["node", str(script)], capture_output=True, text=True, check=True, timeout=60).stdout)
    expected = {"s": 'x\\"9007199254740993 -1', "id": "1460364180338279891", "small": 12,
                "min": "-9223372036854775808", "f": 1500, "l": ["9007199254740993"]}
    assert out["quoted"] == expected
    assert out["revived"] in (None, expected)
    assert out["type"] == "struct<a: list<long>, m: map<string, decimal(9,2)>>"


async def test_restrictions_answer_the_callers_row_filter_and_masks(tmp_path):
    """Issue 39: ``?restrictions=<db>/<table>`` answers what the Thrift service's policy filters
    and masks for the asserted identity; a malformed name is 404. Issue 48: so is a table the
    caller does not see, whatever rules it has (as the Thrift service answers for the table)."""
    from gateway.providers.identity import Identity

    policy = tmp_path / "catalog.yaml"
    policy.write_text("""policies:
  - {id: 6, resources: {database: [sales], table: [orders], column: ["*"]},
     allow: [{groups: [analysts], accesses: [select]}, {users: [bob], accesses: [select]}]}
  - {id: 7, resources: {database: [sales], table: [orders]}, row_filter: [{groups: [analysts], filter: "amount > 1"}]}
  - {id: 8, resources: {database: [sales], table: [orders], column: [card]},
     data_mask: [{users: [ana], mask: MASK_NULL}]}
  - {id: 9, resources: {database: [sales], table: [customers]}, row_filter: [{groups: [guests], filter: "region = 'eu'"}]}
""")
    siblings = _siblings()
    siblings["hmshttpthrift/api/hms"] = ServiceConfig(path="hmshttpthrift/api/hms", policy_file=policy,
                                                      options={"methods": list(METHODS)})
    service = _service(siblings=siblings)

    async def get(target: str, user: str, groups=frozenset()):
        exchange = SimpleNamespace(request=make_mocked_request("GET", target),
                                   identity=Identity(user=user, principal=None, groups=groups))
        response, outcome = await service.handle(exchange)
        return json.loads(response.body)

    ana = await get("/gateway/sandbox/explorer?restrictions=sales/orders", "ana", frozenset({"analysts"}))
    assert ana == {"policy": True, "row-filter": {"expression": "amount > 1", "policy-id": 7},
                   "masks": [{"column": "card", "mask-type": "MASK_NULL", "expression": "NULL", "policy-id": 8}],
                   "complete": True}
    bob = await get("/gateway/sandbox/explorer?restrictions=sales/orders", "bob")
    assert bob["row-filter"] is None and bob["masks"] == []
    for hidden in ("sales/orders", "sales/customers"):  # carol's own filter on a table she does not see
        with pytest.raises(NotFound):
            await get(f"/gateway/sandbox/explorer?restrictions={hidden}", "carol", frozenset({"guests"}))
    with pytest.raises(NotFound):  # ana sees orders, not the other tables of sales
        await get("/gateway/sandbox/explorer?restrictions=sales/customers", "ana", frozenset({"analysts"}))
    with pytest.raises(NotFound):
        await get("/gateway/sandbox/explorer?restrictions=sales", "ana")
