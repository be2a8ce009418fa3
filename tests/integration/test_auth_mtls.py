"""Client-certificate authentication (mTLS) with real TLS and curl as the client."""

from __future__ import annotations

import json
import subprocess

import pytest

from gateway.certs import write_client_certificate, write_dev_certificates
from gateway.cli import main
from tests.support.gateway import MTLS, audit_record, htpasswd_provider, post, service

pytestmark = pytest.mark.integration

BODY = '[1,"get_all_databases",1,1,{}]'


@pytest.fixture(scope="module")
def gateway(hms, module_gateway_factory, tmp_path_factory):
    write_client_certificate(tmp_path_factory.mktemp("other-ca"), "mallory")  # a CA the gateway does not trust
    topology = {
        "providers": {"authentication": [{"type": "mtls"}, htpasswd_provider()]},
        "services": [service([f"thrift://127.0.0.1:{hms.port}"])],
    }
    gw = module_gateway_factory({"default": topology}, tls=MTLS)
    write_client_certificate(gw.workdir / "certs", "alice")
    return gw


def curl(gw, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["curl", "-sS", "-o", "-", "-w", "\n%{http_code}", "-D", "/dev/stderr", "--cacert", str(gw.ca_file),
         "--data", BODY, *args, gw.url()],
        capture_output=True, text=True, timeout=30,
    )


def test_client_certificate_authenticates_its_common_name(gateway):
    certs = gateway.workdir / "certs"
    out = curl(gateway, "--cert", str(certs / "alice.crt"), "--key", str(certs / "alice.key"),
               "-H", "X-Request-Id: mtls-alice-1")
    body, code = out.stdout.rsplit("\n", 1)
    assert code == "200" and json.loads(body)[2] == 2
    assert audit_record(gateway, "mtls-alice-1")["user"] == "alice"


def test_without_certificate_other_providers_still_work(gateway):
    status, headers, _ = post(gateway, BODY, auth=None)
    assert status == 401
    assert headers.get_all("WWW-Authenticate") == ['Basic realm="HMS Gateway", charset="UTF-8"']
    assert post(gateway, BODY)[0] == 200


def test_certificate_from_an_untrusted_ca_fails_the_handshake(gateway, tmp_path):
    cert, key = write_client_certificate(tmp_path, "mallory")
    out = curl(gateway, "--cert", str(cert), "--key", str(key))
    assert out.returncode != 0 and not out.stdout.endswith("200")


def test_mtls_without_client_ca_is_a_config_error(tmp_path, capsys):
    certs = write_dev_certificates(tmp_path / "certs")
    (tmp_path / "users").write_text("")
    (tmp_path / "topologies").mkdir()
    (tmp_path / "topologies" / "t.yaml").write_text(
        "providers: {authentication: [{type: mtls}]}\n"
        "services: [{path: p, upstream: {urls: ['thrift://h:9083']}}]\n")
    (tmp_path / "gateway.yaml").write_text(
        f"tls: {{certificate: {certs.certificate}, private_key: {certs.private_key}}}\n")
    assert main(["check-config", "--config", str(tmp_path / "gateway.yaml")]) == 2
    err = capsys.readouterr().err
    assert "t.yaml: providers.authentication[0]: type mtls needs tls.client_ca" in err
