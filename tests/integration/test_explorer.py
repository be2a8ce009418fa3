"""The catalog explorer (service kind ``explorer``) in a real browser: Debian's Chromium driven by
Playwright, against the real gateway and real Hive Metastores.

* Browse database → table → partitions on the demo catalog and compare with direct HMS calls.
* A 50,000-partition table: the first page of partition names appears within 1 s (issue 15).
* A table whose comment, owner, properties and partitions hold ``<script>`` and
  ``"><img onerror>`` renders them as text; nothing executes.
* A Spark data-source table shows the schema and statistics Spark keeps in table properties.
* Wrong or missing credentials: 401 with the Basic challenge, and nothing is shown.
* axe-core finds no violation of serious or critical impact.
* An Iceberg table shows its schema, partition spec, properties and snapshot history, loaded
  through the topology's ``iceberg-rest`` service.

``HMS_EXPLORER_SCREENSHOTS=docs`` also writes the screenshots shown in docs/explorer.md.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import json
import os
import shutil
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Error as PlaywrightError, Page, expect, sync_playwright

from gateway.hms_thrift.kind import SPEC_METHODS
from demo import metastore_client
from gateway.explorer import METHODS
from tests.support.big_table import BIG_DB, BIG_PARTITIONS, BIG_TABLE
from tests.support.gateway import htpasswd_provider, metric
from tests.support.hms import start_hms
from tests.support.policy import ANALYSTS, CATALOG_POLICY, POLICY_FILE, POLICY_PATH
from tests.support.thrift_gen import hive_metastore_client

# Building the 50,000-partition table takes minutes on a busy machine (setup counts here).
pytestmark = [pytest.mark.integration, pytest.mark.long, pytest.mark.timeout(1800)]

REPO = Path(__file__).resolve().parents[2]
AXE = REPO / "tests" / "node" / "node_modules" / "axe-core" / "axe.min.js"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
USER, PASSWORD = "admin", "admin-password"
SCRIPT = "<script>window.__pwned = 'script'</script>"
IMG = '"><img src=x onerror="window.__pwned = \'img\'">'
WAIT_MS = 120_000  # generous: the machine is shared
expect.set_options(timeout=WAIT_MS)


def _topology(uri: str, events: bool = False, iceberg: bool = False) -> dict:
    """The Thrift service the explorer calls, the explorer, with ``events`` the change feed
    (kind ``event-stream``) for its live panel, with ``iceberg`` an ``iceberg-rest`` service."""
    explorer = {"thrift_service": "hmshttpthrift/api/hms", "page_size": 100}
    feed = []
    if iceberg:
        explorer["iceberg_service"] = "iceberg"
        feed.append({"kind": "iceberg-rest", "path": "iceberg", "upstream": {"urls": [uri]}})
    if events:
        explorer["events_service"] = "events"
        feed.append({"kind": "event-stream", "path": "events", "upstream": {"urls": [uri]},
                     "options": {"poll_interval_seconds": 0.2, "heartbeat_seconds": 5}})
    return {"services": [
        {"path": "hmshttpthrift/api/hms", "upstream": {"urls": [uri]},
         "options": {"methods": sorted(set(SPEC_METHODS) | set(METHODS))}},
        {"kind": "explorer", "path": "explorer", "options": explorer},
        *feed,
    ]}


def _sd(hms, location: str | None, cols, serde_params=None, input_format="org.apache.hadoop.mapred.TextInputFormat"):
    return hms.StorageDescriptor(
        cols=cols, location=location, inputFormat=input_format,
        outputFormat="org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat", compressed=False, numBuckets=-1,
        serdeInfo=hms.SerDeInfo("s", "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe", serde_params or {}),
        bucketCols=[], sortCols=[], parameters={},
    )


SPARK_SCHEMA = json.dumps({"type": "struct", "fields": [
    {"name": "event_id", "type": "long", "nullable": False, "metadata": {"comment": "unique id"}},
    {"name": "payload", "type": {"type": "map", "keyType": "string", "valueType": "string",
                                 "valueContainsNull": True}, "nullable": True, "metadata": {}},
    {"name": "day", "type": "date", "nullable": True, "metadata": {}},
]}, separators=(",", ":"))


def _fill_lab(uri: str, warehouse: Path) -> None:
    """The lab database: a hostile table and a Spark data-source table."""
    hms = metastore_client.load_idl()
    with metastore_client.connect(uri) as client:
        client.create_database(hms.Database(name="lab", description=f"lab {SCRIPT}", parameters={"note": IMG}))
        client.create_table(hms.Table(
            tableName="hostile", dbName="lab", owner=IMG, tableType="MANAGED_TABLE",
            sd=_sd(hms, None, [hms.FieldSchema("x", "int", SCRIPT)]),
            partitionKeys=[hms.FieldSchema("p", "string", IMG)],
            parameters={"comment": SCRIPT, IMG: SCRIPT, "k": IMG},
        ))
        part_sd = _sd(hms, str(warehouse / "lab.db" / "hostile" / "p=1"), [hms.FieldSchema("x", "int", "")])
        client.add_partition(hms.Partition(values=[IMG], dbName="lab", tableName="hostile", sd=part_sd,
                                           parameters={"numFiles": SCRIPT}))
        mid = len(SPARK_SCHEMA) // 2
        client.create_table(hms.Table(
            tableName="spark_events", dbName="lab", owner="spark", tableType="EXTERNAL_TABLE",
            sd=_sd(hms, str(warehouse / "lab.db" / "spark_events-__PLACEHOLDER__"),
                   [hms.FieldSchema("col", "array<string>", "from deserializer")],
                   {"path": "file:/data/spark_events", "serialization.format": "1"},
                   input_format="org.apache.hadoop.mapred.SequenceFileInputFormat"),
            partitionKeys=[],
            parameters={
                "EXTERNAL": "TRUE", "spark.sql.sources.provider": "json",
                "spark.sql.sources.schema.numParts": "2",
                "spark.sql.sources.schema.part.0": SPARK_SCHEMA[:mid],
                "spark.sql.sources.schema.part.1": SPARK_SCHEMA[mid:],
                "spark.sql.sources.schema.numPartCols": "1", "spark.sql.sources.schema.partCol.0": "day",
                "spark.sql.statistics.totalSize": "4096", "spark.sql.statistics.numRows": "12",
                "spark.sql.statistics.colStats.event_id.version": "2",
                "spark.sql.statistics.colStats.event_id.min": "1",
                "spark.sql.statistics.colStats.event_id.max": "12",
                "spark.sql.statistics.colStats.event_id.distinctCount": "12",
                "spark.sql.statistics.colStats.event_id.nullCount": "0",
                "spark.sql.create.version": "4.0.0",
            },
        ))


@pytest.fixture(scope="module")
def lab(big_table_hms):
    """The lab metastore: the lab database beside the run's 50,000-partition table."""
    _fill_lab(big_table_hms.uri, big_table_hms.warehouse_dir)
    return big_table_hms


@pytest.fixture(scope="module")
def gw(hms, module_gateway_factory):
    """Topology ``catalog``: the session's HMS with the demo catalog, and its change feed."""
    return module_gateway_factory({"catalog": _topology(hms.uri, events=True)}, {USER: PASSWORD})


@pytest.fixture(scope="module")
def gw_lab(lab, module_gateway_factory):
    """Topology ``lab``: the lab HMS (hostile values, a Spark table, 50,000 partitions)."""
    return module_gateway_factory({"lab": _topology(lab.uri)}, {USER: PASSWORD})


@pytest.fixture(scope="module")
def gw_policy(hms, module_gateway_factory):
    """Topology ``catalog`` with a catalog policy on the Thrift service: alice (analysts) sees sales
    only, without the column orders.customer."""
    topology = _topology(hms.uri)
    topology["services"][0]["policy_file"] = POLICY_PATH
    topology["providers"] = {"authentication": [htpasswd_provider()], "identity_assertion": ANALYSTS}
    return module_gateway_factory({"catalog": topology}, {"alice": PASSWORD},
                                  files={POLICY_FILE: CATALOG_POLICY + RESTRICTIONS})


#: Issue 39: a row filter and a mask for analysts on sales.orders, which the table page shows.
RESTRICTIONS = """\
  - id: 7
    name: analysts see big orders
    resources: {database: [sales], table: [orders]}
    row_filter: [{groups: [analysts], filter: "amount > 100"}]
  - id: 8
    name: analysts see amounts hashed
    resources: {database: [sales], table: [orders], column: [amount]}
    data_mask: [{groups: [analysts], mask: MASK_HASH}]
  - id: 9
    name: analysts would see few ages, on a table they do not see
    resources: {database: [hmshttptestdatabase], table: [test_table]}
    row_filter: [{groups: [analysts], filter: "age > 60"}]
"""


@pytest.fixture(scope="module")
def browser() -> Browser:
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


def _page(browser: Browser, password: str | None = PASSWORD, user: str = USER, **context) -> Page:
    credentials = {"username": user, "password": password} if password is not None else None
    page = browser.new_context(ignore_https_errors=True, http_credentials=credentials, **context).new_page()
    page.set_default_timeout(WAIT_MS)
    return page


def _url(gw, topology: str, route: str = "") -> str:
    return f"https://localhost:{gw.port}/gateway/{topology}/explorer" + (f"#/{route}" if route else "")


def _rows(page: Page, table_id: str) -> list[list[str]]:
    return page.eval_on_selector_all(
        f"#{table_id} tbody tr", "rows => rows.map(r => [...r.children].map(c => c.textContent))")


def _facts(page: Page, caption: str) -> dict[str, str]:
    return dict(page.evaluate(
        """caption => { const t = [...document.querySelectorAll('table')].find(t => t.caption && t.caption.textContent === caption);
             return t ? [...t.tBodies[0].rows].map(r => [r.cells[0].textContent, r.cells[1].textContent]) : []; }""",
        caption))


def _epoch(seconds) -> str:
    if not seconds or int(seconds) <= 0:
        return ""
    return dt.datetime.fromtimestamp(int(seconds), dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _screenshot(page: Page, name: str, tmp_path: Path) -> None:
    target = tmp_path / f"explorer-{name}.png"
    page.screenshot(path=str(target), full_page=False)
    if os.environ.get("HMS_EXPLORER_SCREENSHOTS") == "docs":
        shutil.copy(target, REPO / "docs" / target.name)


def test_browse_database_table_partitions_matches_direct_hms_calls(gw, hms, browser, tmp_path):
    client, transport = hive_metastore_client(hms.host, hms.port)
    page = _page(browser, viewport={"width": 1280, "height": 860})
    calls_before = metric(gw, "hms_gateway_requests_total", topology="catalog", method="get_table", outcome="ok")
    try:
        page.goto(_url(gw, "catalog"))
        expect(page.locator("#db-count")).to_contain_text("databases")
        assert sorted(r[0] for r in _rows(page, "databases")) == sorted(client.get_all_databases())
        _screenshot(page, "databases", tmp_path)

        page.get_by_label("Search databases").fill("SAL")
        assert [r[0] for r in _rows(page, "databases")] == ["sales"]
        page.get_by_label("Search databases").fill("")

        db = "hmshttptestdatabase"
        page.get_by_role("link", name=db, exact=True).click()
        expect(page.locator("#table-count")).to_contain_text("tables")
        names = sorted(client.get_all_tables(db))
        rows = _rows(page, "tables")
        assert [r[0] for r in rows] == names
        for row in rows:
            t = client.get_table(db, row[0])
            assert row[1:3] == [t.tableType, t.owner]
            assert row[4] == (t.sd.location or "")
            assert row[5] == _epoch(t.parameters.get("transient_lastDdlTime"))
        formats = {r[0]: r[3] for r in rows}
        assert formats["test_table"] == "sequencefile" and formats["test_table_adults"] == "view"
        assert formats["events"] == "parquet" and formats["web_logs"] == "text"
        database = client.get_database(db)
        assert _facts(page, "Database")["Description"] == database.description

        page.get_by_role("link", name="test_table", exact=True).click()
        expect(page.locator("#columns")).to_be_visible()
        t = client.get_table(db, "test_table")
        # Spark's SQL wrote this Hive serde table: its schema in the properties matches HMS's
        # columns, so the page shows Spark's view of them (plus nullability).
        assert "spark.sql.sources.schema" in t.parameters or "spark.sql.sources.schema.numParts" in t.parameters
        assert [r[:3] for r in _rows(page, "columns")] == [[c.name, c.type, c.comment or ""] for c in t.sd.cols]
        assert _rows(page, "partition-keys") == [[c.name, c.type, c.comment or ""] for c in t.partitionKeys]
        assert _rows(page, "parameters") == sorted([k, v] for k, v in t.parameters.items())
        storage = _facts(page, "Storage")
        assert storage["InputFormat"] == t.sd.inputFormat and storage["SerDe"] == t.sd.serdeInfo.serializationLib
        assert storage["Location"] == t.sd.location
        overview = _facts(page, "Overview")
        assert overview["Comment"] == t.parameters["comment"] and overview["Owner"] == t.owner
        assert overview["Created"] == _epoch(t.createTime)
        _screenshot(page, "table", tmp_path)

        page.get_by_role("link", name="Browse partitions").click()
        expect(page.locator("#partitions[data-details=loaded]")).to_have_count(1)
        names = client.get_partition_names(db, "test_table", -1)
        rows = _rows(page, "partitions")
        assert [r[0] for r in rows] == names
        parts = {metastore_client.partition_name(["hair_color"], p.values): p
                 for p in client.get_partitions_by_names(db, "test_table", names)}
        for row in rows:
            p = parts[row[0]]
            assert row[1:4] == [p.sd.location, _epoch(p.createTime), p.parameters.get("numFiles", "")]

        # A view's text; keyboard only: Tab from the search box to the first link, Enter opens it.
        page.goto(_url(gw, "catalog", f"db/{db}/table/test_table_adults"))
        view = client.get_table(db, "test_table_adults")
        expect(page.locator("#view-original")).to_have_text(view.viewOriginalText)
        expect(page.locator("#view-expanded")).to_have_text(view.viewExpandedText)

        page.goto(_url(gw, "catalog", f"db/{db}"))
        page.get_by_label("Search tables").fill("events")
        page.keyboard.press("Tab")
        page.keyboard.press("Enter")
        expect(page.locator("h1")).to_have_text(f"Table {db}.events")

        # 200 partitions, 100 a page: the second page holds the next hundred names.
        page.get_by_role("link", name="Browse partitions").click()
        expect(page.locator("#partitions[data-details=loaded]")).to_have_count(1)
        page.get_by_role("button", name="Next page").click()
        expect(page.locator("#page-label")).to_contain_text("Page 2 of 2")
        assert [r[0] for r in _rows(page, "partitions")] == client.get_partition_names(db, "events", -1)[100:200]
        _screenshot(page, "partitions", tmp_path)
    finally:
        page.context.close()
        transport.close()
    # The browser is a client like any other: its calls are in the gateway's metrics.
    assert metric(gw, "hms_gateway_requests_total", topology="catalog", method="get_table", outcome="ok") > calls_before


def test_what_the_catalog_policy_hides_is_simply_absent(gw_policy, hms, browser):
    client, transport = hive_metastore_client(hms.host, hms.port)
    page = _page(browser, user="alice")
    try:
        assert len(client.get_all_databases()) > 1
        page.goto(_url(gw_policy, "catalog"))
        expect(page.locator("#db-count")).to_have_text("1 of 1 databases")
        assert _rows(page, "databases") == [["sales"]]
        page.goto(_url(gw_policy, "catalog", "db/sales/table/orders"))
        expect(page.locator("#columns")).to_be_visible()
        hms_columns = [c.name for c in client.get_table("sales", "orders").sd.cols]
        assert "customer" in hms_columns
        shown = [r[0] for r in _rows(page, "columns")]
        assert shown == [c for c in hms_columns if c != "customer"]
        assert "customer" not in page.locator("#view").inner_text()
        expect(page.locator("#row-filter")).to_have_text("Rows you see: amount > 100 (policy 7)")
        assert _rows(page, "masks") == [["amount", "MASK_HASH", "mask_hash(amount)", "8"]]
        page.goto(_url(gw_policy, "catalog", "db/hmshttptestdatabase"))
        expect(page.locator("#error")).not_to_be_empty()
        assert page.locator("#tables").count() == 0
    finally:
        page.context.close()
        transport.close()


def test_restrictions_are_told_only_for_a_table_the_caller_sees(gw_policy):
    """Issue 48: ``?restrictions=`` of a table alice does not see is 404, as the table itself,
    though a row filter names her group there; of one she sees, her rules."""
    base = f"https://localhost:{gw_policy.port}/gateway/catalog/explorer?restrictions="
    token = base64.b64encode(f"alice:{PASSWORD}".encode()).decode()

    def get(table: str) -> tuple[int, bytes]:
        request = urllib.request.Request(base + table, headers={"Authorization": f"Basic {token}"})
        try:
            with urllib.request.urlopen(request, context=gw_policy.ssl_context(), timeout=30) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    status, body = get("hmshttptestdatabase/test_table")
    assert status == 404 and b"age" not in body
    status, body = get("sales/orders")
    assert status == 200 and json.loads(body)["row-filter"] == {"expression": "amount > 100", "policy-id": 7}


@pytest.mark.parametrize("password", ["wrong-password", None])
def test_wrong_or_missing_credentials_get_401_and_nothing_is_shown(gw, browser, password):
    page = _page(browser, password)
    thrift_calls: list[str] = []
    page.on("request", lambda r: thrift_calls.append(r.url) if "hmshttpthrift" in r.url else None)
    try:
        with page.expect_response(lambda r: r.url == _url(gw, "catalog")) as answer:
            try:
                page.goto(_url(gw, "catalog"))
            except PlaywrightError:
                # Without credentials headless Chromium cancels its Basic dialog: the navigation
                # fails (ERR_INVALID_AUTH_CREDENTIALS) after the 401 arrived.
                assert password is None
        response = answer.value
        assert response.status == 401
        assert response.headers["www-authenticate"].startswith("Basic")
        assert page.locator("#view").count() == 0 and page.locator("table").count() == 0
        assert "hmshttptestdatabase" not in page.content()
        assert thrift_calls == []
    finally:
        page.context.close()


def test_axe_finds_no_serious_or_critical_violations(gw, browser):
    # CSP bypass only so that axe's own script can be injected; the page is unchanged.
    page = _page(browser, bypass_csp=True)
    found = {}
    try:
        for route, ready in [("", "#databases"), ("db/hmshttptestdatabase", "#tables"),
                             ("db/hmshttptestdatabase/table/test_table", "#parameters"),
                             ("db/hmshttptestdatabase/table/events/partitions/1", "#partitions[data-details=loaded]")]:
            page.goto(_url(gw, "catalog", route))
            page.locator(ready).wait_for()
            page.add_script_tag(path=str(AXE))
            result = page.evaluate("async () => await axe.run(document)")
            assert result["passes"], "axe ran no checks"
            found[route] = [(v["id"], v["impact"], len(v["nodes"])) for v in result["violations"]
                            if v["impact"] in ("serious", "critical")]
    finally:
        page.context.close()
    assert found == {route: [] for route in found}


def test_fifty_thousand_partitions_first_page_on_demand(gw_lab, lab, browser, record_property):
    """The first page of a table of 50,000 partitions comes without reading them all. The issue's
    goal (on screen within one second) is a figure, recorded as ``first_page_seconds``, not a
    threshold: tests hold none (docs/performance.md has the measured figures)."""
    client, transport = hive_metastore_client(lab.host, lab.port)
    page = _page(browser)
    try:
        page.goto(_url(gw_lab, "lab", f"db/{BIG_DB}/table/{BIG_TABLE}"))
        expect(page.locator("#partition-keys")).to_be_visible()
        # Timed in the page (no polling of Playwright's in the figure): from the click on the
        # link to the moment the 100 rows of the first page are in the document.
        first_page = page.evaluate("""() => new Promise((resolve) => {
            const started = performance.now();
            const seen = new MutationObserver(() => {
              if (document.querySelectorAll('#partitions tbody tr').length === 100) {
                seen.disconnect();
                resolve((performance.now() - started) / 1000);
              }
            });
            seen.observe(document.getElementById('view'), { childList: true, subtree: true });
            document.querySelector('a[href$="/partitions/1"]').click();
        })""")
        print(f"\nfirst page of {BIG_PARTITIONS} partitions on screen after {first_page * 1000:.0f} ms")
        record_property("first_page_seconds", round(first_page, 3))
        expect(page.locator("#partition-count")).to_have_text(f"{BIG_PARTITIONS} partitions")
        names = client.get_partition_names(BIG_DB, BIG_TABLE, -1)
        assert [r[0] for r in _rows(page, "partitions")] == names[:100]
        expect(page.locator("#partitions[data-details=loaded]")).to_have_count(1)
        assert all(r[1].endswith(r[0]) for r in _rows(page, "partitions"))  # locations came on demand
        page.goto(_url(gw_lab, "lab", f"db/{BIG_DB}/table/{BIG_TABLE}/partitions/500"))
        expect(page.locator("#page-label")).to_contain_text("Page 500 of 500")
        assert [r[0] for r in _rows(page, "partitions")] == names[-100:]
    finally:
        page.context.close()
        transport.close()


def test_hostile_catalog_values_render_as_text_and_nothing_executes(gw_lab, browser):
    page = _page(browser)
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    try:
        page.goto(_url(gw_lab, "lab", "db/lab"))
        expect(page.locator("#tables")).to_be_visible()
        assert _facts(page, "Database")["Description"] == f"lab {SCRIPT}"
        assert _facts(page, "Database")["note"] == IMG
        hostile = next(r for r in _rows(page, "tables") if r[0] == "hostile")
        assert hostile[2] == IMG  # owner
        page.get_by_role("link", name="hostile", exact=True).click()
        expect(page.locator("#parameters")).to_be_visible()
        assert _facts(page, "Overview")["Comment"] == SCRIPT
        assert [SCRIPT] == [r[2] for r in _rows(page, "columns")]
        assert [IMG] == [r[2] for r in _rows(page, "partition-keys")]
        assert [IMG, SCRIPT] in _rows(page, "parameters") and ["k", IMG] in _rows(page, "parameters")
        page.get_by_role("link", name="Browse partitions").click()
        expect(page.locator("#partitions[data-details=loaded]")).to_have_count(1)
        row = _rows(page, "partitions")[0]
        assert row[0] == metastore_client.partition_name(["p"], [IMG]) and row[3] == SCRIPT
        assert page.evaluate("window.__pwned") is None
        assert page.locator("img").count() == 0
        assert page.locator("script").count() == 4  # the page's own: tjson.js, spark.js, iceberg.js, app.js
        assert dialogs == []
    finally:
        page.context.close()


def test_spark_data_source_table_shows_the_schema_spark_keeps_in_properties(gw_lab, lab, browser, tmp_path):
    client, transport = hive_metastore_client(lab.host, lab.port)
    page = _page(browser)
    try:
        raw = client.get_table("lab", "spark_events")
        assert [c.name for c in raw.sd.cols] == ["col"]  # what HMS itself holds
        page.goto(_url(gw_lab, "lab", "db/lab/table/spark_events"))
        expect(page.locator("#columns")).to_be_visible()
        assert page.locator("#columns caption").text_content() == \
            "Columns (as Spark sees them, from spark.sql.sources.schema)"
        assert _rows(page, "columns") == [["event_id", "bigint", "unique id", "no"],
                                          ["payload", "map<string,string>", "", "yes"]]
        assert _rows(page, "partition-keys") == [["day", "date", ""]]
        assert _rows(page, "hms-columns") == [["col", "array<string>", "from deserializer"]]
        overview, storage = _facts(page, "Overview"), _facts(page, "Storage")
        assert overview["Provider"] == "json" and overview["Format"] == "json"
        assert overview["Created by Spark"] == "4.0.0"
        assert storage["Location"] == "file:/data/spark_events"
        spark = _facts(page, "Spark statistics (spark.sql.statistics)")
        assert spark == {"Size in bytes": "4096", "Row count": "12"}
        assert _rows(page, "column-stats") == [["event_id", "12", "1", "12", "0", "", "", "2"]]
        _screenshot(page, "spark-table", tmp_path)
    finally:
        page.context.close()
        transport.close()


def test_live_panel_lists_changes_and_refreshes_the_page_that_shows_them(gw, hms, browser):
    hms_idl = metastore_client.load_idl()
    db, fresh = "hmshttptestdatabase", f"explorer_live_{os.getpid()}"
    page = _page(browser)
    try:
        page.goto(_url(gw, "catalog", f"db/{db}"))
        expect(page.locator("#tables")).to_be_visible()
        expect(page.locator("#changes-state")).to_have_text("Following the metastore's changes.")
        assert page.locator("#tables tbody th", has_text=fresh).count() == 0
        with metastore_client.connect(hms.uri) as client:
            client.create_table(hms_idl.Table(
                tableName=fresh, dbName=db, owner="alice", tableType="MANAGED_TABLE",
                sd=_sd(hms_idl, None, [hms_idl.FieldSchema("x", "int", "")]), partitionKeys=[], parameters={}))
        newest = page.locator("#changes li").first
        expect(newest).to_contain_text("CREATE_TABLE")
        expect(newest.get_by_role("link", name=f"{db}.{fresh}")).to_have_attribute("href", f"#/db/{db}/table/{fresh}")
        # The open page (the tables of the database) showed anew, without a reload.
        expect(page.locator("#tables tbody th", has_text=fresh)).to_have_count(1)
        assert page.evaluate("performance.getEntriesByType('navigation').length") == 1
    finally:
        page.context.close()
        with metastore_client.connect(hms.uri) as client:
            with contextlib.suppress(Exception):
                client.drop_table(db, fresh, True)


@pytest.fixture(scope="module")
def gw_iceberg(tmp_path_factory, module_gateway_factory):
    """Topology ``ice``: an HMS of its own with an Iceberg table made through the gateway's REST
    catalog (partitioned by region, two appends), and the explorer with ``iceberg_service``."""
    running = start_hms(tmp_path_factory.mktemp("hms-explorer-iceberg"))
    try:
        gw = module_gateway_factory({"ice": _topology(running.uri, iceberg=True)}, {USER: PASSWORD})
        yield gw
    finally:
        running.server.stop()


def test_iceberg_table_shows_schema_spec_properties_and_snapshot_history(gw_iceberg, browser, tmp_path, monkeypatch):
    import pyarrow as pa
    from pyiceberg.catalog.rest import RestCatalog
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import LongType, NestedField, StringType

    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)  # PyIceberg's ssl.cabundle must count
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    rest = RestCatalog("gw", **{"uri": f"https://localhost:{gw_iceberg.port}/gateway/ice/iceberg",
                                "ssl": {"cabundle": str(gw_iceberg.ca_file)},
                                "auth": {"type": "basic", "basic": {"username": USER, "password": PASSWORD}}})
    schema = Schema(NestedField(1, "id", LongType(), required=True, doc="order id"),
                    NestedField(2, "customer", StringType(), required=False),
                    NestedField(3, "region", StringType(), required=False), identifier_field_ids=[1])
    rest.create_namespace("shop")
    t = rest.create_table("shop.orders", schema=schema, properties={"write.format.default": "parquet"},
                          partition_spec=PartitionSpec(PartitionField(3, 1000, IdentityTransform(), "region")))
    rows = pa.table({"id": pa.array([1, 2], pa.int64()), "customer": ["ann", "bo"], "region": ["eu", "us"]},
                    schema=schema.as_arrow())
    t.append(rows)
    t.append(rows)
    t = rest.load_table("shop.orders")

    page = _page(browser, viewport={"width": 1280, "height": 1000})
    try:
        page.goto(_url(gw_iceberg, "ice", "db/shop/table/orders"))
        expect(page.locator("#iceberg-snapshots")).to_be_visible()
        assert _rows(page, "iceberg-schema") == [["1", "id", "long", "yes", "order id"],
                                                 ["2", "customer", "string", "no", ""],
                                                 ["3", "region", "string", "no", ""]]
        assert _rows(page, "iceberg-spec") == [["region", "region", "identity", "1000"]]
        assert ["write.format.default", "parquet"] in _rows(page, "iceberg-properties")
        history = _rows(page, "iceberg-snapshots")
        newest_first = sorted(t.snapshots(), key=lambda s: s.sequence_number, reverse=True)
        assert [r[0] for r in history] == [str(s.snapshot_id) for s in newest_first]
        assert [r[2] for r in history] == ["append", "append"]
        assert history[0][3] == str(newest_first[1].snapshot_id)  # the parent
        assert "added-records=2" in history[0][4]
        assert _facts(page, "Iceberg table")["Current snapshot"] == str(t.current_snapshot().snapshot_id)
        assert _facts(page, "Overview")["Format"] == "iceberg"
        page.evaluate("document.getElementById('iceberg-schema-heading').scrollIntoView()")
        _screenshot(page, "iceberg", tmp_path)
    finally:
        page.context.close()
