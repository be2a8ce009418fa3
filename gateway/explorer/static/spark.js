/*
 * Tables as Spark sees them. Spark SQL stores a data-source table's real schema, partitioning,
 * bucketing and statistics in Hive table properties (spark.sql.sources.*, spark.sql.statistics.*)
 * and leaves HMS a placeholder column `col array<string>` when the schema is not Hive
 * compatible. This restores them as Spark's HiveExternalCatalog does (restoreTableMetadata,
 * restoreDataSourceTable, restoreHiveSerdeTable, statsFromProperties; the seed 001_…).
 *
 * Input: a decoded Thrift Table (tjson.js: parameters and serde parameters are Maps).
 */
(function (root, factory) {
  if (typeof module === "object" && module.exports) module.exports = factory();
  else root.SparkMeta = factory();
})(typeof self !== "undefined" ? self : this, function () {
  "use strict";

  const DATASOURCE_PROVIDER = "spark.sql.sources.provider";
  const DATASOURCE_SCHEMA = "spark.sql.sources.schema";
  const STATISTICS_PREFIX = "spark.sql.statistics.";
  const COL_STATS_PREFIX = STATISTICS_PREFIX + "colStats.";
  const CREATED_SPARK_VERSION = "spark.sql.create.version";
  const CHAR_VARCHAR_TYPE_STRING = "__CHAR_VARCHAR_TYPE_STRING";
  const SIMPLE_NAMES = { integer: "int", long: "bigint", short: "smallint", byte: "tinyint" };

  class CorruptedMetadata extends Error {}

  /** CatalogTable.readLargeTableProp: one property, or numParts + part.0 … part.n-1. */
  function readLargeProp(props, key) {
    if (props.has(key)) return props.get(key);
    if (![...props.keys()].some((k) => k.startsWith(key))) return undefined;
    const numParts = props.get(`${key}.numParts`);
    if (numParts === undefined) {
      throw new CorruptedMetadata(`cannot read table property '${key}': '${key}.numParts' is missing`);
    }
    const parts = [];
    for (let i = 0; i < Number(numParts); i++) {
      const part = props.get(`${key}.part.${i}`);
      if (part === undefined) throw new CorruptedMetadata(`${numParts} parts of '${key}' expected, part ${i} is missing`);
      parts.push(part);
    }
    return parts.join("");
  }

  /** HiveExternalCatalog.getColumnNamesByType: spark.sql.sources.schema.num<Type>Cols + <type>Col.i */
  function columnNames(props, type) {
    const count = props.get(`${DATASOURCE_SCHEMA}.num${type[0].toUpperCase()}${type.slice(1)}Cols`);
    const names = [];
    for (let i = 0; count !== undefined && i < Number(count); i++) {
      const name = props.get(`${DATASOURCE_SCHEMA}.${type}Col.${i}`);
      if (name === undefined) throw new CorruptedMetadata(`${count} ${type} columns expected, ${type}Col.${i} is missing`);
      names.push(name);
    }
    return names;
  }

  /** A Spark DataType (its JSON form) as a catalog string: int, decimal(10,2), array<string>… */
  function typeString(type) {
    if (typeof type === "string") return SIMPLE_NAMES[type] || type;
    switch (type.type) {
      case "array": return `array<${typeString(type.elementType)}>`;
      case "map": return `map<${typeString(type.keyType)},${typeString(type.valueType)}>`;
      case "struct": return `struct<${type.fields.map((f) => `${f.name}:${fieldType(f)}`).join(",")}>`;
      case "udt": return typeString(type.sqlType);
      default: return JSON.stringify(type);
    }
  }

  // CharVarcharUtils.getRawSchema: a char/varchar column keeps its declared type in metadata.
  function fieldType(field) {
    const raw = field.metadata && field.metadata[CHAR_VARCHAR_TYPE_STRING];
    return typeof raw === "string" ? raw : typeString(field.type);
  }

  function schemaFromProps(props) {
    const json = readLargeProp(props, DATASOURCE_SCHEMA);
    if (json === undefined) return null;
    let parsed;
    try {
      parsed = JSON.parse(json);
    } catch (e) {
      throw new CorruptedMetadata(`'${DATASOURCE_SCHEMA}' is not JSON: ${e.message}`);
    }
    if (!parsed || parsed.type !== "struct" || !Array.isArray(parsed.fields)) {
      throw new CorruptedMetadata(`'${DATASOURCE_SCHEMA}' is not a struct type`);
    }
    return parsed.fields.map((f) => ({
      name: f.name,
      type: fieldType(f),
      nullable: f.nullable !== false,
      comment: f.metadata && typeof f.metadata.comment === "string" ? f.metadata.comment : "",
    }));
  }

  // reorderSchema: partition columns go last, in partition order.
  function reorder(schema, partColumns) {
    const partFields = partColumns.map((name) => {
      const found = schema.find((f) => f.name === name);
      if (!found) throw new CorruptedMetadata(`partition column ${name} is not in the schema`);
      return found;
    });
    return schema.filter((f) => !partFields.includes(f)).concat(partFields);
  }

  /** statsFromProperties: sizeInBytes, rowCount and per-column stats, or null without any. */
  function statsFromProps(props) {
    const keys = [...props.keys()];
    if (!keys.some((k) => k.startsWith(STATISTICS_PREFIX))) return null;
    const colStats = new Map();
    for (const key of keys) {
      if (key.startsWith(COL_STATS_PREFIX) && key.endsWith(".version")) {
        const column = key.slice(COL_STATS_PREFIX.length, -".version".length);
        const stat = new Map();
        for (const k of keys) {
          if (k.startsWith(`${COL_STATS_PREFIX}${column}.`)) stat.set(k.slice(COL_STATS_PREFIX.length + column.length + 1), props.get(k));
        }
        colStats.set(column, stat);
      }
    }
    return {
      sizeInBytes: props.get(STATISTICS_PREFIX + "totalSize"),
      rowCount: props.get(STATISTICS_PREFIX + "numRows"),
      colStats,
    };
  }

  function hiveColumns(cols) {
    return (cols || []).map((c) => ({ name: c.name, type: c.type, nullable: true, comment: c.comment || "" }));
  }

  const sameIgnoringCase = (a, b) => a.length === b.length &&
    a.every((f, i) => f.name.toLowerCase() === b[i].name.toLowerCase() && f.type.toLowerCase() === b[i].type.toLowerCase());

  /**
   * The table as Spark sees it: {provider, dataSource, restoredSchema (bool), schema,
   * partitionColumns, bucketSpec, location, stats, createVersion, properties (without
   * spark.sql.*)}. Throws CorruptedMetadata where Spark would (an AnalysisException there).
   */
  function restore(table) {
    const props = table.parameters || new Map();
    const sd = table.sd || {};
    const hiveSchema = hiveColumns(sd.cols).concat(hiveColumns(table.partitionKeys));
    const hivePartitionColumns = (table.partitionKeys || []).map((c) => c.name);
    const provider = props.get(DATASOURCE_PROVIDER);
    const out = {
      provider: provider || "hive",
      dataSource: provider !== undefined && provider.toLowerCase() !== "hive",
      restoredSchema: false,
      schema: hiveSchema,
      partitionColumns: hivePartitionColumns,
      bucketSpec: null,
      location: sd.location || "",
      stats: null,
      createVersion: props.get(CREATED_SPARK_VERSION) || "2.2 or prior",
      properties: new Map([...props].filter(([k]) => !k.startsWith("spark.sql."))),
      sparkTable: provider !== undefined || [...props.keys()].some((k) => k.startsWith("spark.sql.")),
    };
    const bucketSpec = () => {
      const numBuckets = props.get(`${DATASOURCE_SCHEMA}.numBuckets`);
      return numBuckets === undefined ? null
        : { numBuckets: Number(numBuckets), bucketColumns: columnNames(props, "bucket"), sortColumns: columnNames(props, "sort") };
    };
    const fromProps = schemaFromProps(props);
    if (table.tableType === "VIRTUAL_VIEW" && provider === undefined) {
      if (fromProps) Object.assign(out, { schema: fromProps, restoredSchema: true });
    } else if (!out.dataSource) { // restoreHiveSerdeTable
      if (fromProps) {
        const partColumns = columnNames(props, "part");
        const reordered = reorder(fromProps, partColumns);
        if (sameIgnoringCase(reordered, hiveSchema)) {
          Object.assign(out, { schema: reordered, partitionColumns: partColumns, bucketSpec: bucketSpec(), restoredSchema: true });
        }
      }
    } else { // restoreDataSourceTable: location from the "path" storage property
      const serde = (sd.serdeInfo && sd.serdeInfo.parameters) || new Map();
      const path = [...serde].find(([k]) => k.toLowerCase() === "path");
      const partColumns = columnNames(props, "part");
      Object.assign(out, {
        schema: reorder(fromProps || [], partColumns),
        partitionColumns: partColumns,
        bucketSpec: bucketSpec(),
        location: path ? path[1] : "",
        restoredSchema: true,
      });
      const ddl = "transient_lastDdlTime"; // HIVE_GENERATED_TABLE_PROPERTIES
      out.properties.delete(ddl);
    }
    out.stats = statsFromProps(props);
    return out;
  }

  return { restore, readLargeProp, typeString, CorruptedMetadata };
});
