"""The image's install starts every service kind (issue 30).

No Docker engine runs here, so the builder stage's install (Dockerfile) is replayed
(:func:`tests.support.image.install_image_venv`): the project's wheel, then a fresh venv holding
that wheel and its runtime dependencies, no extras. From that venv, outside the repository (so
the installed package is what runs, never the source tree):

* ``hms-gateway check-config`` accepts every shipped configuration: config/gateway.yaml with
  config/topologies, config/examples, the Helm chart's values as the chart mounts them, and every
  configuration block of the docs (laid out as the doc-snippet test lays them out);
* one gateway serving config/topologies, which hold a service of every kind
  (``gateway.services.KINDS``), in front of the session's real HMS answers ``/readyz`` with 200;
* the libraries that extensions built here from source (gssapi, krb5, the Thrift translator)
  link against are installed by the image's runtime stage;
* the server package holds the server only (issue 41): neither the demo (``demo/``, run from the
  repository) nor the client distribution's modules (``hms_gateway_client``: the Python client,
  the tunnel, the Spark data source), and ``hms-gateway tunnel`` says the tunnel is the client
  distribution's ``hms-gateway-tunnel`` and what to install for it.

A runtime import missing from the dependencies (Apache thrift, before this issue) fails here,
which the suite's own venv (holding every extra) cannot show.
"""

from __future__ import annotations

import json
from pathlib import Path

import dockerfile
import pytest
import yaml

from gateway.services import KINDS
from tests.support.config_check import merge_values, write_chart_config
from tests.support.config_sandbox import Sandbox, add_file, shipped_topologies, write_materials
from tests.support.doc_snippets import ROOT, collect
from tests.support.gateway import readyz, start_gateway, wait_for
from tests.support.image import DOCKERFILE, ImageVenv, apt_packages, distribution_files, install_image_venv, \
    linked_packages, locally_built_extensions, stages

# The install's time depends on pip's cache and on the machine's load: a bound against hanging.
pytestmark = [pytest.mark.integration, pytest.mark.long, pytest.mark.timeout(1800)]

CHART = ROOT / "helm" / "hms-gateway"
DEMO_USERS = {"admin": "admin-password", "etl": "etl-password"}
#: Distributions of the [test]/[demo] extras that must never reach the image.
DEV_ONLY = {"pytest", "pytest-asyncio", "pytest-timeout", "pytest-xdist", "hypothesis", "pyspark", "moto", "playwright"}
#: Modules the server's wheel must not carry (issue 41): the demo's and the client distribution's,
#: at their places now and at the ones they had in the server package before.
NOT_SERVER = ("demo", "hms_gateway_client", "gateway.demo", "gateway.client", "gateway.tunnel", "gateway.datasource")
#: Where their files would lie below site-packages.
NOT_SERVER_FILES = ("demo/", "hms_gateway_client/", "gateway/demo/", "gateway/client/", "gateway/tunnel.py",
                    "gateway/datasource/")

#: ``hms-gateway check-config --config <file>`` (the console script's ``main``) for each file
#: given, in one interpreter of the image's venv: importing the service kinds takes seconds, paid
#: once. Prints {file: [exit status, output]} as JSON; an exception is status 1 with its traceback.
CHECK_CONFIG = """
import contextlib, io, json, sys, traceback
from gateway.cli import main
verdicts = {}
for path in sys.argv[1:]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            status = main(["check-config", "--config", path])
        except Exception:
            status = 1
            traceback.print_exc()
    verdicts[path] = [status, out.getvalue()]
print(json.dumps(verdicts))
"""


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> ImageVenv:
    return install_image_venv(tmp_path_factory.mktemp("image"))


@pytest.fixture(scope="module")
def outside(tmp_path_factory) -> Path:
    """A working directory outside the repository."""
    return tmp_path_factory.mktemp("cwd")


def test_the_venv_holds_the_wheel_and_runtime_dependencies_only(image, outside):
    where = image.run(image.bin("python"), "-I", "-c", "import gateway; print(gateway.__file__)", cwd=outside)
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(image.site_packages), "the source tree, not the wheel, ran"
    listed = image.run(image.bin("python"), "-m", "pip", "list", "--format", "json", cwd=outside)
    installed = {d["name"].lower() for d in json.loads(listed.stdout)}
    assert "hms-gateway" in installed
    assert not (installed & DEV_ONLY), f"test/demo dependencies in the runtime install: {installed & DEV_ONLY}"


def test_the_server_package_holds_neither_the_demo_nor_the_client_tools(image, outside):
    files = distribution_files(image, "hms-gateway")
    assert "gateway/thrift/binary.py" in files and "gateway/cli.py" in files, "not the server's RECORD"
    carried = [f for f in files if f.startswith(NOT_SERVER_FILES)]
    assert not carried, f"the server's wheel carries demo or client modules: {carried}"
    probe = ("import importlib.util, json, sys; "
             "print(json.dumps({name: importlib.util.find_spec(name) is not None for name in sys.argv[1:]}))")
    found = image.run(image.bin("python"), "-I", "-c", probe, *NOT_SERVER, cwd=outside)
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout) == dict.fromkeys(NOT_SERVER, False)
    listed = image.run(image.bin("python"), "-m", "pip", "list", "--format", "json", cwd=outside)
    assert "hms-gateway-client" not in {d["name"].lower() for d in json.loads(listed.stdout)}
    tunnel = image.run(image.bin("hms-gateway"), "tunnel", "--gateway", "https://gw:8443/gateway/t/hms",
                       "--auth", "basic", cwd=outside)
    assert tunnel.returncode == 2, tunnel.stderr
    assert "client distribution" in tunnel.stderr and "pip install 'hms-gateway-client[tunnel]'" in tunnel.stderr
    assert "hms-gateway-tunnel" in tunnel.stderr


def shipped_configurations(root: Path, materials: dict[str, Path]) -> dict[str, Path]:
    """Every configuration the project ships or prints, laid out under ``root``: what it is →
    its gateway file."""
    laid: dict[str, Path] = {}
    demo = Sandbox(root / "demo", materials)
    add_file(demo, ROOT / "config" / "gateway.yaml", "gateway.yaml")
    for path in sorted((ROOT / "config" / "topologies").glob("*.yaml")):
        add_file(demo, path, f"topologies/{path.name}")
    laid["config/gateway.yaml + config/topologies"] = demo.layout()
    examples = Sandbox(root / "examples", materials)
    for path in sorted((ROOT / "config" / "examples").rglob("*.yaml")):
        add_file(examples, path, "gateway.yaml" if path.name == "gateway.yaml" else f"topologies/{path.name}")
    laid["config/examples"] = examples.layout()
    chart_defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    helm = {"helm/hms-gateway/values.yaml": chart_defaults}
    for i, snippet in enumerate(collect()):
        if snippet.kind in ("topology", "provider", "gateway"):
            sandbox = Sandbox(root / f"doc-{i}", materials)
            sandbox.add_block(snippet)
            laid[snippet.where] = sandbox.layout()
        elif snippet.kind == "helm-values":
            helm[snippet.where] = merge_values(chart_defaults, yaml.safe_load(snippet.body))
    for i, (where, values) in enumerate(helm.items()):
        laid[where] = write_chart_config(values, root / f"chart-{i}" / "etc", certificate=materials["certificate"],
                                         private_key=materials["private_key"], users_file=materials["users"])
    return laid


def test_check_config_accepts_every_shipped_configuration(image, outside, tmp_path):
    laid = shipped_configurations(tmp_path, write_materials(tmp_path / "materials"))
    assert {"config/gateway.yaml + config/topologies", "config/examples", "helm/hms-gateway/values.yaml"} <= laid.keys()
    assert any(where.startswith("docs/") for where in laid), "no configuration block found in the docs"
    checked = image.run(image.bin("python"), "-I", "-c", CHECK_CONFIG, *laid.values(), cwd=outside)
    assert checked.returncode == 0, checked.stderr[-3000:]
    verdicts = json.loads(checked.stdout.splitlines()[-1])
    refused = [f"{where}: exit {verdicts[str(path)][0]}\n{verdicts[str(path)][1][-3000:]}"
               for where, path in laid.items() if verdicts[str(path)][0] != 0]
    assert not refused, "the image's install refuses:\n" + "\n".join(refused)


def test_one_gateway_serves_every_kind_until_ready(image, hms, tmp_path):
    demo = yaml.safe_load((ROOT / "config" / "gateway.yaml").read_text())
    extra = {k: v for k, v in demo.items() if k not in ("listeners", "tls", "topologies_dir")}
    topologies = shipped_topologies(f"thrift://{hms.host}:{hms.port}")
    served = {service["kind"] for topology in topologies.values() for service in topology["services"]}
    assert served == set(KINDS), f"config/topologies lacks the kinds {set(KINDS) - served}"
    # the console script of the image's venv, from its working directory (outside the repository)
    gw = start_gateway(tmp_path / "gw", topologies, DEMO_USERS, gateway_extra=extra, env=image.env,
                       program=[str(image.bin("hms-gateway"))])
    try:
        assert wait_for(lambda: readyz(gw) == 200, timeout=60)
        assert "Thrift translation: c implementation" in gw.log(), "the wheel's C extension is not in use"
    finally:
        gw.stop()


def test_the_runtime_stage_installs_what_built_extensions_link(image):
    """gssapi and krb5 (pyspnego[kerberos]) have no wheels here and build against MIT Kerberos;
    the image's runtime stage must carry the libraries they link (libc6 is in every Debian)."""
    built = locally_built_extensions(image.site_packages)
    assert any("gssapi" in str(path) for path in built) and any("_speedups" in path.name for path in built)
    linked = linked_packages(built)
    runtime = apt_packages(stages(dockerfile.parse_file(str(DOCKERFILE)))[-1])
    lacking = {package: sorted(users) for package, users in linked.items() if package != "libc6" and package not in runtime}
    assert not lacking, f"the runtime stage lacks packages the extensions link against: {lacking}"
