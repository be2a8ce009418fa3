"""PySpark job that fills a Hive Metastore with the MS-HMSHTTP sample catalog plus realistic objects.

Objects (all ``IF NOT EXISTS`` / ``OVERWRITE``, so a second run against the same metastore is harmless):

- ``hmshttptestdatabase.test_table (name string, age int) PARTITIONED BY (hair_color string)``,
  the spec's sample (MS-HMSHTTP §3.1.5.6: SequenceFile + LazySimpleSerDe, comment
  ``Table Comment``, property ``status=staging``), with partitions ``hair_color=black|brown``;
- ``hmshttptestdatabase.web_logs``: EXTERNAL text table located in ``<warehouse>/external/web_logs``;
- ``hmshttptestdatabase.test_table_adults``: a VIRTUAL_VIEW over test_table;
- ``hmshttptestdatabase.events``: Parquet table partitioned by ``dt`` with ``many_partitions``
  partitions (one per day from 2020-01-01), added in bulk over Thrift ``add_partitions_req``;
- ``sales.orders`` (Spark data-source Parquet table, decimal/date columns) and ``sales.customers`` (ORC).

Spark talks to the given metastore over Thrift (``spark.hadoop.hive.metastore.uris``); it never
boots a Derby metastore of its own. Usage::

    python -m demo.seed_job --metastore-uri thrift://127.0.0.1:9083 --warehouse var/demo/warehouse
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from demo import child_env, module_command
from demo.metastore_client import CATALOG_MARKER, add_partitions, catalog_exists

__all__ = ["SAMPLE_DB", "SAMPLE_TABLE", "MANY_PARTITIONS_TABLE", "catalog_exists", "run_seed_job", "run_seed_job_in_subprocess", "main"]

log = logging.getLogger(__name__)

SAMPLE_DB = "hmshttptestdatabase"
SAMPLE_TABLE = "test_table"
MANY_PARTITIONS_TABLE = "events"
_FIRST_DAY = dt.date(2020, 1, 1)
_SPARK_LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
logger.hive.name = org.apache.hadoop.hive
logger.hive.level = error
logger.nativecode.name = org.apache.hadoop.util.NativeCodeLoader
logger.nativecode.level = error
"""


def _spark_session(metastore_uri: str, warehouse_dir: Path, scratch: Path):
    from pyspark.sql import SparkSession

    # Python workers (if any) must be this interpreter, not whatever `python3` is on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # The driver only talks to itself and to the metastore: no need to resolve the host name.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    log4j = scratch / "log4j2.properties"
    log4j.write_text(_SPARK_LOG4J2)
    java_opts = f"-Dderby.system.home={scratch} -Dlog4j2.configurationFile={log4j.as_uri()} -XX:+UseSerialGC"
    builder = (
        SparkSession.builder.appName("hms-gateway-demo-pipeline")
        .master("local[2]")
        .config("spark.driver.memory", "768m")
        .config("spark.driver.extraJavaOptions", java_opts)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.warehouse.dir", warehouse_dir.as_uri())
        .config("spark.hadoop.hive.metastore.uris", metastore_uri)
        .config("spark.hadoop.hive.exec.scratchdir", str(scratch / "hive-scratch"))
        .config("spark.hadoop.hive.exec.local.scratchdir", str(scratch / "hive-local"))
        .config("spark.hadoop.hive.exec.dynamic.partition.mode", "nonstrict")
        .enableHiveSupport()
    )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _sql_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _statements(warehouse_dir: Path) -> list[str]:
    external = _sql_string((warehouse_dir / "external" / "web_logs").as_uri())
    return [
        f"CREATE DATABASE IF NOT EXISTS {SAMPLE_DB} COMMENT 'MS-HMSHTTP sample database'",
        f"""CREATE TABLE IF NOT EXISTS {SAMPLE_DB}.{SAMPLE_TABLE} (name STRING, age INT)
            COMMENT 'Table Comment' PARTITIONED BY (hair_color STRING)
            STORED AS SEQUENCEFILE TBLPROPERTIES ('status'='staging')""",
        f"""INSERT OVERWRITE TABLE {SAMPLE_DB}.{SAMPLE_TABLE} PARTITION (hair_color='black')
            VALUES ('alice', 31), ('bob', 42)""",
        f"INSERT OVERWRITE TABLE {SAMPLE_DB}.{SAMPLE_TABLE} PARTITION (hair_color='brown') VALUES ('carol', 17)",
        f"""CREATE EXTERNAL TABLE IF NOT EXISTS {SAMPLE_DB}.web_logs (ts TIMESTAMP, url STRING, status INT)
            COMMENT 'external text table' ROW FORMAT DELIMITED FIELDS TERMINATED BY '\\t'
            STORED AS TEXTFILE LOCATION {external}""",
        f"""INSERT OVERWRITE TABLE {SAMPLE_DB}.web_logs VALUES
            (TIMESTAMP '2024-05-01 10:00:00', '/index.html', 200),
            (TIMESTAMP '2024-05-01 10:00:05', '/missing', 404)""",
        f"""CREATE OR REPLACE VIEW {SAMPLE_DB}.test_table_adults COMMENT 'adults only' AS
            SELECT name, age, hair_color FROM {SAMPLE_DB}.{SAMPLE_TABLE} WHERE age >= 18""",
        f"""CREATE TABLE IF NOT EXISTS {SAMPLE_DB}.{MANY_PARTITIONS_TABLE} (event_id BIGINT, kind STRING)
            PARTITIONED BY (dt STRING) STORED AS PARQUET""",
        "CREATE DATABASE IF NOT EXISTS sales COMMENT 'second database'",
        """CREATE TABLE IF NOT EXISTS sales.orders
            (order_id BIGINT, customer STRING, amount DECIMAL(10,2), order_date DATE) USING parquet""",
        """INSERT OVERWRITE TABLE sales.orders VALUES
            (1, 'acme', 120.50, DATE '2024-05-01'), (2, 'globex', 99.99, DATE '2024-05-02')""",
        """CREATE TABLE IF NOT EXISTS sales.customers (customer STRING, country STRING, since DATE)
            STORED AS ORC""",
        "INSERT OVERWRITE TABLE sales.customers VALUES ('acme', 'US', DATE '2019-03-01')",
    ]


def run_seed_job(metastore_uri: str, warehouse_dir: Path, *, many_partitions: int = 200) -> None:
    """Create the demo catalog in the metastore at ``metastore_uri`` (``thrift://host:port``).

    ``warehouse_dir`` must be the metastore's ``hive.metastore.warehouse.dir`` (a local path).
    The catalog-complete marker (see ``catalog_exists``) is written last. Runs Spark in this
    process (sets ``PYSPARK_PYTHON``/``SPARK_LOCAL_IP`` if unset; the py4j JVM stays until the
    process exits): a long-lived caller wants ``run_seed_job_in_subprocess``. Raises whatever PySpark
    raises (``pyspark.errors.AnalysisException`` and friends) or thriftpy2's errors from the bulk
    partition step.
    """
    warehouse_dir = Path(warehouse_dir).resolve()
    warehouse_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="hms-demo-spark-") as tmp:
        spark = _spark_session(metastore_uri, warehouse_dir, Path(tmp))
        try:
            for statement in _statements(warehouse_dir):
                spark.sql(statement)
            days = (_FIRST_DAY + dt.timedelta(days=i) for i in range(many_partitions))
            # The pipeline shares the metastore's filesystem: making the directories here spares
            # HMS a chmod process per partition (Hadoop without its native library).
            added = add_partitions(metastore_uri, SAMPLE_DB, MANY_PARTITIONS_TABLE,
                                   ([d.isoformat()] for d in days), make_local_dirs=True)
            log.info("added %d partitions to %s.%s", added, SAMPLE_DB, MANY_PARTITIONS_TABLE)
            db, key, value = CATALOG_MARKER
            spark.sql(f"ALTER DATABASE {db} SET DBPROPERTIES ('{key}'='{value}')")
        finally:
            spark.stop()
    log.info("demo catalog written in %.1f s", time.monotonic() - started)


def run_seed_job_in_subprocess(
    metastore_uri: str, warehouse_dir: Path, *, many_partitions: int = 200, log_path: Path | None = None,
    timeout: float = 600,
) -> None:
    """Run ``python -m demo.seed_job`` in a child process (same interpreter), so the Spark
    JVM (about 0.8 GB) exits with it instead of living on in the caller.

    ``timeout`` in seconds. Output goes to ``log_path`` (appended) or is inherited. Raises
    RuntimeError (with the log tail when there is a log) if the job fails or times out.
    """
    cmd = module_command("demo.seed_job", "--metastore-uri", metastore_uri,
                         "--warehouse", str(Path(warehouse_dir).resolve()), "--many-partitions", str(many_partitions))
    env = child_env()
    out = open(log_path, "ab") if log_path else None
    try:
        proc = subprocess.run(cmd, env=env, stdout=out, stderr=subprocess.STDOUT if out else None, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"demo pipeline did not finish in {timeout:.0f} s") from exc
    finally:
        if out:
            out.close()
    if proc.returncode != 0:
        tail = ""
        if log_path:
            tail = "\n" + "\n".join(Path(log_path).read_text(errors="replace").splitlines()[-30:])
        raise RuntimeError(f"demo pipeline failed with exit code {proc.returncode}{tail}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m demo.seed_job", description=__doc__.splitlines()[0])
    parser.add_argument("--metastore-uri", required=True, help="thrift://host:port of the Hive Metastore")
    parser.add_argument("--warehouse", required=True, type=Path, help="the metastore's warehouse directory")
    parser.add_argument("--many-partitions", type=int, default=200, help="partitions of the events table (default %(default)s)")
    parser.add_argument("--skip-if-exists", action="store_true", help="do nothing if the catalog is complete")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.skip_if_exists and catalog_exists(args.metastore_uri):
        log.info("demo catalog already present in %s", args.metastore_uri)
        return 0
    run_seed_job(args.metastore_uri, args.warehouse, many_partitions=args.many_partitions)
    return 0


if __name__ == "__main__":
    sys.exit(main())
