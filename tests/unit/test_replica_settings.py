"""Issue 26: the chart's defaults for two or more replicas, and check-config's replica warnings."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import jsonschema
import pytest
import yaml

from tests.support.config_check import check_config, write_chart_config

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "hms-gateway"


@pytest.fixture(scope="module")
def values():
    return yaml.safe_load((CHART / "values.yaml").read_text())


@pytest.fixture(scope="module")
def chart_tls(tmp_path_factory):
    from gateway.certs import write_dev_certificates

    return write_dev_certificates(tmp_path_factory.mktemp("replica-tls"))


def test_service_pins_each_client_address_to_one_pod(values):
    """ClientIP affinity: an address's failure budget lives in one pod (docs/operations.md)."""
    service = values["service"]
    assert values["replicaCount"] >= 2
    assert service["sessionAffinity"] == "ClientIP" and service["externalTrafficPolicy"] == "Local"
    window = 300  # FailureThrottle.window_seconds' default: the pin must outlast it
    assert service["sessionAffinityTimeoutSeconds"] > window
    text = (CHART / "templates" / "service.yaml").read_text()
    assert "sessionAffinity: {{ .Values.service.sessionAffinity }}" in text
    assert re.search(r'\{\{- if eq \.Values\.service\.sessionAffinity "ClientIP" \}\}\s+sessionAffinityConfig:\s+'
                     r"clientIP:\s+timeoutSeconds: \{\{ \.Values\.service\.sessionAffinityTimeoutSeconds \}\}", text)


def test_schema_knows_the_affinity_values(values):
    schema = json.loads((CHART / "values.schema.json").read_text())
    jsonschema.Draft7Validator(schema).validate(values)
    broken = copy.deepcopy(values)
    broken["service"]["sessionAffinity"] = "Sticky"
    assert list(jsonschema.Draft7Validator(schema).iter_errors(broken))


def _with_broker(values: dict, broker: dict) -> dict:
    changed = copy.deepcopy(values)
    changed["config"]["topologies"]["default"]["services"].append({
        "kind": "event-stream", "path": "events", "upstream": {"urls": ["thrift://hive-metastore:9083"]},
        "options": {"broker": {"url": "stomp://activemq:61613", **broker}}})
    return changed


def test_check_config_warns_about_a_per_replica_offset_file(values, chart_tls, tmp_path):
    gateway_file = write_chart_config(_with_broker(values, {"offset_file": "/var/lib/offset"}), tmp_path / "etc",
                                      certificate=chart_tls.certificate, private_key=chart_tls.private_key,
                                      users_file=ROOT / "config" / "users.htpasswd")
    status, output = check_config(gateway_file, "--replicas", str(values["replicaCount"]))
    assert status == 0, output
    assert "warning: topology default: services[1].options.broker.offset_file: with 2 replicas" in output
    status, output = check_config(gateway_file, "--replicas", "1")
    assert status == 0 and "warning" not in output, output


def test_check_config_is_quiet_for_the_hms_lock(values, chart_tls, tmp_path):
    gateway_file = write_chart_config(_with_broker(values, {}), tmp_path / "etc",
                                      certificate=chart_tls.certificate, private_key=chart_tls.private_key,
                                      users_file=ROOT / "config" / "users.htpasswd")
    status, output = check_config(gateway_file, "--replicas", "6")
    assert status == 0 and "warning" not in output and "ok: /gateway/default/events" in output, output
