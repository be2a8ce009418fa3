"""Configuration files validate into typed objects; every error names file, key and reason."""

from pathlib import Path

import pytest

from gateway.cli import main
from gateway.config import (
    ConfigError,
    load_gateway_config,
    load_topologies,
    load_topology_file,
)
from gateway.hms_thrift.kind import SPEC_METHODS, ThriftRpcOptions

REPO = Path(__file__).resolve().parents[2]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


TOPOLOGY = """
providers:
  authentication:
    - {type: htpasswd, users_file: users}
services:
  - path: /hmshttpthrift/api/hms/
    upstream: {urls: ["thrift://hms:9083"]}
"""


@pytest.fixture
def topo_dir(tmp_path: Path) -> Path:
    write(tmp_path / "users", "admin:$2y$10$abcdefghijklmnopqrstuuabcdefghijklmnopqrstuvwxyz01234\n")
    write(tmp_path / "t" / "default.yaml", TOPOLOGY.replace("users_file: users", "users_file: ../users"))
    return tmp_path / "t"


def test_shipped_configuration_is_valid():
    cfg = load_gateway_config(REPO / "config/gateway.yaml")
    assert cfg.listeners.gateway.port == 8443 and cfg.listeners.management.port == 9464
    assert cfg.limits.max_request_bytes == 1024 * 1024
    assert cfg.tls.certificate == REPO / "certs/server.crt"
    topologies = load_topologies(cfg.topologies_dir)
    service = topologies["default"].services[0]
    assert service.path == "hmshttpthrift/api/hms"
    assert service.upstream.urls == ["thrift://localhost:9083"]
    assert tuple(service.options["methods"]) == SPEC_METHODS


def test_topology_defaults_and_path_normalised(topo_dir: Path):
    topo = load_topology_file(topo_dir / "default.yaml")
    assert topo.name == "default"
    svc = topo.services[0]
    assert svc.path == "hmshttpthrift/api/hms"
    assert svc.upstream.transport == "unframed"
    assert tuple(ThriftRpcOptions.model_validate(svc.options).methods) == SPEC_METHODS
    assert topo.providers.authentication[0].users_file == (topo_dir.parent / "users").resolve()


@pytest.mark.parametrize(
    "mutation, key, reason",
    [
        (("thrift://hms:9083", "ftp://hms:9083"), "services[0].upstream.urls", "is neither a thrift://host:port nor"),
        (("{urls:", "{transport: udp, urls:"), "services[0].upstream.transport", "'unframed' or 'framed'"),
        (("- path: /hmshttpthrift/api/hms/", "- path: ../x"), "services[0].path", "not a relative URL path"),
        (("type: htpasswd", "type: magic"), "providers.authentication[0]", "does not match any of the expected tags"),
        (("services:", "colour: red\nservices:"), "colour", "Extra inputs are not permitted"),
    ],
)
def test_errors_name_file_key_and_reason(topo_dir: Path, mutation, key, reason):
    bad = write(topo_dir / "bad.yaml", TOPOLOGY.replace(*mutation).replace("users_file: users", "users_file: ../users"))
    with pytest.raises(ConfigError) as info:
        load_topology_file(bad)
    assert info.value.file == str(bad)
    assert info.value.key == key
    assert reason in info.value.reason
    assert str(info.value).startswith(f"{bad}: {key}: ")


def test_missing_users_file_is_named(tmp_path: Path):
    bad = write(tmp_path / "x.yaml", TOPOLOGY)
    with pytest.raises(ConfigError) as info:
        load_topology_file(bad)
    assert info.value.key == "providers.authentication[0].users_file"
    assert "no such file" in info.value.reason


def test_invalid_yaml_and_non_mapping(tmp_path: Path):
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_gateway_config(write(tmp_path / "g.yaml", "tls: [unclosed\n"))
    with pytest.raises(ConfigError, match="must be a mapping"):
        load_gateway_config(write(tmp_path / "g2.yaml", "- a\n- b\n"))
    with pytest.raises(ConfigError, match="cannot read"):
        load_gateway_config(tmp_path / "absent.yaml")


def test_gateway_file_limits_and_tls_version(tmp_path: Path):
    g = write(tmp_path / "g.yaml", "tls: {certificate: c, private_key: k, minimum_version: '1.1'}\n")
    with pytest.raises(ConfigError) as info:
        load_gateway_config(g)
    assert info.value.key == "tls.minimum_version"
    g = write(tmp_path / "g.yaml", "tls: {certificate: c, private_key: k}\nlimits: {max_request_bytes: 0}\n")
    with pytest.raises(ConfigError) as info:
        load_gateway_config(g)
    assert info.value.key == "limits.max_request_bytes"


def test_duplicate_service_paths_rejected(topo_dir: Path):
    text = TOPOLOGY.replace("users_file: users", "users_file: ../users") + """  - path: hmshttpthrift/api/hms
    upstream: {urls: ["thrift://other:9083"]}
"""
    with pytest.raises(ConfigError, match="declared twice"):
        load_topology_file(write(topo_dir / "dup.yaml", text))


def test_check_config_command_exits_non_zero_with_the_reason(tmp_path: Path, capsys):
    g = write(tmp_path / "g.yaml", "tls: {certificate: c, private_key: k}\ntopologies_dir: nowhere\n")
    assert main(["check-config", "--config", str(g)]) == 2
    err = capsys.readouterr().err
    assert "topologies_dir" in err and "no such directory" in err
