"""The client distribution (clients/python, issue 41) installed on its own, as a user installs it
on a machine without the server: its wheel in a fresh venv with the ``tunnel`` extra, nothing of
the server's. From that venv, outside the repository (so the installed package is what runs):

* the venv holds ``hms_gateway_client`` and its own dependencies, and neither the ``gateway``
  package nor the server's libraries;
* its Python client reads the catalog through a real gateway in front of the session's real HMS;
* its console script ``hms-gateway-tunnel`` forwards Apache Thrift's generated client (a plain
  ``TSocket``, what Hive's own client speaks) to the same gateway.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.gateway import service, start_gateway
from tests.support.image import ImageVenv, install_client_venv
from tests.support.thrift_gen import hive_metastore_client
from tests.support.tunnel import start_tunnel

# The install's time depends on pip's cache and on the machine's load: a bound against hanging.
pytestmark = [pytest.mark.integration, pytest.mark.long, pytest.mark.timeout(900)]

USERS = {"admin": "admin-password"}
#: Distributions the server needs and a client machine must not get.
SERVER_ONLY = {"hms-gateway", "pydantic", "pyiceberg", "pyarrow", "prometheus-client", "ldap3", "botocore",
               "aiohttp-sse", "cloudevents", "stomp-py", "bcrypt"}

#: The client's own program, as docs/python-client.md shows it: the password from the environment.
READ_DATABASES = """
import json, os, sys
from hms_gateway_client import BasicAuth, connect
with connect(sys.argv[1], auth=BasicAuth("admin", os.environ["HMS_PASSWORD"]), ca=sys.argv[2]) as hms:
    print(json.dumps(sorted(hms.get_all_databases())))
"""


@pytest.fixture(scope="module")
def client(tmp_path_factory) -> ImageVenv:
    return install_client_venv(tmp_path_factory.mktemp("client"), extras="tunnel")


@pytest.fixture(scope="module")
def outside(tmp_path_factory) -> Path:
    """A working directory outside the repository."""
    return tmp_path_factory.mktemp("cwd")


@pytest.fixture(scope="module")
def gateway(hms, tmp_path_factory):
    gw = start_gateway(tmp_path_factory.mktemp("gw"), {"default": {"services": [service([hms.uri])]}}, USERS)
    yield gw
    gw.stop()


def test_the_venv_holds_the_client_without_the_server(client, outside):
    where = client.run(client.bin("python"), "-I", "-c",
                       "import importlib.util, hms_gateway_client; "
                       "print(hms_gateway_client.__file__); print(importlib.util.find_spec('gateway'))", cwd=outside)
    assert where.returncode == 0, where.stderr
    module, gateway = where.stdout.splitlines()
    assert Path(module).is_relative_to(client.site_packages), "the source tree, not the wheel, ran"
    assert gateway == "None", "the server package is importable from the client's venv"
    listed = client.run(client.bin("python"), "-m", "pip", "list", "--format", "json", cwd=outside)
    installed = {d["name"].lower() for d in json.loads(listed.stdout)}
    assert {"hms-gateway-client", "thriftpy2", "urllib3", "aiohttp", "uvloop"} <= installed
    assert not installed & SERVER_ONLY, f"the server's libraries in the client's install: {installed & SERVER_ONLY}"


def test_the_python_client_reads_the_catalog_through_the_gateway(client, gateway, direct, outside):
    with_password = ImageVenv(client.root, {**client.env, "HMS_PASSWORD": USERS["admin"]})
    read = with_password.run(client.bin("python"), "-I", "-c", READ_DATABASES, gateway.url(),
                             gateway.ca_file, cwd=outside)
    assert read.returncode == 0, read.stderr
    assert json.loads(read.stdout) == sorted(direct.get_all_databases())


def test_the_tunnel_script_forwards_a_hive_client_to_the_gateway(client, gateway, direct):
    tunnel = start_tunnel(gateway.url(), ["--auth", "basic", "--user", "admin", "--password-env", "TUNNEL_PW"],
                          ca=gateway.ca_file, env={"TUNNEL_PW": USERS["admin"]},
                          program=[str(client.bin("hms-gateway-tunnel"))])
    try:
        hive, transport = hive_metastore_client("127.0.0.1", tunnel.port)
        try:
            assert sorted(hive.get_all_databases()) == sorted(direct.get_all_databases())
            assert hive.get_table("hmshttptestdatabase", "test_table").tableName == "test_table"
        finally:
            transport.close()
    finally:
        tunnel.stop()
