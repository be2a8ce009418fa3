"""The service-kind seam: the registry, a kind's ``options:`` validated at build time with errors
naming file and key, and kinds that need an upstream refusing to build without one."""

from __future__ import annotations

import pytest

from gateway.config import ConfigError, GatewayConfig, TLSConfig, load_topology_file
from gateway.services import KINDS, service_kind
from gateway.services.base import validate_options
from gateway.hms_thrift.kind import ThriftRpcService
from gateway.topology import build_topology

TOPOLOGY = """
providers:
  authentication:
    - {{type: htpasswd, users_file: users.htpasswd}}
services:
  - {service}
"""


def _build(tmp_path, service: str):
    (tmp_path / "users.htpasswd").write_text("")
    path = tmp_path / "t.yaml"
    path.write_text(TOPOLOGY.format(service=service))
    gateway = GatewayConfig(tls=TLSConfig(certificate=tmp_path / "c", private_key=tmp_path / "k"))
    return path, build_topology(load_topology_file(path), gateway)


def test_registry_resolves_every_kind_to_a_class_declaring_it():
    for name in KINDS:
        assert service_kind(name).kind == name
    assert service_kind("no-such-kind") is None


def test_hms_thrift_builds_with_its_upstream(tmp_path):
    _, topology = _build(tmp_path, "{path: api, upstream: {urls: ['thrift://hms:9083']}}")
    service = topology.services["api"]
    assert isinstance(service.handler, ThriftRpcService)
    assert [pool.label for pool in service.upstream.endpoints] == ["hms:9083"]


def test_hms_thrift_without_upstream_names_the_key(tmp_path):
    with pytest.raises(ConfigError) as info:
        _build(tmp_path, "{path: api}")
    assert info.value.key == "services[0].upstream"
    assert "needs an upstream" in info.value.reason


def test_options_for_a_kind_without_options_are_refused():
    with pytest.raises(ConfigError) as info:
        validate_options(None, "t.yaml", 0, "plain", {"x": 1})
    assert info.value.key == "services[0].options"
    assert info.value.reason == "service kind 'plain' takes no options"


def test_an_unknown_option_of_a_kind_names_its_key(tmp_path):
    with pytest.raises(ConfigError) as info:
        _build(tmp_path, "{path: api, upstream: {urls: ['thrift://hms:9083']}, options: {x: 1}}")
    assert info.value.key == "services[0].options.x"


def test_unknown_kind_lists_the_known_ones(tmp_path):
    with pytest.raises(ConfigError) as info:
        _build(tmp_path, "{kind: nope, path: api}")
    assert info.value.key == "services[0].kind"
    assert "hms-thrift" in info.value.reason
