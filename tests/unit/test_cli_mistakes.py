"""Mistakes a newcomer makes with the ``hms-gateway`` command and its files (issue 25): each gets
one line naming the file, the key or the address, and exit status 2; what users of such tools
expect (``--version``, a default config location, ``--log-level`` anywhere, help on every
option) is there."""

from __future__ import annotations

import argparse
import functools
import socket
from pathlib import Path

import pytest

from gateway import cli
from gateway.certs import write_dev_certificates
from gateway.config import ConfigError, TLSConfig, load_gateway_config, load_topologies
from gateway.reload import TopologyReloader
from gateway.thrift.schema import load_schema
from gateway.topology import Router, build_topology
from gateway.tls import server_ssl_context

TOPOLOGY = """providers: {authentication: [{type: htpasswd, users_file: ../users}]}
services: [{path: hms, upstream: {urls: ["thrift://127.0.0.1:9"]}}]
"""


def workdir(tmp: Path, gateway_extra: str = "", topology_name: str = "default.yaml") -> Path:
    """A complete configuration (development certificates, one topology) in ``tmp``."""
    write_dev_certificates(tmp / "certs")
    (tmp / "topologies").mkdir()
    (tmp / "users").write_text("")
    (tmp / "topologies" / topology_name).write_text(TOPOLOGY)
    gateway = tmp / "gateway.yaml"
    gateway.write_text("tls: {certificate: certs/server.crt, private_key: certs/server.key}\n"
                       "listeners: {gateway: {host: 127.0.0.1, port: 0}, management: {host: 127.0.0.1, port: 0}}\n"
                       "logging: {format: text}\n" + gateway_extra)
    return gateway


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# --- the command line ---------------------------------------------------------------------------


def test_version(capsys):
    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"hms-gateway {cli._version()}"
    assert cli._version()[0].isdigit()


def test_every_option_of_every_command_has_help():
    missing = []

    def walk(parser: argparse.ArgumentParser, name: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub_name, sub in action.choices.items():
                    walk(sub, f"{name} {sub_name}")
            elif action.option_strings and not action.help:
                missing.append(f"{name} {action.option_strings[0]}")

    walk(cli._parser(), "hms-gateway")
    assert missing == []


def test_help_names_the_default_config_locations(capsys):
    with pytest.raises(SystemExit):
        cli.main(["check-config", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "$HMS_GATEWAY_CONFIG" in text and "/etc/hms-gateway/gateway.yaml" in text
    assert "config/gateway.yaml" in text


def test_the_config_comes_from_the_environment_without_config(tmp_path, capsys, monkeypatch):
    gateway = workdir(tmp_path)
    monkeypatch.setenv("HMS_GATEWAY_CONFIG", str(gateway))
    code, out, _ = run(capsys, "check-config")
    assert code == 0
    assert out.strip() == "ok: /gateway/default/hms -> thrift://127.0.0.1:9"


def test_without_any_config_the_answer_says_where_it_looked(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("HMS_GATEWAY_CONFIG", raising=False)
    monkeypatch.setattr(cli, "SYSTEM_CONFIG", tmp_path / "etc" / "gateway.yaml")
    monkeypatch.chdir(tmp_path)  # no config/gateway.yaml here
    code, _, err = run(capsys, "check-config")
    assert code == 2
    assert "pass --config, set HMS_GATEWAY_CONFIG, or create" in err


def test_log_level_is_accepted_before_and_after_the_command(tmp_path):
    gateway = str(workdir(tmp_path))
    parser = cli._parser()
    assert parser.parse_args(["--log-level", "debug", "check-config", "--config", gateway]).log_level == "DEBUG"
    assert parser.parse_args(["check-config", "--config", gateway, "--log-level", "warning"]).log_level == "WARNING"
    assert parser.parse_args(["policy", "check", "--user", "u", "--database", "d",
                              "--log-level", "ERROR"]).log_level == "ERROR"
    with pytest.raises(SystemExit):
        parser.parse_args(["check-config", "--log-level", "LOUD"])


@pytest.mark.parametrize("workers", ["", "workers: 2\n"])  # in the serve process; the supervisor's
def test_serve_with_its_port_taken_prints_one_line_and_exits_2(tmp_path, capsys, workers):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        gateway = workdir(tmp_path, workers)
        gateway.write_text(gateway.read_text().replace("gateway: {host: 127.0.0.1, port: 0}",
                                                       f"gateway: {{host: 127.0.0.1, port: {port}}}"))
        code, _, err = run(capsys, "serve", "--config", str(gateway))
    assert code == 2
    lines = [line for line in err.splitlines() if line.startswith("serve: ")]
    assert lines == [f"serve: cannot listen on 127.0.0.1:{port} (listeners.gateway in the gateway file): "
                     "Address already in use"]
    assert "Traceback" not in err


# --- TLS files ----------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["certificate", "private_key", "client_ca"])
def test_a_missing_tls_file_is_named_with_its_key(tmp_path, key):
    certs = write_dev_certificates(tmp_path)
    files = {"certificate": certs.certificate, "private_key": certs.private_key, "client_ca": certs.ca_certificate}
    files[key] = tmp_path / "missing.pem"
    with pytest.raises(ConfigError) as error:
        server_ssl_context(TLSConfig(**files), tmp_path / "gateway.yaml")
    assert str(error.value) == f"{tmp_path / 'gateway.yaml'}: tls.{key}: no such file: {tmp_path / 'missing.pem'}"


def test_check_config_names_a_missing_certificate(tmp_path, capsys):
    gateway = workdir(tmp_path)
    (tmp_path / "certs" / "server.key").unlink()
    code, _, err = run(capsys, "check-config", "--config", str(gateway))
    assert code == 2
    assert err.strip() == (f"configuration error: {gateway}: tls.private_key: no such file: "
                           f"{tmp_path / 'certs' / 'server.key'}")


# --- configuration files ------------------------------------------------------------------------


def test_a_yml_topology_is_read_like_a_yaml_one(tmp_path, capsys):
    gateway = workdir(tmp_path, topology_name="default.yml")
    code, out, _ = run(capsys, "check-config", "--config", str(gateway))
    assert code == 0
    assert out.strip() == "ok: /gateway/default/hms -> thrift://127.0.0.1:9"


def test_the_same_topology_in_a_yaml_and_a_yml_file_is_refused(tmp_path, capsys):
    gateway = workdir(tmp_path)
    (tmp_path / "topologies" / "default.yml").write_text(TOPOLOGY)
    code, _, err = run(capsys, "check-config", "--config", str(gateway))
    assert code == 2
    assert "default.yml: (top level): topology 'default' is also defined by" in err


async def test_hot_reload_deploys_a_new_yml_topology(tmp_path):
    config = load_gateway_config(workdir(tmp_path))
    build = functools.partial(build_topology, gateway=config, schema=load_schema())
    topologies = load_topologies(config.topologies_dir)
    router = Router({name: build(t) for name, t in topologies.items()})
    reloader = TopologyReloader(config.topologies_dir, router, topologies, build)
    (config.topologies_dir / "second.yml").write_text(TOPOLOGY)
    try:
        assert await reloader.reload()
        assert router.resolve("second", "hms") is not None
    finally:
        await router.close()


@pytest.mark.parametrize("gateway_extra,topology_edit,line", [
    ("listeners: {gatway: {port: 1}}\n", None,
     "gateway.yaml: listeners.gatway: Extra inputs are not permitted; did you mean 'gateway'?"),
    ("limits: {max_request_byte: 10}\n", None,
     "gateway.yaml: limits.max_request_byte: Extra inputs are not permitted; did you mean 'max_request_bytes'?"),
    ("", ("users_file", "user_file"),
     "default.yaml: providers.authentication[0].user_file: Extra inputs are not permitted; "
     "did you mean 'users_file'?"),
    ("", ("upstream", "upstrem"),
     "default.yaml: services[0].upstrem: Extra inputs are not permitted; did you mean 'upstream'?"),
    ("", ("services", "servces"),
     "default.yaml: servces: Extra inputs are not permitted; did you mean 'services'?"),
    ("", ("services:", "providers2: {}\nservices:"),
     "default.yaml: providers2: Extra inputs are not permitted; did you mean 'providers'?"),
])
def test_a_misspelt_key_is_answered_with_the_closest_key(tmp_path, capsys, gateway_extra, topology_edit, line):
    gateway = workdir(tmp_path)
    if gateway_extra:
        text = gateway.read_text()
        if gateway_extra.startswith("listeners"):
            text = text.replace(text[text.index("listeners"):text.index("logging")], "")
        gateway.write_text(text + gateway_extra)
    if topology_edit:
        topology = tmp_path / "topologies" / "default.yaml"
        topology.write_text(topology.read_text().replace(*topology_edit, 1))
    code, _, err = run(capsys, "check-config", "--config", str(gateway))
    assert code == 2
    assert err.strip().endswith(line)


def test_a_misspelt_option_of_a_service_kind_is_answered_with_the_closest_key(tmp_path, capsys):
    gateway = workdir(tmp_path)
    topology = tmp_path / "topologies" / "default.yaml"
    head, _, _ = topology.read_text().rpartition("]")
    topology.write_text(head + ", {kind: event-stream, path: events, upstream: {urls: ['thrift://127.0.0.1:9']}, "
                               "options: {poll_interval_second: 2}}]\n")
    code, _, err = run(capsys, "check-config", "--config", str(gateway))
    assert code == 2
    assert err.strip().endswith("default.yaml: services[1].options.poll_interval_second: Extra inputs are "
                                "not permitted; did you mean 'poll_interval_seconds'?")


def test_a_key_nothing_resembles_gets_no_suggestion(tmp_path):
    gateway = workdir(tmp_path, "zzzz: 1\n")
    with pytest.raises(ConfigError) as error:
        load_gateway_config(gateway)
    assert error.value.reason == "Extra inputs are not permitted"
