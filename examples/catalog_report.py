"""Catalog report through the gateway: a PySpark job on the ``hms`` data source.

Writes four Parquet data sets under ``--out``:

- ``tables_per_database``: database, tables (count);
- ``partition_counts``: database, table, partitions (partitioned tables only);
- ``tables_without_statistics``: database, table, table_type, owner (tables, not views, with no
  row count in their parameters: neither Hive's ``numRows`` nor Spark's
  ``spark.sql.statistics.numRows``);
- ``owners``: owner, tables (count), databases (sorted list).

It needs the client distribution with its Spark extra (``pip install './clients/python[spark]'``;
``make install`` installs it). Run (the password is read from the environment variable named,
never given on the command line):

    HMS_PASSWORD=… python examples/catalog_report.py \\
        --url https://localhost:8443/gateway/default/hms --ca certs/ca.crt \\
        --auth basic --user alice --password-env HMS_PASSWORD --out var/catalog-report

The service must expose the spec's nine read methods; ``get_table_objects_by_name`` too makes
the crawl one call per batch of tables instead of one per table.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

#: command-line flag → data source option (the tunnel's flags)
_AUTH_FLAGS = ("auth", "user", "password_env", "password_file", "netrc", "token_env", "token_file",
               "cert", "key", "service")


def build_report(spark: SparkSession, options: dict[str, str]) -> dict[str, DataFrame]:
    """The report's four DataFrames (name → DataFrame) from the ``hms`` data source with
    ``options`` (see :mod:`hms_gateway_client.datasource`). One crawl of ``tables``, cached."""
    from hms_gateway_client.datasource import register

    register(spark)
    tables = spark.read.format("hms").options(**options).load("tables").cache()
    return {
        "tables_per_database": tables.groupBy("database").agg(F.count("*").alias("tables")),
        "partition_counts": tables.where(F.col("num_partitions").isNotNull())
        .select("database", "table", F.col("num_partitions").alias("partitions")),
        "tables_without_statistics": tables.where(~F.col("has_statistics") & (F.col("table_type") != "VIRTUAL_VIEW"))
        .select("database", "table", "table_type", "owner"),
        "owners": tables.groupBy("owner").agg(
            F.count("*").alias("tables"), F.array_sort(F.collect_set("database")).alias("databases")),
    }


def write_report(spark: SparkSession, options: dict[str, str], out: Path) -> dict[str, str]:
    """Write :func:`build_report`'s DataFrames as Parquet under ``out`` (overwritten); returns
    name → directory."""
    written = {}
    for name, df in build_report(spark, options).items():
        path = str(Path(out) / name)
        df.coalesce(1).write.mode("overwrite").parquet(path)
        written[name] = path
    return written


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", required=True, help="https://host:port/gateway/<topology>/<service path>")
    p.add_argument("--ca", help="PEM bundle to verify the gateway with (default: system store)")
    p.add_argument("--out", type=Path, default=Path("var/catalog-report"))
    p.add_argument("--master", default="local[2]")
    p.add_argument("--batch-size", default="100", help="tables per get_table_objects_by_name call")
    for flag in _AUTH_FLAGS:
        p.add_argument("--" + flag.replace("_", "-"))
    args = p.parse_args(argv)
    options = {"url": args.url, "batch_size": args.batch_size}
    if args.ca:
        options["ca"] = args.ca
    options.update({f: getattr(args, f) for f in _AUTH_FLAGS if getattr(args, f)})
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = SparkSession.builder.appName("catalog-report").master(args.master).getOrCreate()
    try:
        for name, path in write_report(spark, options, args.out).items():
            print(f"{name}: {path}")
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
