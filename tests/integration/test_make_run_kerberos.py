"""``make run KERBEROS=1`` (issue 38): ``python -m demo --kerberos`` end to end, with the
repository's own config/ (copied: free ports instead of 8443, 9464 and 9083).

The demo starts a KDC, Kerberizes its HMS (SASL, the gateway its proxy user), serves the
gateway with ``upstream.sasl`` on every service, writes ``lakehouse.trips`` through the gateway
as ``etl`` and prints a PyIceberg program; it says where HMS's log is. That program, run as
printed, reads the table; the README's curl call works; HMS's audit shows the end users
(``ugi=etl``, ``ugi=admin``); a direct Thrift call without Kerberos is refused. The demo's PySpark
pipeline, which starts after the Iceberg part, is not waited for.

The demo runs as ``python -m gateway.cli`` from this repository (the Makefile's
``.venv/bin/hms-gateway`` is the same entry point of the installed project)."""

from __future__ import annotations

import base64
import json
import os
import re
import ssl
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from demo.engines import duckdb_program, pyiceberg_program
from demo.hms import probe_get_all_databases
from demo.iceberg import read_back_snippet
from demo.launcher import iceberg_url
from tests.support.gateway import wait_for
from tests.support.make_run import Demo, demo_until_iceberg

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
_AUDIT = re.compile(r"HiveMetaStore\.audit: ugi=(\S+)\s+ip=\S+\s+cmd=(.*?)\s*$")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    with demo_until_iceberg(tmp_path_factory.mktemp("make-run-kerberos"), ["--kerberos"],
                            lambda demo: demo.workdir / "hms", program=[sys.executable, "-m", "demo"],
                            env={**os.environ, "PYTHONPATH": str(REPO)}) as running:
        yield running


def hms_log(demo: Demo) -> Path:
    """The HMS log the banner names (the line after "HMS's log, with its audit lines")."""
    at = next(i for i, line in enumerate(demo.lines) if "HMS's log, with its audit lines" in line)
    return Path(demo.lines[at + 1].strip())


def audit(demo: Demo) -> list[tuple[str, str]]:
    text = hms_log(demo).read_text(errors="replace")
    return [(m[1], m[2]) for line in text.splitlines() if (m := _AUDIT.search(line))]


def test_the_banner_says_the_metastore_is_kerberized_and_where_its_log_is(demo: Demo):
    assert f"The embedded Hive Metastore on port {demo.hms_port} is Kerberized (SASL, realm GATEWAY.TEST" in demo.output
    assert "without authentication" not in demo.output  # the plain demo's warning
    assert hms_log(demo) == (demo.workdir / "hms" / "hms.log").resolve()
    assert "Login successful for user hive/localhost@GATEWAY.TEST" in hms_log(demo).read_text()
    keytabs = demo.workdir / "kerberos" / "keytabs"
    assert sorted(p.name for p in keytabs.iterdir()) == ["hive.keytab", "hmsgw.keytab"]
    assert all(p.stat().st_mode & 0o077 == 0 for p in keytabs.iterdir())
    topology = (demo.workdir / "kerberos" / "topologies" / "default.yaml").read_text()
    assert "sasl:" in topology and "hmsgw/localhost@GATEWAY.TEST" in topology


def run_as_printed(demo: Demo, program: str, directory: Path) -> None:
    """Run ``program`` from the demo's root as a user would (no CA bundle or PYTHONPATH from the
    environment) and compare its output with its ``# →`` lines."""
    script = directory / "program.py"
    script.write_text(program)
    env = {k: v for k, v in os.environ.items() if k not in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")}
    proc = subprocess.run([sys.executable, str(script)], cwd=demo.root, env={**env, "PYTHONPATH": ""},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    printed = [line.split("# → ", 1)[1] for line in program.splitlines() if line.startswith("# → ")]
    assert proc.stdout.splitlines() == printed


def test_the_printed_program_reads_the_table(demo: Demo, tmp_path: Path):
    program = demo.program()
    assert program == read_back_snippet(iceberg_url(demo.gateway_port), "certs/ca.crt")
    run_as_printed(demo, program, tmp_path)
    # the table was written by etl, and HMS ran etl's calls as etl
    assert any(ugi == "etl" and cmd.startswith("create_table: Table(tableName:trips") for ugi, cmd in audit(demo))


def test_the_banners_pyiceberg_and_duckdb_programs_read_the_table_as_printed(demo: Demo, tmp_path: Path):
    """The engines' section (OAuth2 client credentials etl / etl-password, a gateway token):
    each program as the banner prints it, against the Kerberized metastore."""
    uri = iceberg_url(demo.gateway_port)
    pyiceberg = demo.banner_program("PyIceberg (a program", "DuckDB 1.4")
    assert pyiceberg == pyiceberg_program(uri, "certs/ca.crt")
    run_as_printed(demo, pyiceberg, tmp_path)
    duckdb = demo.banner_program("DuckDB 1.4 (a program", "Spark 3.5")
    assert duckdb == duckdb_program(uri, "certs/ca.crt")
    run_as_printed(demo, duckdb, tmp_path)


def test_the_readme_curl_call_runs_as_admin_in_hms(demo: Demo):
    url = f"https://localhost:{demo.gateway_port}/gateway/default/hmshttpthrift/api/hms"
    request = urllib.request.Request(url, data=b'[1,"get_all_databases",1,1,{}]', headers={
        "Authorization": "Basic " + base64.b64encode(b"admin:admin-password").decode(),
        "Content-Type": "application/vnd.apache.thrift.json"})
    context = ssl.create_default_context(cafile=str(demo.root / "certs" / "ca.crt"))
    with urllib.request.urlopen(request, context=context, timeout=60) as answer:
        reply = json.load(answer)
    assert reply[:4] == [1, "get_all_databases", 2, 1] and "lakehouse" in reply[4]["0"]["lst"]
    wait_for(lambda: ("admin", "get_all_databases") in audit(demo), timeout=20)


def test_a_direct_call_without_kerberos_is_refused(demo: Demo):
    with pytest.raises(ConnectionError):
        probe_get_all_databases("127.0.0.1", demo.hms_port, timeout=10)
    wait_for(lambda: "Invalid status -128" in hms_log(demo).read_text(errors="replace"), timeout=10)
