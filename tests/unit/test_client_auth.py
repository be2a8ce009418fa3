"""hms_gateway_client.auth: headers per scheme, secrets from env/netrc/file, errors without secrets."""

from __future__ import annotations

import base64
import ssl

import pytest

from gateway.certs import write_dev_certificates

from hms_gateway_client.auth import (
    BasicAuth,
    BearerAuth,
    ClientCertificateAuth,
    KerberosAuth,
    auth_from_options,
    ssl_context,
)

SECRET = "s3cr3t-Pa55"


def test_basic_header_is_rfc7617():
    auth = BasicAuth("etl", SECRET)
    value = auth.headers("gw")["Authorization"]
    assert value.startswith("Basic ")
    assert base64.b64decode(value[6:]).decode() == f"etl:{SECRET}"
    assert auth.client_certificate is None
    assert SECRET not in repr(auth)


def test_basic_password_from_env(monkeypatch):
    monkeypatch.setenv("HMS_PW", SECRET)
    auth = auth_from_options("basic", user="etl", password_env="HMS_PW")
    assert auth.headers("gw") == BasicAuth("etl", SECRET).headers("gw")


def test_basic_password_from_file(tmp_path):
    f = tmp_path / "pw"
    f.write_text(SECRET + "\n")
    auth = auth_from_options("basic", user="etl", password_file=str(f))
    assert auth.headers("gw") == BasicAuth("etl", SECRET).headers("gw")


def test_basic_from_netrc(tmp_path):
    f = tmp_path / "netrc"
    f.write_text(f"machine gw.example login etl password {SECRET}\n")
    f.chmod(0o600)
    auth = auth_from_options("basic", netrc=str(f), host="gw.example")
    assert auth.headers("gw.example") == BasicAuth("etl", SECRET).headers("x")
    with pytest.raises(ValueError, match="no entry for other.example"):
        auth_from_options("basic", netrc=str(f), host="other.example")
    with pytest.raises(ValueError, match="another user"):
        auth_from_options("basic", user="bob", netrc=str(f), host="gw.example")


def test_missing_env_names_the_variable_not_a_secret(monkeypatch):
    monkeypatch.delenv("HMS_PW", raising=False)
    with pytest.raises(ValueError, match="HMS_PW"):
        auth_from_options("basic", user="etl", password_env="HMS_PW")


def test_two_sources_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("HMS_PW", SECRET)
    with pytest.raises(ValueError, match="exactly one") as info:
        auth_from_options("basic", user="etl", password_env="HMS_PW", password_file="/x")
    assert SECRET not in str(info.value)


def test_bearer_from_env_and_file(monkeypatch, tmp_path):
    monkeypatch.setenv("HMS_TOKEN", "a.b.c")
    assert auth_from_options("bearer", token_env="HMS_TOKEN").headers("gw") == {
        "Authorization": "Bearer a.b.c"
    }
    f = tmp_path / "tok"
    f.write_text("x.y.z\n")
    auth = auth_from_options("bearer", token_file=str(f))
    assert auth.headers("gw") == {"Authorization": "Bearer x.y.z"}
    assert "x.y.z" not in repr(auth)
    with pytest.raises(ValueError, match="empty"):
        (tmp_path / "empty").write_text("\n")
        auth_from_options("bearer", token_file=str(tmp_path / "empty"))


def test_bearer_rejects_whitespace():
    with pytest.raises(ValueError, match="whitespace"):
        BearerAuth("a b")


def test_cert_auth_loads_into_ssl_context(tmp_path):
    # The server pair stands in for a client pair: load_cert_chain only checks they match.
    certs = write_dev_certificates(tmp_path / "certs")
    auth = auth_from_options("cert", cert=str(certs.certificate), key=str(certs.private_key))
    assert isinstance(auth, ClientCertificateAuth)
    assert auth.headers("gw") == {}
    ctx = ssl_context(str(certs.ca_certificate), auth)
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    with pytest.raises(ValueError, match="does not exist"):
        auth_from_options("cert", cert=str(tmp_path / "nope.crt"), key=str(certs.private_key))


def test_ssl_context_verifies_by_default():
    ctx = ssl_context(None, None)
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname


def test_ssl_context_bad_ca_is_value_error(tmp_path):
    with pytest.raises(ValueError, match="cannot load TLS files: no such CA bundle file: .*missing.pem"):
        ssl_context(str(tmp_path / "missing.pem"), None)


def test_kerberos_without_ccache_is_value_error(monkeypatch, tmp_path):
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{tmp_path}/none")
    auth = auth_from_options("kerberos", service="HTTP")
    assert isinstance(auth, KerberosAuth)
    with pytest.raises(ValueError, match="HTTP@gw.example"):
        auth.headers("gw.example")


def test_unknown_method():
    with pytest.raises(ValueError, match="unknown auth method"):
        auth_from_options("digest")
