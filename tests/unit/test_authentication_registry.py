"""The provider registry: a provider is one module plus one registry line, nothing in config.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import get_args

import pytest

from gateway.config import GatewayConfig, TLSConfig
from gateway.providers.authentication import registry
from gateway.providers.authentication.mtls import MtlsProvider

REPO = Path(__file__).resolve().parents[2]

# A provider written the way docs/architecture.md says: settings model, authenticator, factory and
# a gateway-file check in one module.
DEMO_MODULE = '''
from typing import Literal

from gateway.providers.authentication.base import Principal
from gateway.providers.authentication.settings import ProviderSettings


class DemoProvider(ProviderSettings):
    type: Literal["demo"]
    user: str

    def check(self, gateway):
        return None if gateway.limits.max_request_bytes > 1000 else "demo needs bigger requests"

    def build(self):
        return DemoAuthenticator(self.user)


class DemoAuthenticator:
    name = "demo"

    def __init__(self, user):
        self.user = user

    def challenge(self):
        return "Demo"

    async def authenticate(self, request):
        return Principal(name=self.user, provider=self.name)
'''

DEMO_RUN = '''
import json, sys
from pathlib import Path
from gateway.providers.authentication import registry
registry.PROVIDERS["demo"] = "demo_provider:DemoProvider"  # the one registry line
from gateway.config import ConfigError, GatewayConfig, Limits, TLSConfig, load_topology_file
from gateway.pipeline.steps.authentication import authentication_providers
from gateway.topology import build_topology

tls = TLSConfig(certificate="c.pem", private_key="k.pem")
out = {}
topology = load_topology_file(Path(sys.argv[1]) / "good.yaml")
built = authentication_providers(topology.providers, GatewayConfig(tls=tls), topology.source)
out["built"] = [type(p).__name__ for p in built]
out["challenges"] = [p.challenge() for p in built]
try:
    load_topology_file(Path(sys.argv[1]) / "bad.yaml")
except ConfigError as exc:
    out["bad"] = [exc.key, exc.reason]
try:
    build_topology(topology, GatewayConfig(tls=tls, limits=Limits(max_request_bytes=10)))
except ConfigError as exc:
    out["check"] = [exc.file, exc.key, exc.reason]
print(json.dumps(out))
'''

TOPOLOGY = """
providers:
  authentication:
    - {type: htpasswd, users_file: users}
    - %s
services:
  - path: x
    upstream: {urls: ["thrift://hms:9083"]}
"""


def test_a_new_provider_needs_one_module_and_one_registry_line(tmp_path: Path):
    (tmp_path / "demo_provider.py").write_text(DEMO_MODULE)
    (tmp_path / "users").write_text("")
    (tmp_path / "good.yaml").write_text(TOPOLOGY % "{type: demo, user: dora}")
    (tmp_path / "bad.yaml").write_text(TOPOLOGY % "{type: demo, user: dora, colour: red}")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    run = subprocess.run([sys.executable, "-c", DEMO_RUN, str(tmp_path)], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["built"] == ["HtpasswdAuthenticator", "DemoAuthenticator"]
    assert out["challenges"] == ['Basic realm="HMS Gateway", charset="UTF-8"', "Demo"]
    assert out["bad"] == ["providers.authentication[1].colour", "Extra inputs are not permitted"]
    assert out["check"] == [str(tmp_path / "good.yaml"), "providers.authentication[1]",
                            "demo needs bigger requests"]


def test_every_registered_model_carries_its_own_tag():
    models = registry.settings_models()
    assert [get_args(m.model_fields["type"].annotation) for m in models] == [
        (tag,) for tag in registry.PROVIDERS
    ]


@pytest.mark.parametrize(
    ("target", "reason"),
    [
        ("gateway.providers.authentication.mtls:MtlsProvider", "must declare type: Literal['ldap']"),
        ("gateway.providers.authentication.mtls:MtlsAuthenticator", "is not a ProviderSettings"),
    ],
)
def test_registry_refuses_a_wrong_entry(target: str, reason: str):
    with pytest.raises(TypeError, match=re.escape(reason)):
        registry._load("ldap", target)


def test_mtls_declares_that_it_needs_a_client_ca(tmp_path: Path):
    tls = TLSConfig(certificate=tmp_path / "c.pem", private_key=tmp_path / "k.pem")
    mtls = MtlsProvider(type="mtls")
    assert mtls.check(GatewayConfig(tls=tls)) == "type mtls needs tls.client_ca in the gateway file"
    with_ca = tls.model_copy(update={"client_ca": tmp_path / "ca.pem"})
    assert mtls.check(GatewayConfig(tls=with_ca)) is None
