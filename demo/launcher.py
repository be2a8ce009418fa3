"""``python -m demo``: embedded HMS, development certificates, gateway, then through the gateway
the demo's Iceberg table (PyIceberg) and the PySpark sample catalog."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import textwrap
import threading
import time
from pathlib import Path

from gateway.certs import write_dev_certificates
from gateway.config import GatewayConfig, load_gateway_config, load_topologies
from demo.aws_keys import CREDENTIALS_FILE, demo_aws_credentials
from demo.engines import engine_snippets
from demo.glue import boto3_program, glue_url
from demo.s3 import BUCKET
from demo.tokens import demo_signing_key

log = logging.getLogger(__name__)

#: The demo pipeline's account and service (demo only: config/users.htpasswd, the default topology).
PIPELINE_USER, PIPELINE_PASSWORD = "etl", "etl-password"
PIPELINE_SERVICE = "hive/spark-rw"
#: The default topology's ``iceberg-rest`` service (config/topologies/default.yaml).
ICEBERG_SERVICE = "iceberg"
#: Where ``--storage s3`` puts the demo's Iceberg namespace (demo/s3.py's bucket).
S3_LOCATION = f"s3://{BUCKET}/lakehouse"


def iceberg_url(port: int) -> str:
    """The demo's Iceberg REST catalog URL (PyIceberg's ``uri``)."""
    return f"https://localhost:{port}/gateway/default/{ICEBERG_SERVICE}"


def _banner(port: int, mgmt_port: int, ca: Path, audit: Path | None = None, storage: str | None = None,
            aws_credentials: Path = Path("var/demo") / CREDENTIALS_FILE, metastore: str | None = None) -> str:
    url = f"https://localhost:{port}/gateway/default/hmshttpthrift/api/hms"
    return f"""
HMS Gateway demo is up (Ctrl-C stops the gateway and the embedded Hive Metastore).

  endpoint     {url}
  explorer     https://localhost:{port}/gateway/catalog/explorer   (in a browser, same credentials)
  iceberg      {iceberg_url(port)}   (Iceberg REST catalog, docs/iceberg.md)
  credentials  admin / admin-password   (demo only: config/users.htpasswd)
  pipeline     etl / etl-password on /gateway/default/hive/spark-rw: the demo's PySpark job runs
               through hms-gateway-tunnel (docs/spark.md)
  CA           {ca}
  audit log    {audit or "stderr"}   (one JSON line per request; the text log stays on stderr)
{storage or ""}
  curl -sk -u admin:admin-password -H 'Content-Type: application/vnd.apache.thrift.json' \\
       --data '[1,"get_all_databases",1,1,{{}}]' {url}

  curl -sk -u admin:admin-password --data \\
       '[1,"get_partition_names",1,2,{{"1":{{"str":"hmshttptestdatabase"}},"2":{{"str":"test_table"}},"3":{{"i16":-1}}}}]' \\
       {url}

  curl -s http://localhost:{mgmt_port}/metrics | grep hms_gateway_requests_total

  Iceberg engines (docs/iceberg.md, "Quick start"): OAuth2 client credentials etl / etl-password

{textwrap.indent(engine_snippets(iceberg_url(port), _shown_path(ca), s3=storage is not None), "    ")}
  Glue (docs/glue.md): boto3 signs with SigV4, with the demo's access keys (profiles admin and
  etl in {_shown_path(aws_credentials)}); a program, run from the repository with .venv/bin/python:

{textwrap.indent(boto3_program(glue_url(port), _shown_path(ca), _shown_path(aws_credentials)), "    ")}
  change feed (docs/change-feed.md): follow catalog changes as Server-Sent Events, from event 0
  curl -N -sk -u admin:admin-password -H 'Accept: text/event-stream' \\
       'https://localhost:{port}/gateway/default/events?after=0'

{metastore or _PLAIN_METASTORE}"""

_PLAIN_METASTORE = """\
  The embedded Hive Metastore listens on port 9083 of every interface without authentication
  (Hive 2.3 has no bind-address setting): firewall it on a shared machine.
"""


def run_demo(config_path: Path, *, workdir: Path, hms_port: int = 9083, storage: str = "file",
             kerberos: bool = False) -> int:
    """Run the whole demo in the foreground; returns the process exit code. ``storage``: where
    the Iceberg table's files go, ``file`` (the HMS warehouse under ``workdir``) or ``s3`` (a
    local S3 server, :func:`_s3_storage`). ``kerberos``: the metastore Kerberized and the
    gateway its proxy user (:func:`_kerberized`)."""
    from demo.hms import EmbeddedHMS
    from gateway.server import Gateway, run

    config = load_gateway_config(config_path)
    if not (config.tls.certificate.exists() and config.tls.private_key.exists()):
        write_dev_certificates(config.tls.certificate.parent)
    workdir = workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    demo_signing_key(workdir)  # before the topologies are read: their gateway-token provider needs it
    aws_credentials = demo_aws_credentials(workdir)  # and the glue topology's sigv4 provider these
    config = with_audit_file(config, workdir / "audit.log")
    with contextlib.ExitStack() as stack:
        hms = EmbeddedHMS(workdir / "hms", hms_port)
        s3 = None
        if storage == "s3":
            config, hms, s3 = _s3_storage(config, workdir / "s3", hms_port, stack)
        metastore_lines = None
        if kerberos:
            config, metastore_lines = _kerberized(config, hms, workdir / "kerberos", stack)
        topologies = load_topologies(config.topologies_dir)
        print(f"starting the embedded Hive Metastore on port {hms_port} (about 20 s) ...", flush=True)
        hms_started = time.monotonic()
        stack.enter_context(hms)
        print(f"Hive Metastore listening on port {hms_port} after {time.monotonic() - hms_started:.0f} s "
              f"(log {hms.log_path})", flush=True)
        ca = config.tls.certificate.parent / "ca.crt"
        storage_line = None if s3 is None else _s3_banner_line(s3, workdir / "s3")

        def started(gw) -> None:
            print(_banner(gw.gateway_port, gw.management_port, ca, config.audit.path, storage_line, aws_credentials,
                          metastore_lines),
                  flush=True)
            # The pipeline is a client of the gateway like any other: it runs beside the server.
            def pipelines() -> None:
                _iceberg_through_gateway(gw.gateway_port, ca, workdir / "pipeline.log",
                                         None if s3 is None else S3_LOCATION)
                _pipeline_through_gateway(gw.gateway_port, ca, hms.warehouse_dir, workdir / "pipeline.log")

            threading.Thread(target=pipelines, name="demo-pipeline", daemon=True).start()

        run(Gateway(config, topologies), started)
    return 0


def _s3_storage(config: GatewayConfig, s3_dir: Path, hms_port: int, stack: contextlib.ExitStack):
    """``--storage s3``: start the local S3 server (stopped by ``stack``), write the gateway's key
    to ``s3_dir/gateway-s3.ini`` (mode 0600; never printed) and the topologies with ``options.s3``
    to ``s3_dir/topologies``. Returns the gateway configuration serving those, a fresh HMS under
    ``s3_dir/hms`` that takes ``s3://`` locations (the server starts empty, so a catalog kept
    from an earlier run would point at files that are gone), and the server."""
    from demo.hms import EmbeddedHMS
    from demo.s3 import REGION, s3_topologies, start_s3

    hms = EmbeddedHMS(s3_dir / "hms", hms_port, site={"fs.s3.impl": "io.hmsgateway.metastore.ObjectStorePaths"})
    hms.reset()  # refuses while an earlier demo's metastore still runs there
    print("starting the local S3 server (moto, IAM authentication on) ...", flush=True)
    s3 = start_s3(s3_dir / "moto.log")
    stack.callback(s3.stop)
    key_file = s3.credentials_file(s3_dir / "gateway-s3.ini")
    options = {"endpoint": s3.endpoint, "region": REGION, "credentials_file": str(key_file), "role_arn": s3.role_arn}
    topologies_dir = s3_topologies(config.topologies_dir, s3_dir / "topologies", options)
    return config.model_copy(update={"topologies_dir": topologies_dir}), hms, s3


def _kerberized(config: GatewayConfig, hms, directory: Path, stack: contextlib.ExitStack):
    """``--kerberos``: start a KDC (stopped by ``stack``) with HMS's and the gateway's keytabs in
    ``directory/keytabs``, Kerberize ``hms`` (not started yet: SASL on, the gateway its proxy
    user), point this process's Kerberos library at the realm (``KRB5_CONFIG``) and write the
    topologies with ``upstream.sasl`` to ``directory/topologies``. Returns the gateway
    configuration serving those and the banner's lines about the metastore."""
    from demo.kerberos import GATEWAY_PRINCIPAL, SERVICE_PRINCIPAL, kerberos_topologies, start_kerberos

    print("starting the local KDC (realm GATEWAY.TEST) ...", flush=True)
    setup = start_kerberos(directory / "keytabs")
    stack.callback(setup.stop)
    hms.kerberos = setup.hms_settings()
    os.environ["KRB5_CONFIG"] = str(setup.realm.krb5_conf)
    topologies_dir = kerberos_topologies(config.topologies_dir, directory / "topologies", setup.gateway_sasl())
    lines = (f"""\
  The embedded Hive Metastore on port {hms.port} is Kerberized (SASL, realm GATEWAY.TEST, krb5.conf
  {setup.realm.krb5_conf}): HMS is {SERVICE_PRINCIPAL}, the gateway {GATEWAY_PRINCIPAL}
  (keytab {setup.gateway_keytab}), a Hadoop proxy user that asks a delegation token for each end
  user; a call without Kerberos is refused. HMS's log, with its audit lines (ugi=etl, ugi=admin):
  {hms.log_path}
    grep -a 'HiveMetaStore.audit' {_shown_path(hms.log_path)} | tail
""")
    return config.model_copy(update={"topologies_dir": topologies_dir}), lines


def _s3_banner_line(s3, s3_dir: Path) -> str:
    return (f"  storage      {S3_LOCATION} on the local S3 server {s3.endpoint} (moto, IAM on;\n"
            f"               log {s3_dir / 'moto.log'}); the gateway's key is in {s3_dir / 'gateway-s3.ini'},\n"
            f"               clients get credentials the gateway vends (docs/iceberg.md)\n")


def with_audit_file(config: GatewayConfig, path: Path) -> GatewayConfig:
    """``config`` with its audit log written to ``path`` when the gateway file names no file
    (the demo keeps the audit lines apart from the text log on the terminal)."""
    if not config.audit.enabled or config.audit.path is not None:
        return config
    return config.model_copy(update={"audit": config.audit.model_copy(update={"path": path})})


def _iceberg_through_gateway(port: int, ca: Path, log_path: Path, location: str | None = None) -> None:
    """Write the demo's Iceberg table through the ``iceberg-rest`` service as user ``etl``
    (PyIceberg ``RestCatalog``, in a child process; the namespace at ``location`` when given,
    an ``s3://`` one), then print the program that reads it back.
    A failure is printed, never raised (the gateway stays up)."""
    from demo.iceberg import BATCHES, NAMESPACE, TABLE, read_back_snippet, write_demo_table_in_subprocess

    url = iceberg_url(port)
    where = f" at {location}" if location else ""
    print(f"demo iceberg: PyIceberg RestCatalog as user {PIPELINE_USER} -> {url}: namespace {NAMESPACE}{where}, "
          f"table {NAMESPACE}.{TABLE}, {len(BATCHES)} appends ...", flush=True)
    started = time.monotonic()
    try:
        result = write_demo_table_in_subprocess(url, ca, PIPELINE_USER, PIPELINE_PASSWORD, location=location,
                                                log_path=log_path)
    except (RuntimeError, OSError, ValueError) as exc:  # the child failed, did not start, or answered nonsense
        print(f"demo iceberg failed: {exc}", flush=True)
        return
    done = (f"created, {result['appended']} appends" if result["created"] else
            f"already there, {result['appended']} appends added")
    files = (" The data files are read from S3 with credentials the gateway vends for the table."
             if location else "")
    print(f"demo iceberg: {result['table']} {done}, {result['snapshots']} snapshots, in "
          f"{time.monotonic() - started:.0f} s.{files} Read it back (from the repository, with .venv/bin/python):\n\n"
          + textwrap.indent(read_back_snippet(url, _shown_path(ca), vended=bool(location)), "    "), flush=True)


def _shown_path(path: Path) -> str:
    """``path`` relative to the working directory when it lies below it (as the docs print it)."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _pipeline_through_gateway(port: int, ca: Path, warehouse_dir: Path, log_path: Path) -> None:
    """Run the demo pipeline (PySpark, in a child process) as user ``etl``: Spark's Hive client
    → an in-process ``hms-gateway-tunnel`` → the gateway's ``hive/spark-rw`` service → HMS.
    Prints progress; a failure is printed with the log's tail, never raised (the gateway stays up)."""
    from hms_gateway_client.auth import BasicAuth
    from demo.seed_job import run_seed_job_in_subprocess
    from hms_gateway_client.tunnel import Tunnel, TunnelSettings, spark_setting

    url = f"https://localhost:{port}/gateway/default/{PIPELINE_SERVICE}"
    loop = asyncio.new_event_loop()
    tunnel = Tunnel(TunnelSettings(url, BasicAuth(PIPELINE_USER, PIPELINE_PASSWORD), ca=str(ca), port=0))
    loop.run_until_complete(tunnel.start())
    thread = threading.Thread(target=loop.run_forever, name="demo-tunnel", daemon=True)
    thread.start()
    print(f"demo pipeline: PySpark as user {PIPELINE_USER} through hms-gateway-tunnel "
          f"({spark_setting('127.0.0.1', tunnel.port)}) -> {url}; log {log_path}", flush=True)
    started = time.monotonic()
    try:
        # In a child process: Spark's JVM must not live as long as the gateway.
        run_seed_job_in_subprocess(f"thrift://127.0.0.1:{tunnel.port}", warehouse_dir, log_path=log_path)
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
