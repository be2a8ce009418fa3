"""``hms-gateway demo``: embedded HMS, development certificates, gateway, then through the gateway
the demo's Iceberg table (PyIceberg) and the PySpark sample catalog."""

from __future__ import annotations

import asyncio
import logging
import textwrap
import threading
import time
from pathlib import Path

from gateway.certs import write_dev_certificates
from gateway.config import GatewayConfig, load_gateway_config, load_topologies

log = logging.getLogger(__name__)

#: The demo pipeline's account and service (demo only: config/users.htpasswd, the default topology).
PIPELINE_USER, PIPELINE_PASSWORD = "etl", "etl-password"
PIPELINE_SERVICE = "hive/spark-rw"
#: The default topology's ``iceberg-rest`` service (config/topologies/default.yaml).
ICEBERG_SERVICE = "iceberg"


def iceberg_url(port: int) -> str:
    """The demo's Iceberg REST catalog URL (PyIceberg's ``uri``)."""
    return f"https://localhost:{port}/gateway/default/{ICEBERG_SERVICE}"


def _banner(port: int, mgmt_port: int, ca: Path, audit: Path | None = None) -> str:
    url = f"https://localhost:{port}/gateway/default/hmshttpthrift/api/hms"
    return f"""
HMS Gateway demo is up (Ctrl-C stops the gateway and the embedded Hive Metastore).

  endpoint     {url}
  explorer     https://localhost:{port}/gateway/catalog/explorer   (in a browser, same credentials)
  iceberg      {iceberg_url(port)}   (Iceberg REST catalog, docs/iceberg.md)
  credentials  admin / admin-password   (demo only: config/users.htpasswd)
  pipeline     etl / etl-password on /gateway/default/hive/spark-rw: the demo's PySpark job runs
               through hms-gateway tunnel (docs/spark.md)
  CA           {ca}
  audit log    {audit or "stderr"}   (one JSON line per request; the text log stays on stderr)

  curl -sk -u admin:admin-password -H 'Content-Type: application/vnd.apache.thrift.json' \\
       --data '[1,"get_all_databases",1,1,{{}}]' {url}

  curl -sk -u admin:admin-password --data \\
       '[1,"get_partition_names",1,2,{{"1":{{"str":"hmshttptestdatabase"}},"2":{{"str":"test_table"}},"3":{{"i16":-1}}}}]' \\
       {url}

  curl -s http://localhost:{mgmt_port}/metrics | grep hms_gateway_requests_total

  change feed (docs/change-feed.md): follow catalog changes as Server-Sent Events
  curl -N -sk -u admin:admin-password -H 'Accept: text/event-stream' \\
       https://localhost:{port}/gateway/default/events

  The embedded Hive Metastore listens on port 9083 of every interface without authentication
  (Hive 2.3 has no bind-address setting): firewall it on a shared machine.
"""


def run_demo(config_path: Path, *, workdir: Path, hms_port: int = 9083) -> int:
    """Run the whole demo in the foreground; returns the process exit code."""
    from gateway.demo.hms import EmbeddedHMS
    from gateway.server import Gateway, run

    config = load_gateway_config(config_path)
    if not (config.tls.certificate.exists() and config.tls.private_key.exists()):
        write_dev_certificates(config.tls.certificate.parent)
    topologies = load_topologies(config.topologies_dir)

    workdir = workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    config = with_audit_file(config, workdir / "audit.log")
    print(f"starting the embedded Hive Metastore on port {hms_port} (about 20 s) ...", flush=True)
    hms_started = time.monotonic()
    with EmbeddedHMS(workdir / "hms", hms_port) as hms:
        print(f"Hive Metastore listening on port {hms_port} after {time.monotonic() - hms_started:.0f} s "
              f"(log {hms.log_path})", flush=True)
        ca = config.tls.certificate.parent / "ca.crt"

        def started(gw) -> None:
            print(_banner(gw.gateway_port, gw.management_port, ca, config.audit.path), flush=True)
            # The pipeline is a client of the gateway like any other: it runs beside the server.
            def pipelines() -> None:
                _iceberg_through_gateway(gw.gateway_port, ca, workdir / "pipeline.log")
                _pipeline_through_gateway(gw.gateway_port, ca, hms.warehouse_dir, workdir / "pipeline.log")

            threading.Thread(target=pipelines, name="demo-pipeline", daemon=True).start()

        run(Gateway(config, topologies), started)
    return 0


def with_audit_file(config: GatewayConfig, path: Path) -> GatewayConfig:
    """``config`` with its audit log written to ``path`` when the gateway file names no file
    (the demo keeps the audit lines apart from the text log on the terminal)."""
    if not config.audit.enabled or config.audit.path is not None:
        return config
    return config.model_copy(update={"audit": config.audit.model_copy(update={"path": path})})


def _iceberg_through_gateway(port: int, ca: Path, log_path: Path) -> None:
    """Write the demo's Iceberg table through the ``iceberg-rest`` service as user ``etl``
    (PyIceberg ``RestCatalog``, in a child process), then print the program that reads it back.
    A failure is printed, never raised (the gateway stays up)."""
    from gateway.demo.iceberg import BATCHES, NAMESPACE, TABLE, read_back_snippet, write_demo_table_in_subprocess

    url = iceberg_url(port)
    print(f"demo iceberg: PyIceberg RestCatalog as user {PIPELINE_USER} -> {url}: namespace {NAMESPACE}, "
          f"table {NAMESPACE}.{TABLE}, {len(BATCHES)} appends ...", flush=True)
    started = time.monotonic()
    try:
        result = write_demo_table_in_subprocess(url, ca, PIPELINE_USER, PIPELINE_PASSWORD, log_path=log_path)
    except (RuntimeError, OSError, ValueError) as exc:  # the child failed, did not start, or answered nonsense
        print(f"demo iceberg failed: {exc}", flush=True)
        return
    done = (f"created, {result['appended']} appends" if result["created"] else
            f"already there, {result['appended']} appends added")
    print(f"demo iceberg: {result['table']} {done}, {result['snapshots']} snapshots, in "
          f"{time.monotonic() - started:.0f} s. Read it back (from the repository, with .venv/bin/python):\n\n"
          + textwrap.indent(read_back_snippet(url, _shown_path(ca)), "    "), flush=True)


def _shown_path(path: Path) -> str:
    """``path`` relative to the working directory when it lies below it (as the docs print it)."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _pipeline_through_gateway(port: int, ca: Path, warehouse_dir: Path, log_path: Path) -> None:
    """Run the demo pipeline (PySpark, in a child process) as user ``etl``: Spark's Hive client
    → an in-process ``hms-gateway tunnel`` → the gateway's ``hive/spark-rw`` service → HMS.
    Prints progress; a failure is printed with the log's tail, never raised (the gateway stays up)."""
    from gateway.client.auth import BasicAuth
    from gateway.demo.pipeline import run_pipeline_in_subprocess
    from gateway.tunnel import Tunnel, TunnelSettings, spark_setting

    url = f"https://localhost:{port}/gateway/default/{PIPELINE_SERVICE}"
    loop = asyncio.new_event_loop()
    tunnel = Tunnel(TunnelSettings(url, BasicAuth(PIPELINE_USER, PIPELINE_PASSWORD), ca=str(ca), port=0))
    loop.run_until_complete(tunnel.start())
    thread = threading.Thread(target=loop.run_forever, name="demo-tunnel", daemon=True)
    thread.start()
    print(f"demo pipeline: PySpark as user {PIPELINE_USER} through hms-gateway tunnel "
          f"({spark_setting('127.0.0.1', tunnel.port)}) -> {url}; log {log_path}", flush=True)
    started = time.monotonic()
    try:
        # In a child process: Spark's JVM must not live as long as the gateway.
        run_pipeline_in_subprocess(f"thrift://127.0.0.1:{tunnel.port}", warehouse_dir, log_path=log_path)
    except RuntimeError as exc:
        print(f"demo pipeline failed: {exc}", flush=True)
    else:
        print(f"demo pipeline: sample catalog written by {PIPELINE_USER} through the gateway in "
              f"{time.monotonic() - started:.0f} s", flush=True)
    finally:
        asyncio.run_coroutine_threadsafe(tunnel.close(), loop).result(60)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
