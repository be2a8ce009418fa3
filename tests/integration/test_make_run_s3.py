"""``make run S3=1`` (issue 23): ``hms-gateway demo --storage s3`` end to end, as the Makefile
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
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gateway.demo.aws_keys import ACCESS_KEYS, CREDENTIALS_FILE
from gateway.demo.glue import boto3_program, glue_url
from gateway.demo.iceberg import read_back_snippet
from gateway.demo.launcher import S3_LOCATION, iceberg_url
from gateway.demo.s3 import BUCKET, REGION
from gateway.providers.authentication.sigv4 import parse_credentials_file
from tests.support.ports import reserve_port

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
READ_BACK = "Read it back (from the repository, with .venv/bin/python):"
STARTUP_SECONDS = 240


@dataclass
class Demo:
    root: Path  # the demo's working directory (the repository's place)
    process: subprocess.Popen
    gateway_port: int
    lines: list[str] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    @property
    def s3_dir(self) -> Path:
        return self.root / "var" / "demo" / "s3"

    def program(self) -> str:
        """The PyIceberg program the demo printed (indented by four spaces after READ_BACK)."""
        start = next(i for i, line in enumerate(self.lines) if line.endswith(READ_BACK)) + 2
        body = []
        for line in self.lines[start:]:
            if line and not line.startswith("    "):
                break
            body.append(line)
        return textwrap.dedent("\n".join(body)).strip("\n") + "\n"


def _copy_config(root: Path, gateway_port: int, management_port: int, hms_port: int) -> Path:
    """config/ under ``root`` as it is in the repository, but for the ports."""
    config = root / "config"
    (config / "topologies").mkdir(parents=True)
    text = (REPO / "config" / "gateway.yaml").read_text()
    text = text.replace("port: 8443", f"port: {gateway_port}").replace("port: 9464", f"port: {management_port}")
    (config / "gateway.yaml").write_text(text.replace("0.0.0.0", "127.0.0.1"))
    (config / "users.htpasswd").write_text((REPO / "config" / "users.htpasswd").read_text())
    for path in (REPO / "config" / "topologies").glob("*.yaml"):
        (config / "topologies" / path.name).write_text(
            path.read_text().replace("thrift://localhost:9083", f"thrift://localhost:{hms_port}"))
    return config / "gateway.yaml"


def _stop(demo: Demo) -> None:
    """SIGTERM (the demo stops its gateway, HMS and S3 server), then whatever is left of its
    process group (the pipeline's Spark child) and the HMS JVM, which runs in a group of its own."""
    if demo.process.poll() is None:
        demo.process.send_signal(signal.SIGTERM)
        try:
            demo.process.wait(90)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(demo.process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    demo.process.wait()
    pidfile = demo.s3_dir / "hms" / "hms.pid"
    if pidfile.exists():  # only when the demo could not stop its HMS itself
        try:
            os.killpg(int(pidfile.read_text()), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    root = tmp_path_factory.mktemp("make-run-s3")
    gateway_port = reserve_port(3)  # the demo is told its ports: gateway, management, HMS
    management_port, hms_port = gateway_port + 1, gateway_port + 2
    config = _copy_config(root, gateway_port, management_port, hms_port)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    # what the Makefile runs, with this test's config file, work directory and HMS port
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "hms-gateway"), "demo", "--config", str(config),
         "--workdir", "var/demo", "--hms-port", str(hms_port), "--storage", "s3"],
        cwd=root, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=open(root / "demo.stderr", "wb"), text=True, start_new_session=True)
    running = Demo(root, process, gateway_port)

    def read() -> None:
        for line in process.stdout:
            running.lines.append(line.rstrip("\n"))
            if line.strip().startswith("# → ['Lisbon'") or "demo iceberg failed" in line:
                running.done.set()
        running.done.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        finished = running.done.wait(STARTUP_SECONDS)
        assert finished and "demo iceberg failed" not in running.output, (
            f"the demo did not print its PyIceberg program:\n{running.output}\n"
            f"{(root / 'demo.stderr').read_text(errors='replace')[-3000:]}")
        yield running
    finally:
        _stop(running)


def _bucket(demo: Demo):
    """A client of the demo's S3 server with the gateway's key, read from the file the demo wrote."""
    import botocore.session
    from botocore.config import Config

    endpoint = re.search(r"on the local S3 server (http://\S+)", demo.output)[1]
    ini = configparser.ConfigParser()
    ini.read(demo.s3_dir / "gateway-s3.ini")
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
    assert (demo.s3_dir / "gateway-s3.ini").stat().st_mode & 0o077 == 0
    assert "options.s3" not in (REPO / "config" / "topologies" / "default.yaml").read_text()  # config/ stays file


def _banner_program(demo: Demo, heading: str, next_heading: str) -> str:
    """The program under the banner line starting with ``heading`` (indented by four spaces
    more than it), up to the line starting with ``next_heading``."""
    start = next(i for i, line in enumerate(demo.lines) if line.strip().startswith(heading)) + 1
    end = next(i for i, line in enumerate(demo.lines) if i > start and line.strip().startswith(next_heading))
    return textwrap.dedent("\n".join(demo.lines[start:end])).strip("\n") + "\n"


def test_the_banners_duckdb_program_reads_the_s3_table_as_printed(demo: Demo, tmp_path: Path):
    """On S3 the banner's DuckDB program asks for vended credentials: with the file demo's
    ACCESS_DELEGATION_MODE 'none' DuckDB went to https://warehouse.s3.amazonaws.com and failed."""
    program = _banner_program(demo, "DuckDB 1.4 (a program", "Spark 3.5")
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
