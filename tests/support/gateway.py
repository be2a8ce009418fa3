"""Run the real gateway (``hms-gateway serve``) as a subprocess with a test configuration.

Each gateway gets its own directory with development certificates, an htpasswd file written by
Apache's ``htpasswd -B``, a gateway file and topology files; it binds port 0 and reports the ports
it got (``serve --ports-file``), so no other process can take them first. Tests start gateways
through :class:`GatewayFactory` (the ``gateway_factory`` and ``module_gateway_factory`` fixtures
of ``tests/integration/conftest.py``), which stops each one it started.
"""

from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import sys
import time
import base64
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from gateway.certs import write_dev_certificates
from tests.support.ports import PortInUse, port_holder

SPEC_PATH = "hmshttpthrift/api/hms"


def stop_process(process: subprocess.Popen, grace: float = 10.0) -> None:
    """SIGTERM, then SIGKILL if ``process`` has not exited within ``grace`` seconds."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@dataclass
class RunningGateway:
    port: int
    management_port: int
    ca_file: Path
    workdir: Path
    process: subprocess.Popen

    def url(self, topology: str = "default", path: str = SPEC_PATH) -> str:
        return f"https://localhost:{self.port}/gateway/{topology}/{path}"

    @property
    def management_url(self) -> str:
        return f"http://127.0.0.1:{self.management_port}"

    def ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_file))

    def log(self) -> str:
        return (self.workdir / "gateway.log").read_text(errors="replace")

    def stop(self) -> None:
        stop_process(self.process)


def service(urls: list[str], methods: list[str] | None = None, **upstream) -> dict:
    """A topology's service entry at the spec's path; ``upstream`` adds upstream keys,
    ``methods`` the exposed methods (``options.methods`` of the hms-thrift kind)."""
    svc: dict = {"path": SPEC_PATH, "upstream": {"urls": urls, **upstream}}
    if methods is not None:
        svc["options"] = {"methods": methods}
    return svc


def in_workdir(name: str) -> str:
    """``name`` in the gateway's directory as a topology file names it: relative paths in a
    topology file are resolved against its directory, ``<workdir>/topologies``."""
    return f"../{name}"


#: The users file :func:`start_gateway` writes, as a topology file names it.
USERS_FILE = in_workdir("users.htpasswd")

#: The gateway file's ``tls`` that also asks for client certificates (the ``mtls`` provider)
#: signed by the gateway's development CA; paths relative to the gateway file. Issue a client
#: certificate with ``gateway.certs.write_client_certificate(gw.workdir / "certs", name)``.
MTLS = {"certificate": "certs/server.crt", "private_key": "certs/server.key", "client_ca": "certs/ca.crt"}


def htpasswd_provider() -> dict:
    """A ``providers.authentication`` entry: Basic against the users file :func:`start_gateway`
    writes (the entry a topology gets when it names no providers)."""
    return {"type": "htpasswd", "realm": "HMS Gateway", "users_file": USERS_FILE}


def write_topology(workdir: Path, name: str, topology: dict) -> Path:
    """Write ``topologies/<name>.yaml`` atomically; without providers, :func:`htpasswd_provider`
    is added."""
    topology = {"providers": {"authentication": [htpasswd_provider()]}, **topology}
    path = workdir / "topologies" / f"{name}.yaml"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(yaml.safe_dump(topology))
    tmp.replace(path)  # readers see the old file or the new one, never half of it
    return path


def start_gateway(
    workdir: Path,
    topologies: dict[str, dict],
    users: dict[str, str],
    *,
    gateway_extra: dict | None = None,
    listener: dict | None = None,
    files: Mapping[str, str] | None = None,
    env: Mapping[str, str | None] | None = None,
    timeout: float = 60.0,
    program: Sequence[str] = (sys.executable, "-m", "gateway.cli"),
) -> RunningGateway:
    """Start ``hms-gateway serve`` with ``topologies`` (name → topology mapping) and wait until
    it answers on both listeners. Raises RuntimeError with the gateway's log if it does not.

    ``users`` (user → password) go into the htpasswd file; ``gateway_extra`` are top-level keys
    of the gateway file; ``listener`` extra keys of its HTTPS listener (``listeners.gateway``);
    ``files`` (name → text) are written into ``workdir`` first (name them in a topology with
    :func:`in_workdir`); ``env`` is set in (a value of None: removed from) the gateway's
    environment; ``program`` is the ``hms-gateway`` command (another venv's, for the image's
    install: tests/integration/test_image_install.py).
    """
    workdir.mkdir(parents=True, exist_ok=True)
    for name, text in (files or {}).items():
        (workdir / name).write_text(text)
    certs = write_dev_certificates(workdir / "certs")
    users_file = workdir / "users.htpasswd"
    for i, (user, password) in enumerate(users.items()):
        flags = "-bBc" if i == 0 else "-bB"
        subprocess.run(["htpasswd", flags, "-C", "4", str(users_file), user, password],
                       check=True, capture_output=True)
    topo_dir = workdir / "topologies"
    topo_dir.mkdir(exist_ok=True)
    for name, topo in topologies.items():
        write_topology(workdir, name, topo)
    config = {
        "listeners": {"gateway": {"host": "127.0.0.1", "port": 0, **(listener or {})},
                      "management": {"host": "127.0.0.1", "port": 0}},
        "tls": {"certificate": str(certs.certificate), "private_key": str(certs.private_key)},
        "topologies_dir": str(topo_dir),
        **(gateway_extra or {}),
    }
    (workdir / "gateway.yaml").write_text(yaml.safe_dump(config))
    environment = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    return _serve(workdir, certs.ca_certificate, program,
                  {key: value for key, value in environment.items() if value is not None}, timeout)


def _serve(workdir: Path, ca_file: Path, program: Sequence[str], env: Mapping[str, str] | None,
           timeout: float) -> RunningGateway:
    """``serve --config workdir/gateway.yaml --ports-file workdir/ports.json``; the gateway once
    it answers on both listeners at the ports it reported. Raises :class:`PortInUse` when a
    listener could not bind (the log says which), RuntimeError with the log otherwise."""
    ports_file = workdir / "ports.json"
    ports_file.unlink(missing_ok=True)
    with open(workdir / "gateway.log", "ab") as log:
        proc = subprocess.Popen(
            [*program, "serve", "--config", str(workdir / "gateway.yaml"), "--ports-file", str(ports_file)],
            stdout=log, stderr=subprocess.STDOUT, env=env,
        )
    gw = RunningGateway(0, 0, ca_file, workdir, proc)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            if "Address already in use" in gw.log():
                raise PortInUse(f"gateway in {workdir} could not bind:\n{gw.log()[-2000:]}")
            raise RuntimeError(f"gateway exited with {proc.returncode}:\n{gw.log()}")
        if not gw.port:
            try:
                ports = json.loads(ports_file.read_text())
            except (OSError, ValueError):
                time.sleep(0.05)
                continue
            gw.port, gw.management_port = ports["gateway"], ports["management"]
            _keep_ports(workdir / "gateway.yaml", gw.port, gw.management_port)
        try:
            with urllib.request.urlopen(gw.management_url + "/healthz", timeout=1) as r:
                if r.status == 200:
                    with socket.create_connection(("127.0.0.1", gw.port), timeout=1):
                        return gw
        except OSError:
            time.sleep(0.1)
    gw.stop()
    raise RuntimeError(f"gateway did not start within {timeout} s:\n{gw.log()}")


def _keep_ports(path: Path, port: int, management_port: int) -> None:
    """Write the ports the gateway got into its gateway file (which said 0): a restart from the
    file (:func:`restart`, or a test's own ``serve --config``) comes back on the same ones."""
    config = yaml.safe_load(path.read_text())
    config["listeners"]["gateway"]["port"] = port
    config["listeners"]["management"]["port"] = management_port
    tmp = path.with_suffix(".tmp")
    tmp.write_text(yaml.safe_dump(config))
    tmp.replace(path)


def restart(gw: RunningGateway, timeout: float = 60.0) -> RunningGateway:
    """Stop the gateway and start it again from its gateway file, on the same ports (clients and
    proxies keep its address). A port taken by another process in between is waited for a few
    seconds, then :class:`PortInUse` names the port and its holder."""
    gw.stop()
    for attempt in range(20):
        try:
            return _serve(gw.workdir, gw.ca_file, (sys.executable, "-m", "gateway.cli"), None, timeout)
        except PortInUse:
            if attempt == 19:
                holders = "; ".join(f"{p}: {port_holder(p)}" for p in (gw.port, gw.management_port))
                raise PortInUse(f"gateway in {gw.workdir} could not bind its ports again ({holders})") from None
            time.sleep(0.25)
    raise AssertionError("unreachable")


class GatewayFactory:
    """Starts real gateways, each in a fresh directory, and stops every one it started at
    :meth:`close` (the fixtures call it after the test or the module).

    ``mktemp(name)`` makes a fresh directory (``tmp_path_factory.mktemp``).
    """

    def __init__(self, mktemp: Callable[[str], Path]):
        self._mktemp = mktemp
        self._started: list[RunningGateway] = []

    def __call__(
        self,
        topologies: dict[str, dict] | None = None,
        users: dict[str, str] | None = None,
        *,
        services: list[dict] | None = None,
        workdir: Path | None = None,
        name: str = "gw",
        listener: dict | None = None,
        files: Mapping[str, str] | None = None,
        env: Mapping[str, str | None] | None = None,
        timeout: float = 60.0,
        **gateway_extra,
    ) -> RunningGateway:
        """:func:`start_gateway` with ``topologies``, or with ``services`` as topology
        ``default``; ``users`` default to admin / admin-password; keyword arguments not named
        here are top-level keys of the gateway file (``limits={...}``, ``workers=2``). The
        directory is ``workdir`` or a fresh one called ``name``. Raises RuntimeError with the
        gateway's log when it does not answer within ``timeout`` seconds."""
        if (topologies is None) == (services is None):
            raise TypeError("give topologies or services")
        gw = start_gateway(
            workdir if workdir is not None else self._mktemp(name),
            topologies if topologies is not None else {"default": {"services": services}},
            {"admin": "admin-password"} if users is None else users,
            gateway_extra=gateway_extra, listener=listener, files=files, env=env, timeout=timeout,
        )
        self._started.append(gw)
        return gw

    def restart(self, gw: RunningGateway) -> RunningGateway:
        """:func:`restart`; the new process is stopped with the others."""
        again = restart(gw)
        self._started.append(again)
        return again

    def close(self) -> None:
        """Stop every gateway started here, the last first."""
        while self._started:
            self._started.pop().stop()


def post(gw: RunningGateway, body: bytes | str, *, topology="default", path=None, auth=("admin", "admin-password"),
         method="POST", headers=None):
    """A raw HTTPS request; returns (status, headers, body bytes)."""
    url = gw.url(topology) if path is None else gw.url(topology, path)
    data = body.encode() if isinstance(body, str) else body
    req = urllib.request.Request(url, data=data if method == "POST" else None, method=method)
    req.add_header("Content-Type", "application/vnd.apache.thrift.json")
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    if auth:
        req.add_header("Authorization", "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode())
    try:
        with urllib.request.urlopen(req, context=gw.ssl_context(), timeout=30) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def readyz(gw: RunningGateway) -> int:
    """The HTTP status of the gateway's ``/readyz``."""
    try:
        with urllib.request.urlopen(gw.management_url + "/readyz", timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def wait_for(predicate, timeout: float = 15.0, interval: float = 0.1):
    """``predicate()``'s first true value, polled every ``interval`` s; AssertionError after
    ``timeout`` s (a bound against hanging, not a timing assertion)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError("condition not met in time")


def metric(gw: RunningGateway, name: str, **labels: str) -> float:
    """Sum of the samples ``name`` with ``labels`` on the gateway's ``/metrics``."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(gw.management_url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items())
    )


def upstream_calls(gw: RunningGateway) -> float:
    """Calls the gateway dispatched upstream so far (to prove a request never reached HMS)."""
    return metric(gw, "hms_gateway_upstream_requests_total")


def audit_record(gw: RunningGateway, request_id: str, *, path: Path | None = None,
                 timeout: float = 10.0) -> dict:
    """The audit line of ``request_id`` from ``path``, or from the gateway's log (audit lines on
    stderr) when None. Waits: the gateway writes audit lines in batches (every 0.1 s)."""
    deadline = time.monotonic() + timeout
    while True:
        if path is None:
            text = gw.log()
        else:
            text = path.read_text() if path.exists() else ""
        for line in text.splitlines():
            if line.startswith("{") and request_id in line and '"effective_user"' in line:
                record = json.loads(line)  # every audit line is one JSON object
                if record["request_id"] == request_id:
                    return record
        if time.monotonic() > deadline:
            raise AssertionError(f"no audit line for {request_id} in {path or 'the gateway log'}")
        time.sleep(0.1)
