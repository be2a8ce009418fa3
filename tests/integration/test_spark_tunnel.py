"""PySpark through the gateway (issue 13 item 3): a real Spark session whose Hive client talks to
``thrift://127.0.0.1:<tunnel>``, the real ``hms-gateway-tunnel``, the real gateway serving the
shipped ``config/examples/spark.yaml`` services, and the session's real HMS with the demo catalog.

Reads run on the read-only service, writes on the read-write one, each in its own Spark process
(a Spark JVM keeps its metastore client for life). This file is also the Spark job those
processes run (``python tests/integration/test_spark_tunnel.py --job reads|writes ...``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "config" / "examples" / "spark.yaml"
USER, PASSWORD = "etl", "etl-password"
WRITE_DB = "sales"
CTAS, PARTED = "tunnel_ctas", "tunnel_parted"


# --- the Spark job (runs in a child process) -------------------------------------------------

def _rows(spark, sql: str) -> list[list]:
    return [list(r) for r in spark.sql(sql).collect()]


def _owner(spark, table: str) -> str:
    rows = _rows(spark, f"DESCRIBE TABLE EXTENDED {table}")
    return next(str(r[1]).strip() for r in rows if str(r[0]).strip() == "Owner")


def _reads(spark) -> dict:
    return {
        "databases": [r[0] for r in _rows(spark, "SHOW DATABASES")],
        "tables": [r[1] for r in _rows(spark, "SHOW TABLES IN hmshttptestdatabase")],
        "describe": [r[:2] for r in _rows(spark, "DESCRIBE hmshttptestdatabase.test_table")],
        "partitions": [r[0] for r in _rows(spark, "SHOW PARTITIONS hmshttptestdatabase.test_table")],
        "select": sorted(_rows(spark, "SELECT name, age, hair_color FROM hmshttptestdatabase.test_table")),
        "pruned": _rows(spark, "SELECT count(*) FROM hmshttptestdatabase.test_table WHERE hair_color = 'brown'"),
    }


def _writes(spark) -> dict:
    out: dict = {}
    spark.sql(f"CREATE TABLE {WRITE_DB}.{CTAS} STORED AS PARQUET AS "
              "SELECT name, age, hair_color FROM hmshttptestdatabase.test_table")
    spark.sql(f"CREATE TABLE {WRITE_DB}.{PARTED} (name STRING, age INT) PARTITIONED BY (p STRING) "
              "STORED AS SEQUENCEFILE")
    spark.sql(f"ALTER TABLE {WRITE_DB}.{PARTED} ADD PARTITION (p='added')")
    spark.sql(f"INSERT INTO {WRITE_DB}.{PARTED} PARTITION (p='inserted') VALUES ('dave', 50)")
    spark.sql(f"INSERT INTO {WRITE_DB}.{CTAS} VALUES ('erin', 29, 'red')")
    out["ctas_rows"] = sorted(_rows(spark, f"SELECT name FROM {WRITE_DB}.{CTAS}"))
    out["parted_partitions"] = [r[0] for r in _rows(spark, f"SHOW PARTITIONS {WRITE_DB}.{PARTED}")]
    out["parted_rows"] = _rows(spark, f"SELECT name, age, p FROM {WRITE_DB}.{PARTED}")
    out["owners"] = {t: _owner(spark, f"{WRITE_DB}.{t}") for t in (CTAS, PARTED)}
    spark.sql(f"ALTER TABLE {WRITE_DB}.{PARTED} DROP PARTITION (p='added')")
    out["after_drop_partition"] = [r[0] for r in _rows(spark, f"SHOW PARTITIONS {WRITE_DB}.{PARTED}")]
    spark.sql(f"DROP TABLE {WRITE_DB}.{CTAS}")
    spark.sql(f"DROP TABLE {WRITE_DB}.{PARTED}")
    out["tables_after"] = [r[1] for r in _rows(spark, f"SHOW TABLES IN {WRITE_DB}")]
    return out


def _refused_write(spark) -> str:
    try:
        spark.sql(f"CREATE TABLE {WRITE_DB}.never_created (a INT) STORED AS PARQUET")
    except Exception as exc:  # Spark wraps the Hive client's error
        return str(exc)[:2000]
    return ""


def job(argv: list[str]) -> int:
    from demo.seed_job import _spark_session

    parser = argparse.ArgumentParser()
    parser.add_argument("--job", choices=("reads", "writes"), required=True)
    parser.add_argument("--uri", required=True)
    parser.add_argument("--warehouse", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="spark-tunnel-") as tmp:
        spark = _spark_session(args.uri, args.warehouse, Path(tmp))
        try:
            result = _reads(spark) if args.job == "reads" else _writes(spark)
            if args.job == "reads":
                result["refused_write"] = _refused_write(spark)
        finally:
            spark.stop()
    args.out.write_text(json.dumps(result, default=str))
    return 0


# --- the tests --------------------------------------------------------------------------------

if __name__ != "__main__":
    import pytest
    import yaml

    from tests.support.gateway import USERS_FILE
    from tests.support.tunnel import start_tunnel

    pytestmark = [pytest.mark.integration, pytest.mark.long]

    @pytest.fixture(scope="module")
    def gateway(hms, module_gateway_factory):
        topology = yaml.safe_load(EXAMPLE.read_text())
        topology["providers"]["authentication"][0]["users_file"] = USERS_FILE
        for svc in topology["services"]:
            svc["upstream"]["urls"] = [f"thrift://127.0.0.1:{hms.port}"]
        return module_gateway_factory({"spark": topology}, {USER: PASSWORD}, audit={"path": "audit.jsonl"})

    def _run_job(gateway, hms, path: str, kind: str, tmp_path) -> tuple[dict, str]:
        tunnel = start_tunnel(gateway.url("spark", path),
                              ["--auth", "basic", "--user", USER, "--password-env", "SPARK_TUNNEL_PW"],
                              ca=gateway.ca_file, env={"SPARK_TUNNEL_PW": PASSWORD})
        out = tmp_path / f"{kind}.json"
        try:
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
            done = subprocess.run(
                [sys.executable, __file__, "--job", kind, "--uri", tunnel.uri,
                 "--warehouse", str(hms.warehouse_dir), "--out", str(out)],
                env=env, capture_output=True, text=True, timeout=900,
            )
            assert done.returncode == 0, done.stderr[-4000:] + tunnel.output()[-2000:]
        finally:
            tunnel.stop()
        return json.loads(out.read_text()), tunnel.output()

    def _audit_calls(gateway, service: str) -> set[tuple[str, str]]:
        """(method, outcome label) of every call the gateway saw on ``service``."""
        time.sleep(0.5)  # audit lines are written in batches
        records = (json.loads(line) for line in (gateway.workdir / "audit.jsonl").read_text().splitlines())
        return {(r["method"], r["detail"]) for r in records if r["service"] == service}

    def _not_exposed(calls: set[tuple[str, str]]) -> set[str]:
        # shutdown: the Hive client's oneway goodbye (fb303); nothing to forward.
        return {m for m, detail in calls if detail == "not_exposed"} - {"shutdown"}

    def test_spark_reads_on_the_read_only_service(gateway, hms, tmp_path):
        result, _ = _run_job(gateway, hms, "hive/spark-ro", "reads", tmp_path)
        assert {"default", "hmshttptestdatabase", "sales"} <= set(result["databases"])
        assert "test_table" in result["tables"]
        assert ["name", "string"] in result["describe"] and ["age", "int"] in result["describe"]
        assert result["partitions"] == ["hair_color=black", "hair_color=brown"]
        assert result["select"] == [["alice", 31, "black"], ["bob", 42, "black"], ["carol", 17, "brown"]]
        assert result["pruned"] == [[1]]
        # A write on the read-only service is refused before HMS, and Spark reports it.
        assert "create_table_with_environment_context is not exposed" in result["refused_write"]
        calls = _audit_calls(gateway, "hive/spark-ro")
        assert ("get_partitions_by_filter", "ok") in calls
        assert {m for m, _ in calls if m == "set_ugi"} == {"set_ugi"}
        assert _not_exposed(calls) == {"create_table_with_environment_context"}

    def test_spark_writes_on_the_read_write_service(gateway, hms, direct, tmp_path):
        result, _ = _run_job(gateway, hms, "hive/spark-rw", "writes", tmp_path)
        assert result["ctas_rows"] == [["alice"], ["bob"], ["carol"], ["erin"]]
        assert result["parted_partitions"] == ["p=added", "p=inserted"]
        assert result["parted_rows"] == [["dave", 50, "inserted"]]
        assert result["after_drop_partition"] == ["p=inserted"]
        # Objects are owned by the gateway user, and HMS itself acted as that user.
        assert result["owners"] == {CTAS: USER, PARTED: USER}
        log = hms.server.log_path.read_text(errors="replace")
        created = re.findall(r"HiveMetaStore\.audit: ugi=(\S+)\s.*create_table: Table\(tableName:"
                             rf"({CTAS}|{PARTED}), dbName:{WRITE_DB}, owner:(\S+),", log)
        assert {(ugi, table, owner) for ugi, table, owner in created} == {
            (USER, CTAS, USER), (USER, PARTED, USER)}
        assert CTAS not in result["tables_after"] and PARTED not in result["tables_after"]
        assert CTAS not in direct.get_all_tables(WRITE_DB)
        # The shipped read-write list covers every call these statements make.
        assert _not_exposed(_audit_calls(gateway, "hive/spark-rw")) == set()


if __name__ == "__main__":
    sys.exit(job(sys.argv[1:]))
