"""``python -m demo --storage s3`` (issue 23): the topologies it serves are the configured ones
plus the local S3 server's settings, and the gateway's key stays out of every ``repr``."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from gateway.config import load_topologies
from demo.s3 import RunningS3, s3_topologies

REPO = Path(__file__).resolve().parents[2]
S3 = {"endpoint": "http://127.0.0.1:9999", "region": "us-east-1", "credentials_file": "/x/gateway-s3.ini",
      "role_arn": "arn:aws:iam::123456789012:role/iceberg-vended"}


def test_the_s3_topologies_are_config_topologies_plus_the_s3_settings(tmp_path):
    source = load_topologies(REPO / "config" / "topologies")
    (tmp_path / "old.yaml").write_text("stale")  # a topology from an earlier start is removed
    written = load_topologies(s3_topologies(REPO / "config" / "topologies", tmp_path, S3))
    assert written.keys() == source.keys()
    for name, topology in written.items():
        assert topology.providers == source[name].providers  # users_file resolved, still found
        for mine, theirs in zip(topology.services, source[name].services, strict=True):
            options = dict(mine.options)
            if mine.kind == "iceberg-rest":
                assert options.pop("s3") == S3
                assert options.pop("allowed_locations") == ["s3://warehouse/"]
            if mine.kind == "event-stream":
                assert options.pop("iceberg") == {**theirs.options.get("iceberg", {}), "s3": S3}
            assert mine.model_copy(update={"options": options}) == theirs
    default = yaml.safe_load((tmp_path / "default.yaml").read_text())
    assert [s["path"] for s in default["services"] if "s3" in s.get("options", {})] == ["iceberg"]


def test_the_gateways_key_is_in_no_repr():
    running = RunningS3("http://127.0.0.1:1", "AKIAGATEWAYKEY000001", "gateway-secret", "arn:role",
                        subprocess.Popen(["true"]))
    running.process.wait()
    assert "AKIAGATEWAYKEY000001" not in repr(running) and "gateway-secret" not in repr(running)
    assert running.port == 1
