"""Chains declared as data (issue 21): steps registered by role, each kind naming its roles,
``build_topology`` building only those; the Thrift kind's ``options.methods`` checked against
the IDL; ``docs/architecture.md``'s tables of roles and chains equal to the code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gateway.config import ConfigError, GatewayConfig, TLSConfig, load_topology_file
from gateway.pipeline.step import Step
from gateway.pipeline.steps import STEPS, UnknownRole, build_chain, step_class
from gateway.pipeline.steps.authentication import Authentication
from gateway.hms_thrift.steps.catalog_policy import CatalogPolicy
from gateway.hms_thrift.steps.exposure import MethodExposure
from gateway.pipeline.steps.identity_assertion import IdentityAssertion
from gateway.hms_thrift.steps.ownership import OwnershipAssertion
from gateway.pipeline.steps.service_acl import ServiceAcl
from gateway.hms_thrift.steps.ugi_claim import UgiClaim
from gateway.services import KINDS, service_kind
from gateway.topology import build_topology

REPO = Path(__file__).resolve().parents[2]
HMS = "{urls: ['thrift://hms:9083']}"
POLICY = """
policies:
  - id: 1
    name: analysts read sales
    resources: {database: [sales], table: ["*"], column: ["*"]}
    allow: [{groups: [analysts], accesses: [select]}]
"""


class _Odd:
    kind = "odd"
    roles = ("authentication", "nope")


class _Bare:
    kind = "bare"



def _build(tmp_path: Path, services: str):
    (tmp_path / "users.htpasswd").write_text("")
    (tmp_path / "policy.yaml").write_text(POLICY)
    path = tmp_path / "t.yaml"
    path.write_text("providers:\n  authentication:\n    - {type: htpasswd, users_file: users.htpasswd}\n"
                    f"services:\n{services}")
    gateway = GatewayConfig(tls=TLSConfig(certificate=tmp_path / "c", private_key=tmp_path / "k"))
    return build_topology(load_topology_file(path), gateway)


def _types(service) -> list[type]:
    return [type(step) for step in service.handler.chain.steps]


def test_every_role_resolves_to_a_step_class_declaring_it():
    for role in STEPS:
        cls = step_class(role)
        assert issubclass(cls, Step) and cls.name == role


def test_an_unknown_role_is_a_clear_error():
    with pytest.raises(UnknownRole, match="no pipeline step has role 'acl'; known roles: authentication"):
        step_class("acl")
    with pytest.raises(UnknownRole):
        build_chain(("authentication", "acl"), None)  # type: ignore[arg-type]


@pytest.mark.parametrize("kind, error, message", [
    ("odd", UnknownRole, "service kind 'odd' .* unknown step role 'nope'; known roles: authentication"),
    ("bare", TypeError, "must declare roles"),  # never a kind without a chain
])
def test_a_kind_naming_an_unknown_role_or_none_fails_when_loaded(monkeypatch, kind, error, message):
    monkeypatch.setitem(KINDS, kind, f"{__name__}:_{kind.capitalize()}")
    service_kind.cache_clear()
    try:
        with pytest.raises(error, match=message):
            service_kind(kind)
    finally:
        service_kind.cache_clear()


def test_the_thrift_kind_builds_its_whole_chain_in_order(tmp_path):
    topology = _build(tmp_path, f"  - {{path: api, upstream: {HMS}, policy_file: policy.yaml}}\n")
    assert _types(topology.services["api"]) == [
        Authentication, IdentityAssertion, ServiceAcl, MethodExposure, UgiClaim, CatalogPolicy,
        OwnershipAssertion]


def test_catalog_policy_is_built_only_for_a_service_with_a_policy_file(tmp_path):
    topology = _build(tmp_path, f"  - {{path: api, upstream: {HMS}}}\n")
    assert CatalogPolicy not in _types(topology.services["api"])


def test_a_glue_service_gets_only_its_roles_and_the_policy_engine(tmp_path):
    topology = _build(tmp_path, f"  - {{path: api, upstream: {HMS}}}\n"
                                f"  - {{kind: glue, path: glue, upstream: {HMS}, policy_file: policy.yaml}}\n")
    glue = topology.services["glue"].handler
    assert _types(topology.services["glue"]) == [Authentication, IdentityAssertion, ServiceAcl]
    assert glue.policy is not None  # the kind judges with the engine itself
    # What a topology shares is built once: the same authentication (and throttle) object.
    assert glue.chain.steps[0] is topology.services["api"].handler.chain.steps[0]


def test_exposed_methods_are_the_thrift_kinds_option(tmp_path):
    topology = _build(tmp_path, f"  - {{path: api, upstream: {HMS}, options: {{methods: [get_table]}}}}\n")
    exposure = next(s for s in topology.services["api"].handler.chain.steps if isinstance(s, MethodExposure))
    assert exposure.methods == frozenset({"get_table"})


def test_a_misspelled_method_names_the_key_and_the_closest_name(tmp_path):
    with pytest.raises(ConfigError) as info:
        _build(tmp_path, f"  - {{path: api, upstream: {HMS}, options: {{methods: [get_table, get_tabel]}}}}\n")
    assert info.value.key == "services[0].options.methods[1]"
    assert info.value.reason == "'get_tabel' is not a method of the IDL; did you mean 'get_table'?"


def test_methods_at_the_service_level_say_where_they_moved(tmp_path):
    with pytest.raises(ConfigError) as info:
        _build(tmp_path, f"  - {{path: api, upstream: {HMS}, methods: [get_table]}}\n")
    assert info.value.key == "services[0].methods"
    assert "moved to options.methods" in info.value.reason


def test_bad_options_of_a_later_service_stop_the_build_before_anything_is_built(tmp_path):
    with pytest.raises(ConfigError) as info:
        _build(tmp_path, f"  - {{kind: explorer, path: x, options: {{thrift_service: api}}}}\n"
                         f"  - {{path: api, upstream: {HMS}, options: {{methods: [nope_at_all_zzz]}}}}\n")
    assert info.value.key == "services[1].options.methods[0]"


def _table(marker_heading: str) -> dict[str, str]:
    """First column → second column of the Markdown table after ``marker_heading``."""
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    start = text.index(marker_heading)
    rows = {}
    for line in text[start:].splitlines()[1:]:
        if not line.startswith("|"):
            if rows:
                break
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if set(cells[0]) <= {"-", " "} or cells[0] in ("kind", "role"):
            continue
        rows[cells[0].strip("`")] = cells[1]
    return rows


def test_the_documented_chains_are_the_kinds_roles():
    documented = {kind: tuple(re.findall(r"`([a-z-]+)`", chain))
                  for kind, chain in _table("<!-- chains -->").items()}
    assert documented == {kind: service_kind(kind).roles for kind in KINDS}


def test_the_documented_roles_are_the_registry():
    roles = _table("| role | module | hook | may end the request with |\n")
    assert list(roles) == list(STEPS)
    for role, module in roles.items():
        path = re.search(r"`((?:pipeline|hms_thrift)/steps/\w+\.py)`", module).group(1)
        assert STEPS[role].partition(":")[0] == "gateway." + path[:-3].replace("/", ".")
