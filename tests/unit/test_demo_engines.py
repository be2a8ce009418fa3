"""The engine settings the demo prints are docs/iceberg.md's "Quick start" blocks (the doc's
PyIceberg and DuckDB programs run in tests/integration/test_doc_snippets.py; DuckDB and
iceberg-js in tests/integration/test_iceberg_engines.py)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import yaml

from demo.engines import (DUCKDB_PACKAGES, WAREHOUSE, duckdb_program, engine_snippets, pyiceberg_program,
                                  spark_properties, trino_catalog)
from demo.launcher import _banner, iceberg_url
from demo.tokens import KEY_ENV
from tests.support.doc_snippets import parse

REPO = Path(__file__).resolve().parents[2]
URI, CA = "https://localhost:8443/gateway/default/iceberg", "certs/ca.crt"


def _blocks() -> list[str]:
    path = REPO / "docs" / "iceberg.md"
    return [s.body.rstrip("\n") for s in parse(path.read_text(), str(path))]


def test_the_docs_show_what_the_demo_prints():
    blocks = _blocks()
    for text in (pyiceberg_program(URI, CA), duckdb_program(URI, CA), spark_properties(URI, "gateway-ca.p12"),
                 trino_catalog(URI)):
        assert text.rstrip("\n") in blocks


def test_the_banner_prints_a_snippet_for_each_engine():
    banner = _banner(8443, 9464, Path(CA))
    assert iceberg_url(8443) == URI
    for engine in ("PyIceberg", "DuckDB", "Spark", "Trino"):
        assert engine in banner
    assert engine_snippets(URI, CA).splitlines()[1] in banner


def test_make_run_s_topology_issues_tokens_and_serves_the_warehouse():
    topology = yaml.safe_load((REPO / "config" / "topologies" / "default.yaml").read_text())
    providers = topology["providers"]["authentication"]
    assert {"type": "gateway-token", "signing_key": f"env:{KEY_ENV}"} in providers
    iceberg = next(s for s in topology["services"] if s["kind"] == "iceberg-rest")
    assert WAREHOUSE in iceberg["options"]["warehouses"]


def test_the_duckdb_packages_shown_are_the_ones_the_suite_tests():
    """The banner's and the doc's install line pin what the test extra installs (pyproject.toml)."""
    test_extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["test"]
    assert set(DUCKDB_PACKAGES.split()) <= set(test_extra)
    assert f".venv/bin/pip install {DUCKDB_PACKAGES}" in (REPO / "docs" / "iceberg.md").read_text()


def test_the_pyiceberg_program_reads_the_demo_rows_and_on_s3_asks_for_vended_credentials():
    """Issue 40: the Quick start's first PyIceberg program creates nothing and prints the rows."""
    program = pyiceberg_program(URI, CA)
    assert 'catalog.load_table("lakehouse.trips")' in program and "create" not in program
    assert program.count("# → {'trip_id': ") == 5
    on_s3 = pyiceberg_program(URI, CA, vended=True)
    assert '"header.X-Iceberg-Access-Delegation": "vended-credentials"' in on_s3
    assert on_s3.replace('    "header.X-Iceberg-Access-Delegation": "vended-credentials",  # S3 access from the gateway\n',
                         "") == program
    assert on_s3 in engine_snippets(URI, CA, s3=True)
