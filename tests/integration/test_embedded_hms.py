"""The embedded Hive Metastore and the demo pipeline, checked through Apache Thrift's own client."""

from __future__ import annotations

import datetime as dt
import os
import signal
import socket
from pathlib import Path

import pytest

from demo.hms import EmbeddedHMS, HMSStartError, PortInUseError, probe_get_all_databases
from demo.metastore_client import add_partitions, catalog_exists
from demo.seed_job import MANY_PARTITIONS_TABLE, SAMPLE_DB, SAMPLE_TABLE, run_seed_job_in_subprocess
from tests.support.hms import SAMPLE_MANY_PARTITIONS
from tests.support.ports import reserve_port
from tests.support.thrift_gen import hive_metastore_client, hive_metastore_modules

pytestmark = pytest.mark.integration


def _process_gone(pid: int) -> bool:
    try:
        os.killpg(pid, 0)  # the JVM leads its own process group
    except ProcessLookupError:
        return True
    return False


def test_databases_of_the_pipeline_are_listed(direct):
    assert {"default", SAMPLE_DB, "sales"} <= set(direct.get_all_databases())


def test_sample_table_partitions_match_the_spec(direct, hms):
    assert direct.get_partition_names(SAMPLE_DB, SAMPLE_TABLE, -1) == ["hair_color=black", "hair_color=brown"]
    for part in direct.get_partitions(SAMPLE_DB, SAMPLE_TABLE, -1):
        location = Path(part.sd.location.removeprefix("file:"))
        assert location.parent.parent == hms.warehouse_dir / f"{SAMPLE_DB}.db"
        assert any(p.stat().st_size > 0 for p in location.iterdir() if not p.name.startswith((".", "_")))


def test_sample_table_is_a_spark_written_hive_table(direct):
    table = direct.get_table(SAMPLE_DB, SAMPLE_TABLE)
    assert table.tableType == "MANAGED_TABLE"
    assert [(c.name, c.type) for c in table.sd.cols] == [("name", "string"), ("age", "int")]
    assert [(c.name, c.type) for c in table.partitionKeys] == [("hair_color", "string")]
    assert table.sd.inputFormat == "org.apache.hadoop.mapred.SequenceFileInputFormat"
    assert table.sd.serdeInfo.serializationLib == "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe"
    params = table.parameters
    assert params["comment"] == "Table Comment" and params["status"] == "staging"
    assert "spark.sql.create.version" in params
    spark_schema = [k for k in params if k.startswith("spark.sql.sources.schema")]
    assert spark_schema, sorted(params)


def test_many_partitions_table_has_every_day(direct):
    names = direct.get_partition_names(SAMPLE_DB, MANY_PARTITIONS_TABLE, -1)
    first = dt.date(2020, 1, 1)
    expected = [f"dt={first + dt.timedelta(days=i)}" for i in range(SAMPLE_MANY_PARTITIONS)]
    assert sorted(names) == expected


def test_view_and_external_table(direct, hms):
    view = direct.get_table(SAMPLE_DB, "test_table_adults")
    assert view.tableType == "VIRTUAL_VIEW"
    assert "age >= 18" in view.viewOriginalText
    external = direct.get_table(SAMPLE_DB, "web_logs")
    assert external.tableType == "EXTERNAL_TABLE"
    assert external.sd.location.removeprefix("file:") == str(hms.warehouse_dir / "external" / "web_logs")


def test_second_database_holds_a_spark_datasource_table(direct):
    assert sorted(direct.get_all_tables("sales")) == ["customers", "orders"]
    orders = direct.get_table("sales", "orders")
    assert orders.parameters["spark.sql.sources.provider"] == "parquet"


def test_missing_table_raises_the_declared_exception(direct):
    _, ttypes = hive_metastore_modules()
    with pytest.raises(ttypes.NoSuchObjectException):
        direct.get_table(SAMPLE_DB, "no_such_table")


def test_catalog_marker_and_bulk_add_partitions_are_idempotent(hms):
    assert catalog_exists(hms.uri)
    days = [[f"2020-01-0{i}"] for i in range(1, 4)]  # all already present
    assert add_partitions(hms.uri, SAMPLE_DB, MANY_PARTITIONS_TABLE, days) == 0


def test_pipeline_runs_twice(hms, direct, tmp_path):
    before = {db: sorted(direct.get_all_tables(db)) for db in (SAMPLE_DB, "sales")}
    run_seed_job_in_subprocess(hms.uri, hms.warehouse_dir, many_partitions=SAMPLE_MANY_PARTITIONS,
                               log_path=tmp_path / "pipeline.log")
    after = {db: sorted(direct.get_all_tables(db)) for db in (SAMPLE_DB, "sales")}
    assert after == before
    assert direct.get_partition_names(SAMPLE_DB, SAMPLE_TABLE, -1) == ["hair_color=black", "hair_color=brown"]
    assert len(direct.get_partition_names(SAMPLE_DB, MANY_PARTITIONS_TABLE, -1)) == SAMPLE_MANY_PARTITIONS


def test_framed_metastore_speaks_framed_only_and_stop_kills_it(hms_factory):
    framed = hms_factory(framed=True)
    client, transport = hive_metastore_client(framed.host, framed.port, framed=True)
    try:
        assert "default" in client.get_all_databases()
    finally:
        transport.close()
    with pytest.raises((OSError, ValueError)):
        probe_get_all_databases(framed.host, framed.port, framed=False, timeout=10)
    assert not catalog_exists(framed.uri, framed=True)  # thriftpy2 over TFramedTransport

    pid = framed.server.pid
    framed.server.stop()
    assert _process_gone(pid)
    assert not framed.server.running
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((framed.host, framed.port), timeout=5).close()


def test_derby_looks_for_a_deadlock_after_one_second_not_twenty(hms):
    """HMS's concurrent drops and listings deadlock in Derby's row locks; the JVM carries
    DERBY_PROPERTIES, so the demo's HMS stalls about 1 s on such a deadlock, not 20 s."""
    cmdline = Path(f"/proc/{hms.server.pid}/cmdline").read_bytes().split(b"\0")
    assert b"-Dderby.locks.deadlockTimeout=1" in cmdline


def test_restart_after_a_killed_run_reuses_the_derby_database(hms_factory, tmp_path):
    first = hms_factory()
    assert not catalog_exists(first.uri)
    client, transport = hive_metastore_client(first.host, first.port)
    try:
        _, ttypes = hive_metastore_modules()
        client.create_database(ttypes.Database(name="survivor", description="", parameters={}))
    finally:
        transport.close()
    pid = first.server.pid
    os.killpg(pid, signal.SIGKILL)  # leaves Derby's db.lck behind, as a crashed demo would
    first.server.stop()
    assert (first.server.metastore_db / "db.lck").exists()

    again = EmbeddedHMS(first.server.workdir, reserve_port())
    with again:
        client, transport = hive_metastore_client(again.host, again.port)
        try:
            assert "survivor" in client.get_all_databases()
        finally:
            transport.close()
    assert not again.running


def test_start_on_a_port_in_use_fails_clearly(tmp_path):
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        server = EmbeddedHMS(tmp_path / "hms", port)
        with pytest.raises(PortInUseError, match=f"port {port} is already in use"):
            server.start()
        assert not server.running


def test_second_metastore_on_a_busy_workdir_is_refused(hms):
    clash = EmbeddedHMS(hms.server.workdir, reserve_port())
    with pytest.raises(HMSStartError, match="in use by another process"):
        clash.start()
    assert not clash.running
    assert hms.server.running


def test_missing_java_names_the_install_script(tmp_path):
    with pytest.raises(RuntimeError, match="install-system-deps.sh"):
        EmbeddedHMS(tmp_path, reserve_port(), java=str(tmp_path / "no-java")).start()
