"""Topology files with LDAP and Kerberos providers: errors name file, key and reason."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gateway.config import ConfigError, load_topology_file

LDAP = {"type": "ldap", "url": "ldap://ldap:389", "user_dn_template": "uid={user},dc=x"}
KRB = {"type": "kerberos", "principal": "HTTP/gw.example.org@EXAMPLE.ORG", "keytab": "gw.keytab"}


def write(tmp_path: Path, provider: dict) -> Path:
    topo = tmp_path / "t.yaml"
    topo.write_text(yaml.safe_dump({
        "providers": {"authentication": [provider]},
        "services": [{"path": "x", "upstream": {"urls": ["thrift://h:9083"]}}],
    }))
    return topo


@pytest.mark.parametrize(
    ("provider", "key", "reason"),
    [
        ({**LDAP, "url": "http://ldap"}, "providers.authentication[0].url", "not an ldap://"),
        ({"type": "ldap", "url": "ldap://l"}, "providers.authentication[0]", "user_dn_template"),
        ({**LDAP, "bind_dn": "cn=gw"}, "providers.authentication[0]", "go together"),
        ({**LDAP, "bind_dn": "cn=gw", "bind_password": "plain"}, "bind_password", "never inline"),
        ({**LDAP, "ca_file": "nope.pem"}, "providers.authentication[0].ca_file", "no such file"),
        ({**LDAP, "url": "ldaps://l", "start_tls": True}, "providers.authentication[0]", "start_tls"),
        # Issue 48: the user name is an attribute's value, so the settings must name the attribute.
        ({**LDAP, "user_dn_template": "cn=x,uid={user},dc=x"}, "providers.authentication[0]",
         "must start with <attribute>={user},"),
        ({"type": "ldap", "url": "ldap://l", "user_search_base": "dc=x", "user_search_filter": "(uid=pre-{user})"},
         "providers.authentication[0]", "compare an attribute with exactly {user}"),
        ({**KRB, "principal": "alice"}, "principal", "service principal"),
        (KRB, "providers.authentication[0].keytab", "no such file"),
        ({**KRB, "name_rules": ["RULE:nonsense"]}, "name_rules", "not an auth_to_local rule"),
        ({**KRB, "cookie": {"signing_key": "inline"}}, "cookie.signing_key", "never inline"),
        ({"type": "saml"}, "providers.authentication[0]", "does not match"),
    ],
)
def test_bad_provider_config(tmp_path: Path, provider: dict, key: str, reason: str):
    with pytest.raises(ConfigError) as info:
        load_topology_file(write(tmp_path, provider))
    assert str(tmp_path / "t.yaml") in str(info.value)
    assert key in info.value.key
    assert reason in info.value.reason


def test_relative_paths_resolve_against_the_topology_file(tmp_path: Path, monkeypatch):
    (tmp_path / "gw.keytab").write_bytes(b"\x05\x02")
    monkeypatch.setenv("P4A_KEYTAB", str(tmp_path / "gw.keytab"))
    cfg = load_topology_file(write(tmp_path, KRB))
    assert cfg.providers.authentication[0].keytab == tmp_path / "gw.keytab"
    cfg = load_topology_file(write(tmp_path, {**KRB, "keytab": "env:P4A_KEYTAB"}))
    assert cfg.providers.authentication[0].keytab == tmp_path / "gw.keytab"
