"""``hms-gateway demo``: embedded HMS, PySpark sample catalog, development certificates, gateway."""

from __future__ import annotations

import logging
from pathlib import Path

from gateway.certs import write_dev_certificates
from gateway.config import load_gateway_config, load_topologies

log = logging.getLogger(__name__)


def _banner(port: int, mgmt_port: int, ca: Path) -> str:
    url = f"https://localhost:{port}/gateway/default/hmshttpthrift/api/hms"
    return f"""
HMS Gateway demo is up (Ctrl-C stops the gateway and the embedded Hive Metastore).

  endpoint     {url}
  credentials  admin / admin-password   (demo only: config/users.htpasswd)
  CA           {ca}

  curl -sk -u admin:admin-password -H 'Content-Type: application/vnd.apache.thrift.json' \\
       --data '[1,"get_all_databases",1,1,{{}}]' {url}

  curl -sk -u admin:admin-password --data \\
       '[1,"get_partition_names",1,2,{{"1":{{"str":"hmshttptestdatabase"}},"2":{{"str":"test_table"}},"3":{{"i16":-1}}}}]' \\
       {url}

  curl -s http://localhost:{mgmt_port}/metrics | grep hms_gateway_requests_total

  The embedded Hive Metastore listens on port 9083 of every interface without authentication
  (Hive 2.3 has no bind-address setting): firewall it on a shared machine.
"""


def run_demo(config_path: Path, *, workdir: Path, hms_port: int = 9083) -> int:
    """Run the whole demo in the foreground; returns the process exit code."""
    from gateway.demo.hms import EmbeddedHMS
    from gateway.demo.pipeline import catalog_exists, run_pipeline_in_subprocess
    from gateway.server import Gateway, run

    config = load_gateway_config(config_path)
    if not (config.tls.certificate.exists() and config.tls.private_key.exists()):
        write_dev_certificates(config.tls.certificate.parent)
    topologies = load_topologies(config.topologies_dir)

    workdir = workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"starting the embedded Hive Metastore on port {hms_port} (about 20 s) ...", flush=True)
    with EmbeddedHMS(workdir / "hms", hms_port) as hms:
        if catalog_exists(hms.uri):
            print("sample catalog already present", flush=True)
        else:
            print("creating the sample catalog with PySpark (about 30 s) ...", flush=True)
            # In a child process: Spark's JVM must not live as long as the gateway.
            run_pipeline_in_subprocess(hms.uri, hms.warehouse_dir, log_path=workdir / "pipeline.log")
        ca = config.tls.certificate.parent / "ca.crt"
        run(Gateway(config, topologies),
            lambda gw: print(_banner(gw.gateway_port, gw.management_port, ca), flush=True))
    return 0
