"""``make run S3=1`` (issue 23): ``python -m demo --storage s3`` end to end, as the Makefile
runs it, with the repository's own config/ (copied: free ports instead of 8443, 9464 and 9083).

The demo starts a local S3 server (moto, IAM authentication on), a fresh HMS that takes
``s3://`` locations and the gateway with ``options.s3``, writes ``lakehouse.trips`` on S3
through the gateway as ``etl``, and prints a PyIceberg program. That program, run as printed
with no AWS setting at all, reads the table with the credentials the gateway vends; the files
are in the bucket and not on the local disk; the gateway's key is printed and logged nowhere.
The demo's PySpark pipeline, which starts after the Iceberg part, is not waited for."""

from __future__ import annotations

import configparser
import os
import re
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from demo.aws_keys import ACCESS_KEYS, CREDENTIALS_FILE
from demo.glue import boto3_program, glue_url
from demo.iceberg import read_back_snippet
from demo.launcher import S3_LOCATION, iceberg_url
from demo.s3 import BUCKET, REGION
from gateway.providers.authentication.sigv4 import parse_credentials_file
from tests.support.make_run import Demo, console_script, demo_until_iceberg

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def _s3_dir(demo: Demo) -> Path:
    return demo.workdir / "s3"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    # what the Makefile runs, with this test's config file, work directory and HMS port
    with demo_until_iceberg(tmp_path_factory.mktemp("make-run-s3"), ["--storage", "s3"],
                            lambda demo: _s3_dir(demo) / "hms", program=console_script(), env=env) as running:
        yield running


def _bucket(demo: Demo):
    """A client of the demo's S3 server with the gateway's key, read from the file the demo wrote."""
    import botocore.session
    from botocore.config import Config

    endpoint = re.search(r"on the local S3 server (http://\S+)", demo.output)[1]
    ini = configparser.ConfigParser()
    ini.read(_s3_dir(demo) / "gateway-s3.ini")
    key = ini["default"]
    client = botocore.session.Session().create_client(
        "s3", endpoint_url=endpoint, region_name=REGION, aws_access_key_id=key["aws_access_key_id"],
        aws_secret_access_key=key["aws_secret_access_key"], config=Config(s3={"addressing_style": "path"}))
    return client, key


def test_the_printed_program_reads_the_table_with_vended_credentials_only(demo: Demo, tmp_path: Path):
    program = demo.program()
    assert program == read_back_snippet(iceberg_url(demo.gateway_port), "certs/ca.crt", vended=True)
    script = tmp_path / "read_back.py"
    script.write_text(program)
    # nothing but the program: no AWS key, profile or CA bundle from the environment
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("AWS_") and k not in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")}
    env.update(AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull, HOME=str(tmp_path),
               PYTHONPATH="")
    proc = subprocess.run([sys.executable, str(script)], cwd=demo.root, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    printed = [line.split("# → ", 1)[1] for line in program.splitlines() if line.startswith("# → ")]
    assert proc.stdout.splitlines() == printed


def test_the_table_files_are_in_the_bucket_and_not_on_local_disk(demo: Demo):
    client, _ = _bucket(demo)
    prefix = S3_LOCATION.removeprefix(f"s3://{BUCKET}/") + "/trips/"
    keys = [o["Key"] for o in client.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])]
    assert sum(k.startswith(prefix + "data/") and k.endswith(".parquet") for k in keys) == 2  # two appends
    assert sum(k.startswith(prefix + "metadata/") and k.endswith(".metadata.json") for k in keys) == 3
    # os.walk, not rglob: the pipeline's Spark job may be adding and removing directories meanwhile
    local = [os.path.join(top, name) for top, dirs, files in os.walk(demo.root) for name in dirs + files
             if name.endswith(".metadata.json") or name in ("trips", "lakehouse.db")]
    assert not local, local


def test_the_change_feed_reads_the_commits_metadata_on_s3(demo: Demo):
    """The demo's event-stream service reads Iceberg metadata from the bucket too."""
    import base64
    import json
    import ssl
    import urllib.request

    url = (f"https://localhost:{demo.gateway_port}/gateway/default/events"
           "?after=0&limit=1000&wait=0&types=ICEBERG_COMMIT")
    request = urllib.request.Request(url, headers={
        "Authorization": "Basic " + base64.b64encode(b"admin:admin-password").decode()})
    context = ssl.create_default_context(cafile=str(demo.root / "certs" / "ca.crt"))
    commits: list[dict] = []
    deadline = time.monotonic() + 30  # the feed polls HMS every second
    while len(commits) < 2 and time.monotonic() < deadline:
        with urllib.request.urlopen(request, context=context, timeout=30) as answer:
            commits = [e["iceberg"] for e in json.load(answer)["events"] if e.get("table") == "trips"]
        time.sleep(0.5)
    appends = [c for c in commits if c.get("operation") == "append"]
    assert len(appends) == 2 and all("error" not in c for c in commits), commits
    assert all(c["metadata-location"].startswith(S3_LOCATION + "/trips/metadata/") for c in commits)


def test_the_gateways_key_is_printed_and_logged_nowhere(demo: Demo):
    _, key = _bucket(demo)
    texts = {"stdout": demo.output, "stderr": (demo.root / "demo.stderr").read_text(errors="replace")}
    for log in ("audit.log", "pipeline.log"):
        path = demo.root / "var" / "demo" / log
        texts[log] = path.read_text(errors="replace") if path.exists() else ""
    for name, secret in key.items():
        assert not [where for where, text in texts.items() if secret in text], name
    assert (_s3_dir(demo) / "gateway-s3.ini").stat().st_mode & 0o077 == 0
    assert "options.s3" not in (REPO / "config" / "topologies" / "default.yaml").read_text()  # config/ stays file


def test_the_banners_duckdb_program_reads_the_s3_table_as_printed(demo: Demo, tmp_path: Path):
    """On S3 the banner's DuckDB program asks for vended credentials: with the file demo's
    ACCESS_DELEGATION_MODE 'none' DuckDB went to https://warehouse.s3.amazonaws.com and failed."""
    program = demo.banner_program("DuckDB 1.4 (a program", "Spark 3.5")
    assert "ACCESS_DELEGATION_MODE 'vended_credentials'" in program
    script = tmp_path / "duckdb_program.py"
    script.write_text(program)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull, HOME=str(tmp_path))
    proc = subprocess.run([sys.executable, str(script)], cwd=demo.root, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    printed = [line.split("# → ", 1)[1] for line in program.splitlines() if line.startswith("# → ")]
    assert proc.stdout.splitlines() == printed


def test_the_demo_serves_glue_with_sigv4_and_the_access_keys_it_wrote(demo: Demo, tmp_path: Path):
    """Issue 40: the demo writes its access keys (var/demo/aws-credentials, 0600), its glue
    topology accepts them, and the banner prints docs/glue.md's boto3 program for them (which
    tests/integration/test_doc_snippets.py runs; its `sales` tables come from the PySpark
    pipeline, not waited for here). The secrets are printed and logged nowhere."""
    import boto3
    from botocore.config import Config

    credentials = demo.root / "var" / "demo" / CREDENTIALS_FILE
    assert credentials.stat().st_mode & 0o077 == 0
    keys = parse_credentials_file(credentials.read_text())
    assert set(keys) == set(ACCESS_KEYS.values())
    program = boto3_program(glue_url(demo.gateway_port), "certs/ca.crt", f"var/demo/{CREDENTIALS_FILE}")
    assert textwrap.indent(program, "    ") in demo.output + "\n"
    session = boto3.Session(aws_access_key_id=ACCESS_KEYS["admin"], aws_secret_access_key=keys[ACCESS_KEYS["admin"]])
    glue = session.client("glue", endpoint_url=glue_url(demo.gateway_port), region_name="us-east-1",
                          verify=str(demo.root / "certs" / "ca.crt"), config=Config(retries={"max_attempts": 1}))
    assert "lakehouse" in [d["Name"] for d in glue.get_databases()["DatabaseList"]]
    texts = [demo.output, (demo.root / "demo.stderr").read_text(errors="replace"),
             (demo.root / "var" / "demo" / "audit.log").read_text(errors="replace")]
    assert not [secret for secret in keys.values() for text in texts if secret in text]
