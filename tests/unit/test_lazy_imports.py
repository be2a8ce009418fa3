"""What a worker holds before it serves (issue 41, "Memory and start-up"): building a topology
of the ``hms-thrift``, ``glue``, ``explorer`` or ``iceberg-rest`` kind imports neither pyarrow
nor PyIceberg (with the Hive client PyIceberg's catalog brings, ``hive_metastore``); a
Thrift-only one with Basic (htpasswd) none of the client libraries of the providers it does not
name (ldap3, python-gssapi, botocore: ``ProviderSettings.authenticator``); the
``iceberg-rest`` kind imports its request side (:mod:`gateway.iceberg.engine`, PyIceberg with
it) at its service's first request, once. The checks run in one fresh interpreter (this one has
imported everything already), which builds each kind's topology in turn and notes what each
build added to ``sys.modules``, then sends the Iceberg service its first requests."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.explorer import METHODS

ROOT = Path(__file__).resolve().parents[2]

#: What only a request may import: pyarrow (PyIceberg's PyArrowFileIO), PyIceberg and the Hive
#: Thrift client PyIceberg's catalog module brings, the Iceberg kind's request side.
DEFERRED = ("pyarrow", "pyiceberg", "hive_metastore", "gateway.iceberg.engine")
#: What only a topology naming the provider may import (``ldap``, ``kerberos``, ``sigv4``).
PROVIDER_LIBRARIES = ("ldap3", "gssapi", "botocore")

_HMS = "upstream: {urls: ['thrift://hms:9083']}"
#: A topology's ``services`` (a YAML flow list) for each kind, built in this order.
SERVICES = {
    "hms-thrift": f"[{{kind: hms-thrift, path: api, {_HMS}}}]",
    "glue": f"[{{kind: glue, path: api, {_HMS}}}]",
    "explorer": f"[{{kind: hms-thrift, path: hms, {_HMS}, options: {{methods: [{', '.join(METHODS)}]}}}}, "
                "{kind: explorer, path: api, options: {thrift_service: hms}}]",
    "iceberg-rest": f"[{{kind: iceberg-rest, path: ice, {_HMS}}}]",
}

_PROGRAM = """
import asyncio, json, sys
from pathlib import Path
from aiohttp.test_utils import make_mocked_request
from gateway.config import GatewayConfig, TLSConfig, load_topology_file
from gateway.observability.audit import AuditEvent
from gateway.pipeline.exchange import Exchange
from gateway.topology import build_topology

work, services, deferred = Path(sys.argv[1]), json.loads(sys.argv[2]), json.loads(sys.argv[3])
(work / "users.htpasswd").write_text("")
gateway = GatewayConfig(tls=TLSConfig(certificate=work / "c", private_key=work / "k"))
found, built = {}, {}
for kind, listed in services.items():
    (work / "t.yaml").write_text("providers: {authentication: [{type: htpasswd, users_file: users.htpasswd}]}\\n"
                                 "services: " + listed + "\\n")
    built[kind] = build_topology(load_topology_file(work / "t.yaml"), gateway)
    found[kind] = sorted(m for m in deferred if m in sys.modules)
handler = built["iceberg-rest"].services["ice"].handler

async def first_requests():
    requests = [make_mocked_request("GET", "/gateway/t/ice/v1/no-such-route") for _ in range(3)]
    for request in requests:
        request.content.feed_eof()
    answers = await asyncio.gather(*(handler.handle(Exchange(r, AuditEvent("r", None))) for r in requests))
    return [response.status for response, _ in answers]

found["statuses"] = asyncio.run(first_requests())
found["engine"] = type(handler.engine).__module__
found["served"] = sorted(m for m in deferred if m in sys.modules)
print(json.dumps(found))
"""


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> dict:
    """What the fresh interpreter found: per kind, the deferred modules imported once its
    topology (and those before it) was built; then the Iceberg service's answers."""
    run = subprocess.run([sys.executable, "-c", _PROGRAM, str(tmp_path_factory.mktemp("lazy")),
                          json.dumps(SERVICES), json.dumps(DEFERRED + PROVIDER_LIBRARIES)],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.splitlines()[-1])


@pytest.mark.parametrize("kind", list(SERVICES))
def test_building_a_kind_imports_nothing_only_a_request_needs(imported, kind):
    assert set(imported[kind]) & set(DEFERRED) == set()


def test_a_thrift_only_topology_imports_no_client_library_of_another_provider(imported):
    assert next(iter(SERVICES)) == "hms-thrift"  # built first, in a fresh interpreter
    assert imported["hms-thrift"] == []


def test_the_iceberg_kind_loads_its_request_side_at_the_first_request(imported):
    # three first requests at once, each through the route table (a route the API lacks is
    # refused after authentication: 401 without credentials), one engine loaded for them
    assert imported["statuses"] == [401, 401, 401] and imported["engine"] == "gateway.iceberg.engine"
    assert {"pyiceberg", "gateway.iceberg.engine"} <= set(imported["served"])
