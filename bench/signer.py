"""Storage access of the ``iceberg-rest`` kind (issue 23): what remote signing costs against
vended credentials. Alone: ``python bench/signer.py [--files N] [--signs N] [--scans N]``.

Starts a real S3/STS/IAM server (moto in server mode, IAM authentication on,
tests/support/s3.py), a Hive Metastore that takes ``s3://`` locations, and the real gateway
(HTTPS, Basic, one ``iceberg-rest`` service with ``options.s3``). PyIceberg 0.12 in this
process is the client.

* the signer's answer time: ``--signs`` sequential ``POST .../s3-sign`` of a GET under the table
  on one kept-alive HTTPS connection (``requests``), median and 95th percentile; interleaved
  with the same through a second service with the metadata cache on (the table's location
  from memory instead of HMS's ``get_table``);
* a full scan (``load_table`` + ``scan().to_arrow()``) of a table of ``--files`` data files
  (one row each, added with ``add_files``), median of ``--scans`` per mode, interleaved:
  ``vended-credentials`` (PyArrow's S3 FileIO, the client signs) against ``remote-signing``
  (fsspec/s3fs FileIO, each S3 request signed by the gateway); the number of signing requests
  one scan made is read from ``hms_gateway_s3_signings_total``.

Prints the figures and the load average.
"""

from __future__ import annotations

import argparse
import base64
import io
import logging
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.clients import PASSWORD, USER  # noqa: E402
from bench.harness import Bench, load, machine  # noqa: E402

NAMESPACE, TABLE, PATH, CACHED = "bench", "scan200", "iceberg", "iceberg-cached"


def _signings(gw) -> float:
    import urllib.request

    text = urllib.request.urlopen(gw.management_url + "/metrics", timeout=10).read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("hms_gateway_s3_signings_total{") and 'decision="allowed"' in line)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--signs", type=int, default=500)
    parser.add_argument("--scans", type=int, default=5)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    import pyarrow as pa
    import pyarrow.parquet as pq
    import requests
    from pyiceberg.catalog.rest import RestCatalog
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField

    from tests.support.gateway import in_workdir
    from tests.support.hms import start_hms
    from tests.support.s3 import BUCKET, REGION, start_s3

    with Bench("signer", hms=False) as bench:
        bench.say("starting the S3 server and HMS")
        s3 = start_s3(bench.work / "moto.log")
        bench.callback(s3.stop)
        hms = start_hms(bench.work / "hms", short_lived=False,
                        site={"fs.s3.impl": "io.hmsgateway.metastore.ObjectStorePaths"})
        bench.callback(hms.server.stop)
        key = f"[default]\naws_access_key_id = {s3.access_key}\naws_secret_access_key = {s3.secret_key}\n"
        options = {"s3": {"endpoint": s3.endpoint, "region": REGION, "credentials_file": in_workdir("s3.ini"),
                          "role_arn": s3.role_arn}}
        service = {"path": PATH, "kind": "iceberg-rest", "upstream": {"urls": [hms.uri]}, "options": options}
        # the same service with the metadata cache: the signer's get_table from memory
        gw = bench.gateway(services=[service, {**service, "path": CACHED,
                                               "options": {**options, "cache": {"enabled": True}}}],
                           files={"s3.ini": key})
        os.environ["REQUESTS_CA_BUNDLE"] = str(gw.ca_file)  # PyIceberg's signer session trusts it so

        def catalog(delegation: str) -> RestCatalog:
            return RestCatalog(f"bench-{delegation}", **{
                "uri": gw.url(path=PATH), "header.X-Iceberg-Access-Delegation": delegation,
                "auth": {"type": "basic", "basic": {"username": USER, "password": PASSWORD}}})

        vended = catalog("vended-credentials")
        vended.create_namespace(NAMESPACE, {"location": f"s3://{BUCKET}/{NAMESPACE}"})
        table = vended.create_table(f"{NAMESPACE}.{TABLE}", schema=Schema(NestedField(1, "id", LongType(), required=False)))
        bench.say(f"writing {args.files} data files")
        client, paths = s3.client("s3"), []
        for i in range(args.files):
            buffer = io.BytesIO()
            pq.write_table(pa.table({"id": pa.array([i], pa.int64())}), buffer)
            key_name = f"{NAMESPACE}/{TABLE}/data/f{i:04d}.parquet"
            client.put_object(Bucket=BUCKET, Key=key_name, Body=buffer.getvalue())
            paths.append(f"s3://{BUCKET}/{key_name}")
        table.add_files(paths)

        # the signer alone
        session = requests.Session()
        session.headers["Authorization"] = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
        body = {"method": "GET", "region": REGION, "headers": {"User-Agent": ["bench"]},
                "uri": f"{s3.endpoint}/{BUCKET}/{NAMESPACE}/{TABLE}/data/f0000.parquet"}
        urls = {path: f"{gw.url(path=path)}/v1/namespaces/{NAMESPACE}/tables/{TABLE}/s3-sign"
                for path in (PATH, CACHED)}
        for _ in range(20):
            for url in urls.values():
                session.post(url, json=body).raise_for_status()
        times: dict[str, list[float]] = {PATH: [], CACHED: []}
        for _ in range(args.signs):  # interleaved: both see the same load
            for path, url in urls.items():
                started = time.perf_counter()
                session.post(url, json=body).raise_for_status()
                times[path].append(time.perf_counter() - started)
        signer = {path: (statistics.median(v) * 1000, sorted(v)[int(len(v) * 0.95)] * 1000)
                  for path, v in times.items()}

        # scans, interleaved
        signing = catalog("remote-signing")
        scans: dict[str, list[float]] = {"vended-credentials": [], "remote-signing": []}
        per_scan = 0.0
        for round_ in range(args.scans + 1):
            for mode, cat in (("vended-credentials", vended), ("remote-signing", signing)):
                before = _signings(gw)
                started = time.perf_counter()
                rows = cat.load_table(f"{NAMESPACE}.{TABLE}").scan().to_arrow().num_rows
                elapsed = time.perf_counter() - started
                assert rows == args.files, rows
                if round_:  # the first round warms both up
                    scans[mode].append(elapsed)
                if mode == "remote-signing":
                    per_scan = _signings(gw) - before

    print(f"machine: {machine()}; load {load()}")
    for path, label in ((PATH, "signer answer"), (CACHED, "signer answer, metadata cache on")):
        median, p95 = signer[path]
        print(f"{label}: median {median:.2f} ms, p95 {p95:.2f} ms ({args.signs} sequential, keep-alive)")
    for mode, values in scans.items():
        print(f"scan of {args.files} files, {mode}: median {statistics.median(values):.2f} s "
              f"({', '.join(f'{v:.2f}' for v in values)})")
    print(f"signing requests per remote-signing scan: {per_scan:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
