"""The Kerberized demo metastore's settings (issue 38): what HMS's hive-site.xml and
core-site.xml get (demo/hms_kerberos.py), and the demo's topologies with SASL to it
(demo/kerberos.py). tests/integration/test_kerberized_metastore.py runs them for real."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from demo.hms import EmbeddedHMS
from demo.hms_kerberos import HMSKerberos
from demo.kerberos import GATEWAY_PRINCIPAL, SERVICE_PRINCIPAL_PATTERN, kerberos_topologies

REPO = Path(__file__).resolve().parents[2]


def _properties(xml: str) -> dict[str, str]:
    return {p.findtext("name"): p.findtext("value") for p in ET.fromstring(xml).iter("property")}


def settings(tmp_path: Path, **options) -> HMSKerberos:
    return HMSKerberos(principal="hive/localhost@GATEWAY.TEST", keytab=tmp_path / "hive.keytab",
                       krb5_conf=tmp_path / "krb5.conf", **options)


def test_hive_site_turns_sasl_on_with_the_service_principal_and_token_lifetimes(tmp_path):
    hms = EmbeddedHMS(tmp_path, 9083, kerberos=settings(tmp_path, token_renew_interval_ms=5000,
                                                          token_max_lifetime_ms=20000))
    props = _properties(hms._hive_site())
    assert props["hive.metastore.sasl.enabled"] == "true"
    assert props["hive.metastore.kerberos.principal"] == "hive/localhost@GATEWAY.TEST"
    assert props["hive.metastore.kerberos.keytab.file"] == str(tmp_path / "hive.keytab")
    # Hive 2.3 reads both with Configuration.getLong: milliseconds
    assert props["hive.cluster.delegation.token.renew-interval"] == "5000"
    assert props["hive.cluster.delegation.token.max-lifetime"] == "20000"
    assert "hive.metastore.sasl.enabled" not in _properties(EmbeddedHMS(tmp_path, 9083)._hive_site())


def test_core_site_names_kerberos_the_qop_and_each_proxy_user(tmp_path):
    props = _properties(settings(tmp_path, proxy_users=("hmsgw",), protection="integrity,privacy").core_site())
    assert props == {
        "hadoop.security.authentication": "kerberos",
        "hadoop.rpc.protection": "integrity,privacy",
        "hadoop.proxyuser.hmsgw.hosts": "*",
        "hadoop.proxyuser.hmsgw.groups": "*",
    }
    refusing = _properties(settings(tmp_path).core_site())  # no proxy user: every impersonation refused
    assert not [name for name in refusing if name.startswith("hadoop.proxyuser.")]
    assert settings(tmp_path).jvm_options() == [f"-Djava.security.krb5.conf={tmp_path / 'krb5.conf'}"]


@pytest.mark.parametrize("protection", ["", "auth-conf", "privacy,secret"])
def test_an_unknown_protection_is_refused(tmp_path, protection):
    with pytest.raises(ValueError, match="hadoop.rpc.protection"):
        settings(tmp_path, protection=protection)


def test_the_demo_topologies_get_sasl_on_every_thrift_upstream(tmp_path):
    sasl = {"principal": GATEWAY_PRINCIPAL, "keytab": str(tmp_path / "hmsgw.keytab"),
            "service_principal": SERVICE_PRINCIPAL_PATTERN, "protection": "authentication"}
    target = kerberos_topologies(REPO / "config" / "topologies", tmp_path / "topologies", sasl)
    written = {p.stem: yaml.safe_load(p.read_text()) for p in target.glob("*.yaml")}
    source = {p.stem: yaml.safe_load(p.read_text()) for p in (REPO / "config" / "topologies").glob("*.yaml")}
    assert written.keys() == source.keys()
    thrift_upstreams = 0
    for name, topology in written.items():
        assert [s["path"] for s in topology["services"]] == [s["path"] for s in source[name]["services"]]
        for service in topology["services"]:
            upstream = service.get("upstream")
            if upstream is None:  # the explorer calls a Thrift service of its topology
                continue
            thrift_upstreams += 1
            assert upstream["sasl"] == sasl, (name, service["path"])
    assert thrift_upstreams >= 6
    assert "sasl" not in (REPO / "config" / "topologies" / "default.yaml").read_text()  # config/ stays as it is
