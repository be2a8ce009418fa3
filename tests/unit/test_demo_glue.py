"""The demo serves SigV4 for Glue (issue 40): its access keys (demo/aws_keys.py) are the
ones config/topologies/glue.yaml maps, the banner prints the boto3 program docs/glue.md leads
with (tests/integration/test_doc_snippets.py runs that block against the demo's topologies)."""

from __future__ import annotations

import os
import stat
import textwrap
from pathlib import Path

import pytest
import yaml

from demo.aws_keys import ACCESS_KEYS, CREDENTIALS_ENV, CREDENTIALS_FILE, demo_aws_credentials
from demo.glue import boto3_program, glue_url
from demo.launcher import _banner
from gateway.providers.authentication.sigv4 import parse_credentials_file
from tests.support.doc_snippets import ROOT, collect

DOC_PROGRAM = boto3_program(glue_url(8443), "certs/ca.crt", f"var/demo/{CREDENTIALS_FILE}")


def test_glue_md_leads_with_the_program_the_demo_prints():
    blocks = [s for s in collect() if s.file == "docs/glue.md"]
    assert blocks[0].body == DOC_PROGRAM and blocks[0].kind == "run"


def test_the_banner_prints_the_program_for_its_port_and_files():
    banner = _banner(18443, 19464, Path("/x/ca.crt"), aws_credentials=Path("/x/var/demo/aws-credentials"))
    program = boto3_program("https://localhost:18443/gateway/glue/api", "/x/ca.crt", "/x/var/demo/aws-credentials")
    assert textwrap.indent(program, "    ") in banner


def test_the_glue_topology_maps_the_demos_access_keys_and_accepts_basic():
    providers = yaml.safe_load((ROOT / "config" / "topologies" / "glue.yaml").read_text())["providers"]["authentication"]
    sigv4 = next(p for p in providers if p["type"] == "sigv4")
    assert sigv4["access_keys"] == {key: user for user, key in ACCESS_KEYS.items()}
    assert sigv4["secret_keys"] == f"env:{CREDENTIALS_ENV}"
    assert any(p["type"] == "htpasswd" for p in providers)


@pytest.fixture
def clean_env(monkeypatch):
    monkeypatch.delenv(CREDENTIALS_ENV, raising=False)


def test_the_keys_are_made_once_per_working_directory_and_never_readable_by_others(tmp_path, clean_env):
    path = demo_aws_credentials(tmp_path)
    assert path == tmp_path / CREDENTIALS_FILE and stat.S_IMODE(path.stat().st_mode) == 0o600
    keys = parse_credentials_file(path.read_text())
    assert set(keys) == set(ACCESS_KEYS.values()) and all(len(secret) >= 40 for secret in keys.values())
    assert os.environ[CREDENTIALS_ENV] == path.read_text()
    demo_aws_credentials(tmp_path)
    assert parse_credentials_file(path.read_text()) == keys  # a restart keeps them


def test_a_file_without_the_demos_key_ids_is_replaced(tmp_path, clean_env):
    (tmp_path / CREDENTIALS_FILE).write_text("[other]\naws_access_key_id = AKIAOTHER\naws_secret_access_key = s\n")
    keys = parse_credentials_file(demo_aws_credentials(tmp_path).read_text())
    assert set(keys) == set(ACCESS_KEYS.values())


def test_the_shipped_glue_topology_loads_with_the_demos_keys(tmp_path, clean_env):
    from gateway.config import load_topologies

    demo_aws_credentials(tmp_path)
    topologies_dir = tmp_path / "topologies"
    topologies_dir.mkdir()
    (topologies_dir / "glue.yaml").write_text((ROOT / "config" / "topologies" / "glue.yaml").read_text())
    (tmp_path / "users.htpasswd").write_text((ROOT / "config" / "users.htpasswd").read_text())
    assert "glue" in load_topologies(topologies_dir)
