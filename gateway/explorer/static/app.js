/*
 * The catalog explorer page. Every value from the metastore is put in the document as text
 * (textContent / text nodes), never as markup. Calls go to the topology's own hms-thrift
 * service in TJSON (tjson.js) with the browser's credentials for this origin.
 *
 * Routes (location hash): #/ databases; #/db/<db> tables; #/db/<db>/table/<t> one table;
 * #/db/<db>/table/<t>/partitions/<page> partitions, names first, details per page on demand.
 * An Iceberg table (parameter table_type=ICEBERG) is also loaded through the topology's
 * iceberg-rest service when there is one (Iceberg REST loadTable, same credentials).
 * A table's page also shows the row filter and column masks (Ranger's row-filter and data-mask
 * policies of the Thrift service's policy) that apply to the user, from ?restrictions=<db>/<t>.
 */
(function () {
  "use strict";

  const meta = (name) => document.querySelector(`meta[name="hms-${name}"]`).getAttribute("content");
  const THRIFT_URL = meta("thrift-url");
  const PAGE_SIZE = Number(meta("page-size")) || 100;
  const ICEBERG_URL = meta("iceberg-url");
  const view = document.getElementById("view");
  const status = document.getElementById("status");
  const errorBox = document.getElementById("error");
  const crumbs = document.getElementById("breadcrumb");

  let codec = null;
  let seqid = 0;
  let generation = 0; // a newer navigation makes older renders stale

  class HttpError extends Error {
    constructor(status, text) { super(`HTTP ${status}: ${text.trim().slice(0, 200)}`); this.status = status; }
  }

  async function loadCodec() {
    const response = await fetch("?asset=schema.json", { credentials: "same-origin" });
    if (!response.ok) throw new HttpError(response.status, await response.text());
    codec = HmsTjson.Codec(await response.json());
  }

  /** One Thrift call; resolves to the method's success value. */
  async function call(method, args) {
    const response = await fetch(THRIFT_URL, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/vnd.apache.thrift.json", "Accept": "application/vnd.apache.thrift.json" },
      body: codec.encodeCall(method, ++seqid, args),
    });
    if (!response.ok) throw new HttpError(response.status, await response.text());
    return codec.unwrapReply(method, codec.decodeReply(await response.text()));
  }

  // ---- DOM helpers: text only ----

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (key === "text") node.textContent = String(value);
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children) if (child !== null && child !== undefined) node.append(child);
    return node;
  }

  const text = (value) => (value === undefined || value === null ? "" : String(value));
  const link = (href, label) => el("a", { href, text: label });
  const hashOf = (...parts) => "#/" + parts.map(encodeURIComponent).join("/");

  function table(caption, headers, rows, attrs) {
    return el("table", attrs || {},
      el("caption", { text: caption }),
      el("thead", {}, el("tr", {}, ...headers.map((h) => el("th", { scope: "col", text: h })))),
      el("tbody", {}, ...rows.map((row) => el("tr", {}, ...row.map((cell, i) =>
        el(i === 0 ? "th" : "td", i === 0 ? { scope: "row" } : {}, cell instanceof Node ? cell : text(cell)))))));
  }

  function facts(caption, pairs) {
    return table(caption, ["Property", "Value"], pairs.filter(([, v]) => v !== undefined && v !== null && v !== ""));
  }

  function section(title, id, ...content) {
    return el("section", { "aria-labelledby": id }, el("h2", { id, text: title }), ...content);
  }

  function searchBox(id, label, onInput) {
    return el("div", { class: "search" },
      el("label", { for: id, text: label }),
      el("input", { id, type: "search", autocomplete: "off", spellcheck: "false", oninput: (e) => onInput(e.target.value) }));
  }

  function mapRows(map) {
    return [...(map || new Map())].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  }

  function epoch(seconds) {
    const n = Number(seconds);
    if (!Number.isFinite(n) || n <= 0) return "";
    return new Date(n * 1000).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
  }

  const FORMATS = {
    MapredParquetInputFormat: "parquet", OrcInputFormat: "orc", TextInputFormat: "text",
    SequenceFileInputFormat: "sequencefile", AvroContainerInputFormat: "avro", RCFileInputFormat: "rcfile",
  };

  function format(t, spark) {
    if (t.tableType === "VIRTUAL_VIEW") return "view";
    if (spark.dataSource) return spark.provider;
    if (text(t.parameters && t.parameters.get("table_type")).toLowerCase() === "iceberg") return "iceberg";
    const input = (t.sd && t.sd.inputFormat) || "";
    const simple = input.slice(input.lastIndexOf(".") + 1);
    return FORMATS[simple] || simple;
  }

  function restore(t) {
    try {
      return SparkMeta.restore(t);
    } catch (e) { // corrupted Spark properties: show the table as HMS has it
      const spark = SparkMeta.restore({ ...t, parameters: new Map() });
      spark.corrupted = e.message;
      return spark;
    }
  }

  // Hive's Warehouse.makePartName / FileUtils.escapePathName, to match partitions with their names.
  const ESCAPED = /[\u0000-\u001f"#%'*/:=?\\\u007f{[\]^]/g;
  const escapePath = (s) => (s === "" ? "__HIVE_DEFAULT_PARTITION__"
    : s.replace(ESCAPED, (c) => "%" + c.charCodeAt(0).toString(16).toUpperCase().padStart(2, "0")));
  const partName = (keys, values) => keys.map((k, i) => `${escapePath(k.name)}=${escapePath(values[i])}`).join("/");

  // ---- Row filter and masks: what the catalog policy filters and masks for the user ----

  async function loadRestrictions(db, name) {
    const url = `?restrictions=${encodeURIComponent(db)}/${encodeURIComponent(name)}`;
    const response = await fetch(url, { credentials: "same-origin", headers: { "Accept": "application/json" } });
    if (!response.ok) throw new HttpError(response.status, await response.text());
    return response.json();
  }

  function restrictionsSection(r) {
    const filter = r["row-filter"];
    return section("Row filter and masks that apply to you", "restrictions-heading",
      el("p", { id: "row-filter", text: filter
        ? `Rows you see: ${filter.expression} (policy ${filter["policy-id"]})` : "No row filter applies to you." }),
      r.masks.length
        ? table("Masked columns", ["Column", "Mask", "Hive expression", "Policy"],
          r.masks.map((m) => [m.column, m["mask-type"], m.expression === null ? "" : m.expression, String(m["policy-id"])]),
          { id: "masks" })
        : null,
      r.complete ? null : el("p", { class: "warning", text: "A mask applies to columns named by exclusion." }));
  }

  // ---- Iceberg tables: the REST catalog's loadTable, shown as text ----

  /** The table's metadata (Iceberg REST LoadTableResult.metadata) from the iceberg-rest service. */
  async function loadIceberg(db, name) {
    const url = `${ICEBERG_URL}/v1/namespaces/${encodeURIComponent(db)}/tables/${encodeURIComponent(name)}`;
    const response = await fetch(url, { credentials: "same-origin", headers: { "Accept": "application/json" } });
    const body = await response.text();
    if (!response.ok) {
      let message = body;
      try { message = JSON.parse(body).error.message; } catch (e) { /* not the error model */ }
      throw new HttpError(response.status, message);
    }
    return IcebergMeta.parse(body).metadata;
  }

  function icebergSections(m) {
    const schema = (m.schemas || []).find((s) => s["schema-id"] === m["current-schema-id"]) || { fields: [] };
    const names = new Map(schema.fields.map((f) => [f.id, f.name]));
    const spec = (m["partition-specs"] || []).find((s) => s["spec-id"] === m["default-spec-id"]) || { fields: [] };
    const when = (ms) => (Number.isFinite(ms) ? epoch(ms / 1000) : "");
    const snapshots = [...(m.snapshots || [])].sort((a, b) => // newest first: sequence number (v2+), then time
      (b["sequence-number"] || 0) - (a["sequence-number"] || 0) || b["timestamp-ms"] - a["timestamp-ms"]);
    const summary = (s) => Object.entries(s.summary || {}).filter(([k]) => k !== "operation")
      .map(([k, v]) => `${k}=${v}`).join(", ");
    return [
      section("Iceberg schema", "iceberg-schema-heading",
        table(`Schema ${schema["schema-id"]} (current)`, ["Id", "Name", "Type", "Required", "Doc"],
          schema.fields.map((f) => [f.id, f.name, IcebergMeta.typeText(f.type), f.required ? "yes" : "no", f.doc]),
          { id: "iceberg-schema" })),
      section("Partition spec", "iceberg-spec-heading",
        spec.fields.length
          ? table(`Partition spec ${spec["spec-id"]} (default)`, ["Field", "Source column", "Transform", "Field id"],
            spec.fields.map((f) => [f.name, names.get(f["source-id"]) || f["source-id"], f.transform, f["field-id"]]),
            { id: "iceberg-spec" })
          : el("p", { id: "iceberg-spec", text: "Unpartitioned." })),
      section("Snapshot history", "iceberg-snapshots-heading",
        table("Snapshots, newest first", ["Snapshot id", "Committed", "Operation", "Parent", "Summary"],
          snapshots.map((s) => [s["snapshot-id"], when(s["timestamp-ms"]), s.summary && s.summary.operation,
            s["parent-snapshot-id"], summary(s)]), { id: "iceberg-snapshots" })),
      section("Iceberg properties", "iceberg-properties-heading",
        facts("Iceberg table", [["Format version", m["format-version"]], ["Table UUID", m["table-uuid"]],
          ["Location", m.location], ["Current snapshot", m["current-snapshot-id"]], ["Last updated", when(m["last-updated-ms"])]]),
        table("Iceberg properties", ["Key", "Value"], mapRows(new Map(Object.entries(m.properties || {}))),
          { id: "iceberg-properties" })),
    ];
  }

  // ---- views ----

  function setCrumbs(items) {
    crumbs.replaceChildren(...items.map(([label, href], i) => el("li", {},
      i === items.length - 1 ? el("span", { "aria-current": "page", text: label }) : link(href, label))));
  }

  function heading(title) {
    return el("h1", { tabindex: "-1", text: title });
  }

  async function databasesView() {
    setCrumbs([["Databases", "#/"]]);
    const names = await call("get_all_databases", {});
    const body = el("tbody");
    const count = el("p", { id: "db-count", role: "status" });
    const render = (filter) => {
      const f = filter.toLowerCase();
      const shown = names.filter((n) => n.toLowerCase().includes(f));
      body.replaceChildren(...shown.map((n) => el("tr", {}, el("th", { scope: "row" }, link(hashOf("db", n), n)))));
      count.textContent = `${shown.length} of ${names.length} databases`;
    };
    render("");
    return [heading("Databases"), searchBox("db-search", "Search databases", render), count,
      el("table", { id: "databases" }, el("caption", { text: "Databases" }),
        el("thead", {}, el("tr", {}, el("th", { scope: "col", text: "Name" }))), body)];
  }

  async function databaseView(db) {
    setCrumbs([["Databases", "#/"], [db, hashOf("db", db)]]);
    const [database, names] = await Promise.all([call("get_database", { name: db }), call("get_all_tables", { db_name: db })]);
    const tables = names.length ? await call("get_table_objects_by_name", { dbname: db, tbl_names: names }) : [];
    tables.sort((a, b) => (a.tableName < b.tableName ? -1 : 1));
    const rows = tables.map((t) => {
      const spark = restore(t);
      return [link(hashOf("db", db, "table", t.tableName), t.tableName), t.tableType, t.owner, format(t, spark),
        spark.location, epoch(t.parameters && t.parameters.get("transient_lastDdlTime"))];
    });
    const body = el("tbody");
    const count = el("p", { id: "table-count", role: "status" });
    const render = (filter) => {
      const f = filter.toLowerCase();
      const shown = rows.filter((r) => r[0].textContent.toLowerCase().includes(f));
      body.replaceChildren(...shown.map((row) => el("tr", {}, ...row.map((cell, i) =>
        el(i === 0 ? "th" : "td", i === 0 ? { scope: "row" } : {}, cell instanceof Node ? cell : text(cell))))));
      count.textContent = `${shown.length} of ${rows.length} tables`;
    };
    render("");
    return [
      heading(`Database ${db}`),
      facts("Database", [["Description", database.description], ["Location", database.locationUri],
        ["Owner", database.ownerName]].concat(mapRows(database.parameters))),
      section("Tables", "tables-heading",
        searchBox("table-search", "Search tables", render), count,
        el("table", { id: "tables" }, el("caption", { text: `Tables of ${db}` }),
          el("thead", {}, el("tr", {}, ...["Name", "Type", "Owner", "Format", "Location", "Last DDL time"]
            .map((h) => el("th", { scope: "col", text: h })))), body)),
    ];
  }

  async function tableView(db, name) {
    setCrumbs([["Databases", "#/"], [db, hashOf("db", db)], [name, hashOf("db", db, "table", name)]]);
    const t = await call("get_table", { dbname: db, tbl_name: name });
    tableCache = { key: `${db}\u0000${name}`, table: t };
    const spark = restore(t);
    const sd = t.sd || {};
    const params = t.parameters || new Map();
    const serde = sd.serdeInfo || {};
    const out = [heading(`Table ${db}.${name}`)];
    if (spark.corrupted) out.push(el("p", { class: "warning", text: `Spark properties are corrupted: ${spark.corrupted}` }));
    out.push(facts("Overview", [
      ["Type", t.tableType], ["Owner", t.owner], ["Comment", params.get("comment")],
      ["Format", format(t, spark)], ["Created", epoch(t.createTime)], ["Last access", epoch(t.lastAccessTime)],
      ["Last DDL time", epoch(params.get("transient_lastDdlTime"))],
      ["Provider", spark.sparkTable ? spark.provider : undefined],
      ["Created by Spark", spark.sparkTable ? spark.createVersion : undefined],
    ]));
    const columns = spark.schema.filter((c) => !spark.partitionColumns.includes(c.name));
    const partitionColumns = spark.schema.filter((c) => spark.partitionColumns.includes(c.name));
    const caption = spark.restoredSchema ? "Columns (as Spark sees them, from spark.sql.sources.schema)" : "Columns";
    out.push(section("Columns", "columns-heading",
      table(caption, ["Name", "Type", "Comment"].concat(spark.restoredSchema ? ["Nullable"] : []),
        columns.map((c) => [c.name, c.type, c.comment].concat(spark.restoredSchema ? [c.nullable ? "yes" : "no"] : [])),
        { id: "columns" }),
      spark.restoredSchema && spark.dataSource
        ? table("Columns as stored in the metastore", ["Name", "Type", "Comment"],
          (sd.cols || []).map((c) => [c.name, c.type, c.comment]), { id: "hms-columns" })
        : null));
    try {
      const r = await loadRestrictions(db, name);
      if (r.policy && (r["row-filter"] || r.masks.length || !r.complete)) out.push(restrictionsSection(r));
    } catch (e) { // fail visibly: the user must not think nothing applies
      out.push(el("p", { class: "warning", id: "restrictions-error", text: `Row filter and masks not shown: ${e.message}` }));
    }
    if (partitionColumns.length) {
      out.push(section("Partition keys", "partition-keys-heading",
        table("Partition keys", ["Name", "Type", "Comment"], partitionColumns.map((c) => [c.name, c.type, c.comment]),
          { id: "partition-keys" }),
        el("p", {}, link(hashOf("db", db, "table", name, "partitions", "1"), "Browse partitions"))));
    }
    const bucket = spark.bucketSpec || { numBuckets: sd.numBuckets, bucketColumns: sd.bucketCols || [],
      sortColumns: (sd.sortCols || []).map((o) => `${o.col} ${o.order === 0 ? "desc" : "asc"}`) };
    out.push(section("Storage", "storage-heading", facts("Storage", [
      ["Location", spark.location], ["InputFormat", sd.inputFormat], ["OutputFormat", sd.outputFormat],
      ["SerDe", serde.serializationLib], ["Compressed", sd.compressed === undefined ? undefined : sd.compressed ? "yes" : "no"],
      ["Buckets", bucket.numBuckets !== undefined && bucket.numBuckets >= 0 ? bucket.numBuckets : undefined],
      ["Bucket columns", bucket.bucketColumns.join(", ")], ["Sort columns", bucket.sortColumns.join(", ")],
    ].concat(mapRows(serde.parameters).map(([k, v]) => [`SerDe parameter ${k}`, v]))),
    ));
    const hiveStats = ["numFiles", "numRows", "totalSize", "rawDataSize", "numPartitions", "COLUMN_STATS_ACCURATE"]
      .filter((k) => params.has(k)).map((k) => [k, params.get(k)]);
    const stats = [];
    if (hiveStats.length) stats.push(facts("Hive statistics", hiveStats));
    if (spark.stats) {
      stats.push(facts("Spark statistics (spark.sql.statistics)", [["Size in bytes", spark.stats.sizeInBytes],
        ["Row count", spark.stats.rowCount]]));
      const keys = ["distinctCount", "min", "max", "nullCount", "avgLen", "maxLen", "version"];
      if (spark.stats.colStats.size) {
        stats.push(table("Spark column statistics", ["Column"].concat(keys),
          [...spark.stats.colStats].map(([col, s]) => [col].concat(keys.map((k) => s.get(k)))), { id: "column-stats" }));
      }
    }
    if (stats.length) out.push(section("Statistics", "statistics-heading", ...stats));
    if (ICEBERG_URL && text(params.get("table_type")).toLowerCase() === "iceberg") {
      try {
        out.push(...icebergSections(await loadIceberg(db, name)));
      } catch (e) { // the Hive view stays useful: say why the Iceberg one is missing
        out.push(el("p", { class: "warning", id: "iceberg-error", text: `Iceberg metadata not shown: ${e.message}` }));
      }
    }
    out.push(section("Parameters", "parameters-heading",
      table("Table parameters", ["Key", "Value"], mapRows(params), { id: "parameters" })));
    if (t.viewOriginalText || t.viewExpandedText) {
      out.push(section("View text", "view-heading",
        el("h3", { text: "Original" }), el("pre", { id: "view-original", text: t.viewOriginalText }),
        el("h3", { text: "Expanded" }), el("pre", { id: "view-expanded", text: t.viewExpandedText })));
    }
    return out;
  }

  // Partition names of the table being browsed, kept while paging through it; the table last
  // shown (its partition keys name the partitions), so its partitions need no second get_table.
  let partitionCache = { key: null, names: null, keys: null };
  let tableCache = { key: null, table: null };

  async function partitionsView(db, name, pageText) {
    setCrumbs([["Databases", "#/"], [db, hashOf("db", db)], [name, hashOf("db", db, "table", name)],
      ["Partitions", hashOf("db", db, "table", name, "partitions", "1")]]);
    const key = `${db}\u0000${name}`;
    const requested = Math.max(1, Number.parseInt(pageText, 10) || 1);
    let names, keys, allNames = null; // allNames: every name, still to come
    if (partitionCache.key === key) {
      ({ names, keys } = partitionCache);
    } else {
      const args = { db_name: db, tbl_name: name };
      const table = tableCache.key === key ? Promise.resolve(tableCache.table) : call("get_table", { dbname: db, tbl_name: name });
      // Page 1 does not wait for every name: HMS returns names sorted, so the first page is
      // the first PAGE_SIZE of them; the whole list (about 1 MB of TJSON for 50,000 names) is
      // asked for once that page is on screen, for the count and the other pages.
      const first = call("get_partition_names", { ...args, max_parts: requested === 1 ? PAGE_SIZE : -1 });
      const [t, firstNames] = await Promise.all([table, first]);
      keys = t.partitionKeys || [];
      names = firstNames;
      if (requested === 1) {
        allNames = new Promise((resolve) => setTimeout(resolve, 0))
          .then(() => call("get_partition_names", { ...args, max_parts: -1 }))
          .then((every) => { partitionCache = { key, names: every, keys }; return every; });
      } else {
        partitionCache = { key, names, keys };
      }
    }
    const page = allNames ? 1 : Math.min(requested, Math.max(1, Math.ceil(names.length / PAGE_SIZE)));
    const shown = names.slice((page - 1) * PAGE_SIZE, page * PAGE_SIZE);
    const cells = new Map();
    const rows = shown.map((n) => {
      const detail = ["location", "created", "files", "size"].map(() => el("td", { text: "…" }));
      cells.set(n, detail);
      return el("tr", {}, el("th", { scope: "row", text: n }), ...detail);
    });
    const goTo = (p) => () => { location.hash = hashOf("db", db, "table", name, "partitions", String(p)); };
    const previous = el("button", { type: "button", id: "previous-page", disabled: true, onclick: goTo(page - 1), text: "Previous page" });
    const next = el("button", { type: "button", id: "next-page", disabled: true, onclick: goTo(page + 1), text: "Next page" });
    const label = el("span", { id: "page-label", text: ` Page ${page} ` });
    const count = el("p", { id: "partition-count", text: "Counting partitions…" });
    const caption = el("caption", { text: `Partitions ${shown.length ? (page - 1) * PAGE_SIZE + 1 : 0}–${(page - 1) * PAGE_SIZE + shown.length}` });
    const paging = (total) => {
      const pages = Math.max(1, Math.ceil(total / PAGE_SIZE));
      previous.disabled = page <= 1;
      next.disabled = page >= pages;
      label.textContent = ` Page ${page} of ${pages} `;
      count.textContent = `${total} partitions`;
      caption.textContent += ` of ${total}`;
    };
    const content = [
      heading(`Partitions of ${db}.${name}`),
      count,
      el("nav", { "aria-label": "Partition pages", class: "pager" }, previous, label, next),
      el("table", { id: "partitions" }, caption,
        el("thead", {}, el("tr", {}, ...["Partition", "Location", "Created", "Files", "Size (bytes)"]
          .map((h) => el("th", { scope: "col", text: h })))), el("tbody", {}, ...rows)),
    ];
    if (allNames) {
      const waiting = generation;
      allNames.then((every) => { if (waiting === generation) paging(every.length); }, showError);
    } else {
      paging(names.length);
    }
    // Details on demand, once the names are on screen.
    const mine = generation;
    const details = shown.length ? call("get_partitions_by_names", { db_name: db, tbl_name: name, names: shown }) : Promise.resolve([]);
    details.then((parts) => {
      if (mine !== generation) return;
      for (const p of parts) {
        const detail = cells.get(partName(keys, p.values || []));
        if (!detail) continue;
        const params = p.parameters || new Map();
        const values = [p.sd && p.sd.location, epoch(p.createTime), params.get("numFiles"), params.get("totalSize")];
        detail.forEach((td, i) => { td.textContent = text(values[i]); });
      }
      for (const detail of cells.values()) detail.forEach((td) => { if (td.textContent === "…") td.textContent = ""; });
      document.getElementById("partitions").setAttribute("data-details", "loaded");
    }, showError);
    return content;
  }

  // ---- routing ----

  function showError(e) {
    let message = e && e.message ? e.message : String(e);
    if (e instanceof HmsTjson.DeclaredException) message = `${e.exceptionName}: ${message}`;
    else if (e instanceof HmsTjson.ApplicationException) message = `The gateway refused the call: ${message}`;
    else if (e instanceof HttpError && e.status === 401) message = "Not signed in (401): reload the page to sign in again.";
    errorBox.replaceChildren(el("p", { text: message }));
  }

  async function route(event, refresh) {
    const hash = location.hash;
    if (hash && !hash.startsWith("#/")) return; // in-page anchors such as the skip link
    const parts = hash.slice(2).split("/").filter((p) => p !== "").map(decodeURIComponent);
    const mine = ++generation;
    errorBox.replaceChildren();
    status.textContent = "Loading…";
    view.setAttribute("aria-busy", "true");
    try {
      if (!codec) await loadCodec();
      let content;
      if (parts.length === 0) content = await databasesView();
      else if (parts[0] === "db" && parts.length === 2) content = await databaseView(parts[1]);
      else if (parts[0] === "db" && parts[2] === "table" && parts.length === 4) content = await tableView(parts[1], parts[3]);
      else if (parts[0] === "db" && parts[2] === "table" && parts[4] === "partitions") content = await partitionsView(parts[1], parts[3], parts[5]);
      else content = [heading("Not found"), el("p", {}, link("#/", "Back to the databases"))];
      if (mine !== generation) return;
      view.replaceChildren(...content);
      status.textContent = "";
      const h1 = view.querySelector("h1");
      if (h1 && !refresh) h1.focus(); // a new page, not a live refresh: move focus (keyboard, readers)
    } catch (e) {
      if (mine !== generation) return;
      view.replaceChildren();
      status.textContent = "";
      showError(e);
    } finally {
      if (mine === generation) view.removeAttribute("aria-busy");
    }
  }

  // ---- live panel: the topology's change feed (event-stream service, Server-Sent Events) ----

  const MAX_CHANGES = 30;
  const DATABASE_EVENTS = new Set(["CREATE_DATABASE", "DROP_DATABASE", "ALTER_DATABASE"]);
  let refreshTimer = null;

  // Does the change touch what the open page shows? Names compare case-insensitively (HMS).
  function shows(change) {
    const parts = location.hash.slice(2).split("/").filter((p) => p !== "").map(decodeURIComponent);
    const same = (a, b) => typeof a === "string" && typeof b === "string" && a.toLowerCase() === b.toLowerCase();
    if (parts.length === 0) return DATABASE_EVENTS.has(change.eventType);
    if (!same(change.db, parts[1])) return false;
    return parts.length === 2 || same(change.table, parts[3]);
  }

  function followChanges(url) {
    const panel = document.getElementById("changes-panel");
    const list = document.getElementById("changes");
    const state = document.getElementById("changes-state");
    panel.hidden = false;
    state.textContent = "Connecting…";
    const source = new EventSource(url);
    source.onopen = () => { state.textContent = "Following the metastore's changes."; };
    source.onerror = () => { state.textContent = "Change feed interrupted; reconnecting…"; };
    source.addEventListener("resync", () => { state.textContent = "Changes were missed; reload the page."; });
    source.onmessage = (message) => {
      let change;
      try {
        change = JSON.parse(message.data);
      } catch (e) {
        return;
      }
      const when = epoch(change.timestamp || change.eventTime);
      const object = [change.db, change.table].filter((x) => typeof x === "string" && x !== "").join(".");
      const href = change.table ? hashOf("db", change.db, "table", change.table) : change.db ? hashOf("db", change.db) : "#/";
      list.prepend(el("li", {}, el("span", { class: "when", text: when }), " ",
        el("span", { class: "type", text: text(change.eventType) }), " ", object ? link(href, object) : ""));
      while (list.children.length > MAX_CHANGES) list.lastElementChild.remove();
      if (shows(change)) { // the open page shows this object: show it anew, once the burst is over
        clearTimeout(refreshTimer);
        refreshTimer = setTimeout(() => { partitionCache = tableCache = { key: null }; route(null, true); }, 300);
      }
    };
  }

  document.getElementById("topology").textContent = `Topology ${meta("topology")}`;
  window.addEventListener("hashchange", route);
  route();
  if (meta("events-url")) followChanges(meta("events-url"));
})();
