"""The demo's Iceberg part (issue 22, item 8): the default topology serves ``iceberg-rest``, the
banner names its URL, and the program the demo prints is the one docs/iceberg.md shows (and
tests/integration/test_doc_snippets.py runs)."""

from __future__ import annotations

import ast
from pathlib import Path

import yaml

from demo.iceberg import BATCHES, NAMESPACE, TABLE, read_back_snippet
from demo.launcher import ICEBERG_SERVICE, _banner, _shown_path, iceberg_url
from tests.support.doc_snippets import collect

REPO = Path(__file__).resolve().parents[2]
DEFAULT_URL = "https://localhost:8443/gateway/default/iceberg"


def test_the_default_topology_serves_the_rest_catalog_the_demo_writes_through():
    topology = yaml.safe_load((REPO / "config" / "topologies" / "default.yaml").read_text())
    kinds = {s["path"]: s.get("kind", "hms-thrift") for s in topology["services"]}
    assert kinds[ICEBERG_SERVICE] == "iceberg-rest"
    assert iceberg_url(8443) == DEFAULT_URL


def test_the_banner_names_the_rest_catalog_url():
    banner = _banner(18443, 19464, Path("/tmp/ca.crt"))
    assert "https://localhost:18443/gateway/default/iceberg" in banner


def test_docs_show_the_program_the_demo_prints_as_a_run_block():
    printed = read_back_snippet(DEFAULT_URL)
    blocks = [s for s in collect() if s.file.endswith("iceberg.md") and s.body == printed]
    assert len(blocks) == 1 and blocks[0].kind == "run", "docs/iceberg.md must show read_back_snippet() as a run block"


def test_docs_show_the_program_the_s3_demo_prints():
    """``make run S3=1`` prints the same program plus the access-delegation header; the block is
    not-run here (no S3 server), and tests/integration/test_make_run_s3.py runs what the demo prints."""
    printed = read_back_snippet(DEFAULT_URL, vended=True)
    assert printed.replace('    "header.X-Iceberg-Access-Delegation": "vended-credentials",  # S3 access from the gateway\n',
                           "") == read_back_snippet(DEFAULT_URL)
    blocks = [s for s in collect() if s.file.endswith("iceberg.md") and s.body == printed]
    assert len(blocks) == 1 and blocks[0].kind == "not-run" and "test_make_run_s3.py" in blocks[0].attrs["reason"]


def test_the_program_prints_what_the_batches_hold():
    program = read_back_snippet(DEFAULT_URL, "/etc/ca.crt")
    ast.parse(program)
    assert f'catalog.load_table("{NAMESPACE}.{TABLE}")' in program and '"cabundle": "/etc/ca.crt"' in program
    expected = [line.split("# → ", 1)[1] for line in program.splitlines() if line.startswith("# → ")]
    rows = [row for batch in BATCHES for row in batch]
    assert ast.literal_eval(expected[0]) == ["append"] * len(BATCHES) == ["append", "append"]
    assert expected[1] == f"{len(rows)} ['trip_id', 'city', 'fare']"
    assert ast.literal_eval(expected[2]) == [city for _, city, _ in sorted(rows)]


def test_the_ca_is_shown_relative_to_the_working_directory_when_below_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "certs").mkdir()
    assert _shown_path(tmp_path / "certs" / "ca.crt") == "certs/ca.crt"
    assert _shown_path(Path("/elsewhere/ca.crt")) == "/elsewhere/ca.crt"
