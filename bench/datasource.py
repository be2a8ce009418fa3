"""The PySpark data source against one process looping over the Python client (issue 13), and the
Python client's ``get_table`` against a direct call. Run by ``bench/run.py`` (``make bench``) or
alone: ``python bench/datasource.py [--tables 2000] [--runs 3]``.

Starts its own Hive Metastore (full JIT) with ``--tables`` tables (10 databases, one int column,
unpartitioned) and the real gateway (HTTPS, Basic). Then, medians of ``--runs``:

* the crawl of view ``tables`` by ``spark.read.format("hms")`` in ``local[2]`` (two executors;
  the data source's defaults: 4 input partitions of 500 tables, 2 calls in flight per
  partition, each over its own kept-alive HTTPS connection), after a warm-up read so that
  Python workers are running, rows collected to the driver; on a service with the spec's nine
  methods (one ``get_table`` per table) against one process looping over the Python client
  with ``get_table`` per table: the same calls, parallel or not (the target);
* interleaved with it, the data source with 1 and with 4 calls in flight per partition, and
  with the previous plan (one input partition per 100 tables, one call at a time: options
  ``partitions=20 threads=1``, which give exactly that plan for this catalog);
* for information, two plain processes each looping over half the tables (what two-way
  parallelism can gain on this machine at all, without Spark);
* for information, the same with ``get_table_objects_by_name`` exposed: the data source against
  ``hms_gateway_client.datasource.crawl`` in one process (one call per 100 tables, one after the other);
* ``get_table`` through the Python client (binary, kept alive) against thriftpy2 on a direct
  socket, interleaved call by call.

Prints the times and ratios; exits 1 when the data source is not faster than the one-process
loop (the target of issue 13).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import multiprocessing
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from thriftpy2.protocol import TBinaryProtocolFactory  # noqa: E402
from thriftpy2.rpc import make_client  # noqa: E402
from thriftpy2.transport import TBufferedTransportFactory  # noqa: E402

from hms_gateway_client import BasicAuth, connect, hive_metastore_idl  # noqa: E402
from gateway.hms_thrift.kind import SPEC_METHODS  # noqa: E402
from hms_gateway_client.datasource.crawl import plan, rows  # noqa: E402
from bench.clients import PASSWORD, USER  # noqa: E402
from bench.harness import Bench  # noqa: E402

DATABASES = 10
GET_TABLE_CALLS = 200


def direct_client(port: int):
    return make_client(hive_metastore_idl().ThriftHiveMetastore, "127.0.0.1", port,
                       proto_factory=TBinaryProtocolFactory(strict_read=True, strict_write=True),
                       trans_factory=TBufferedTransportFactory(), timeout=300_000)


def create_tables(port: int, count: int) -> None:
    """``count`` tables spread over :data:`DATABASES` databases, over two connections."""
    hms = hive_metastore_idl()

    def make(db_index: int) -> None:
        client = direct_client(port)
        db = f"crawl{db_index:02d}"
        try:
            client.create_database(hms.Database(name=db, description="crawl bench", parameters={}))
        except hms.AlreadyExistsException:
            pass
        for i in range(db_index, count, DATABASES):
            sd = hms.StorageDescriptor(
                cols=[hms.FieldSchema("x", "int", None)], location=None,
                inputFormat="org.apache.hadoop.mapred.TextInputFormat",
                outputFormat="org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
                serdeInfo=hms.SerDeInfo("s", "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe", {}),
                bucketCols=[], sortCols=[], parameters={}, numBuckets=-1, compressed=False)
            client.create_table(hms.Table(tableName=f"t{i:05d}", dbName=db, owner="bench", sd=sd,
                                          partitionKeys=[], parameters={}, tableType="MANAGED_TABLE"))
        client.close()

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(make, range(DATABASES)))


def direct_names(port: int, db: str | None = None) -> list[str]:
    """Databases (``db`` None) or ``db``'s tables, straight from HMS."""
    client = direct_client(port)
    try:
        return client.get_databases("*") if db is None else client.get_tables(db, "*")
    finally:
        client.close()


def get_tables(job: tuple[str, str, list[tuple[str, str]]]) -> int:
    """In a worker process: ``get_table`` for each (db, table) of ``job``, over one connection."""
    url, ca, names = job
    with connect(url, auth=BasicAuth(USER, PASSWORD), ca=ca) as client:
        return sum(1 for db, t in names if client.get_table(db, t))


def spark_session():
    from pyspark.sql import SparkSession

    from hms_gateway_client.datasource import register

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    spark = (SparkSession.builder.appName("bench-datasource").master("local[2]")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def timed(fn) -> tuple[float, object]:
    t0 = time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    opts = parser.parse_args(argv)
    with Bench("datasource") as bench:
        hms = bench.hms
        t0 = time.perf_counter()
        create_tables(hms.port, opts.tables)
        bench.say(f"{opts.tables} tables created in {time.perf_counter() - t0:.0f} s")
        gw = bench.gateway({
            "spec": {"services": [bench.service(timeout_seconds=300)]},
            "batched": {"services": [bench.service([*SPEC_METHODS, "get_table_objects_by_name"], timeout_seconds=300)]},
        })
        password_file = bench.work / "password"
        password_file.write_text(PASSWORD)
        auth = BasicAuth(USER, PASSWORD)
        spark = spark_session()
        bench.callback(spark.stop)

        def reader(topology: str, **extra: str):
            return spark.read.format("hms").options(
                url=gw.url(topology), ca=str(gw.ca_file), auth="basic", user=USER,
                password_file=str(password_file), batch_size="100", **extra)

        reader("spec").load("databases").collect()  # warm-up: Python workers and the JVM's code paths

        def crawl_spark(topology: str, **extra: str):
            return lambda: len(reader(topology, **extra).load("tables").collect())

        previous_plan = {"partitions": str(-(-opts.tables // 100)), "threads": "1"}

        def crawl_one_process() -> int:
            with connect(gw.url("batched"), auth=auth, ca=gw.ca_file) as client:
                return sum(len(list(rows(client, "tables", b))) for b in plan(client, "tables"))

        def get_table_loop() -> int:
            with connect(gw.url("spec"), auth=auth, ca=gw.ca_file) as client:
                return sum(1 for db in client.get_databases("*") for t in client.get_tables(db, "*")
                           if client.get_table(db, t))

        names = [(db, t) for db in direct_names(hms.port) for t in direct_names(hms.port, db)]

        def two_processes() -> int:
            # the ceiling of two-way parallelism here: no Spark, two plain client processes
            with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("fork")) as pool:
                return sum(pool.map(get_tables, [(gw.url("spec"), str(gw.ca_file), names[i::2]) for i in range(2)]))

        sides = {
            "data source, get_table per table": crawl_spark("spec"),
            "one process, get_table loop": get_table_loop,
            "data source, 1 call in flight": crawl_spark("spec", threads="1"),
            "data source, 4 calls in flight": crawl_spark("spec", threads="4"),
            "data source, previous plan": crawl_spark("spec", **previous_plan),
            "two processes, get_table loops": two_processes,
            "data source, batched": crawl_spark("batched"),
            "one process, batched crawl": crawl_one_process,
            "data source, batched, previous plan": crawl_spark("batched", **previous_plan),
        }
        results: dict[str, list[float]] = {name: [] for name in sides}
        for _ in range(opts.runs):
            for name, fn in sides.items():
                seconds, count = timed(fn)
                if count < opts.tables:
                    raise RuntimeError(f"{name}: saw {count} tables, expected at least {opts.tables}")
                results[name].append(seconds)
        medians = {k: statistics.median(v) for k, v in results.items()}
        print(f"crawl of {opts.tables} tables, view 'tables' (seconds, median of {opts.runs}, then the fastest):")
        for name, value in medians.items():
            print(f"  {name:40s} {value:7.2f} {min(results[name]):7.2f}", flush=True)

        direct = direct_client(hms.port)
        gd, gc = [], []
        with connect(gw.url("spec"), auth=auth, ca=gw.ca_file) as client:
            db, table = "crawl00", "t00000"
            direct.get_table(db, table), client.get_table(db, table)  # warm
            for _ in range(GET_TABLE_CALLS):
                gd.append(timed(lambda: direct.get_table(db, table))[0])
                gc.append(timed(lambda: client.get_table(db, table))[0])
        direct.close()
        d_ms, c_ms = statistics.median(gd) * 1000, statistics.median(gc) * 1000

    ratio = medians["one process, get_table loop"] / medians["data source, get_table per table"]
    batched = medians["one process, batched crawl"] / medians["data source, batched"]
    print(f"one process / data source: {ratio:.2f} with the same calls (get_table per table; target > 1), "
          f"{batched:.2f} batched (for information)")
    previous = medians["data source, previous plan"] / medians["data source, get_table per table"]
    print(f"data source, previous plan / now: {previous:.2f} (get_table per table), "
          f"{medians['data source, batched, previous plan'] / medians['data source, batched']:.2f} (batched)")
    ceiling = medians["one process, get_table loop"] / medians["two processes, get_table loops"]
    print(f"one process / two processes without Spark: {ceiling:.2f} (the most two-way parallelism gains here)")
    print(f"get_table: direct {d_ms:.2f} ms, Python client through the gateway {c_ms:.2f} ms, "
          f"ratio {c_ms / d_ms:.2f} (median of {GET_TABLE_CALLS}, for information)")
    ok = ratio > 1
    print(f"{'PASS' if ok else 'MISS'}  data source (local[2]) faster than one process looping over the Python client")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
