"""Memory and start-up of the real gateway (issue 41): the RSS of ``hms-gateway serve`` and of
each worker, idle and after a few requests of each kind, against bounds.

Starts one Hive Metastore (Derby, from PySpark's jars) and, in turn, the real gateway
(``hms-gateway serve``, a subprocess, :mod:`tests.support.gateway`) on two sets of topologies:

* ``demo``: the demo's topologies (``--topologies``, default ``config/topologies``, what
  ``make run`` serves: hms-thrift, glue, event-stream, explorer, iceberg-rest), each upstream
  pointed at this HMS, the users file at the bench's own (admin), the token key and AWS secrets
  the demo puts in the environment made up here;
* ``iceberg``: one ``iceberg-rest`` service;
* ``thrift``: one ``hms-thrift`` service (the spec's path).

Each runs with ``workers: 1`` (``serve`` serves itself) and ``workers: 2`` (a supervisor and two
worker processes; ``--workers`` picks). For each process: the time from the ``serve`` command to
ready (``/healthz`` and the port answering), the RSS (``psutil`` when installed, else
``VmRSS`` of ``/proc/<pid>/status``) once idle (``--settle`` seconds after ready), and again
after ``--rounds`` rounds of requests of each kind the topologies serve (Thrift TJSON calls,
Glue ``GetDatabases``, a change-feed long poll, the explorer's page, Iceberg REST config,
namespace and table create, load and list, an append through PyIceberg's ``RestCatalog`` (a
commit: the gateway reads and writes metadata files) and a server-side scan plan (the gateway
reads the manifest list and manifests); the first Iceberg request imports PyIceberg).

Bounds (issue 41): a process serving the ``iceberg-rest`` kind (``iceberg``, ``demo``) idles at
≤ 150 MiB, a Thrift-only one at ≤ 90 MiB, before and after it has served (``--settle`` seconds
after the last request). Prints a table and whether each bound is met; exits 1 when one is
not. ``--markdown PATH`` also writes the table as Markdown (docs/performance.md, "Memory and
start-up").
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import secrets
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.clients import tjson_message  # noqa: E402
from bench.harness import Bench, load, machine  # noqa: E402
from tests.support.gateway import SPEC_PATH, RunningGateway, in_workdir  # noqa: E402
from tests.support.iceberg.clients import rest_catalog  # noqa: E402

MIB = 1024 * 1024
USER, PASSWORD = "admin", "admin-password"
#: Idle RSS bounds (MiB) of a process serving the kind (issue 41).
ICEBERG_BOUND, THRIFT_BOUND = 150, 90
#: The variables the demo's topologies read (demo/tokens.py and demo/aws_keys.py set them).
TOKEN_KEY_ENV, AWS_ENV = "HMS_GATEWAY_TOKEN_KEY", "HMS_GATEWAY_DEMO_AWS_CREDENTIALS"


def rss_mib(pid: int) -> float:
    """The resident set size of process ``pid`` in MiB."""
    try:
        import psutil
    except ImportError:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError(f"no VmRSS for process {pid}") from None
    return psutil.Process(pid).memory_info().rss / MIB


def children(pid: int) -> list[int]:
    """The child processes of ``pid`` (Linux: ``/proc/<pid>/task/*/children``)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return sorted(found)


def demo_topologies(source: Path, upstream: str) -> dict[str, dict]:
    """The topologies of ``source`` (``<name>.yaml`` files), each service's upstream at
    ``upstream`` and each ``users_file`` the bench gateway's own."""
    topologies = {}
    for path in sorted(source.glob("*.yaml")):
        topology = yaml.safe_load(path.read_text())
        for provider in topology.get("providers", {}).get("authentication", []):
            if "users_file" in provider:
                provider["users_file"] = in_workdir("users.htpasswd")
        for svc in topology.get("services", []):
            if "upstream" in svc:
                svc["upstream"]["urls"] = [upstream]
        topologies[path.stem] = topology
    return topologies


def demo_environment() -> dict[str, str]:
    """Made-up values of the variables the demo's topologies name (never printed)."""
    credentials = "".join(f"[{user}]\naws_access_key_id = {key}\naws_secret_access_key = {secrets.token_urlsafe(30)}\n\n"
                          for user, key in (("admin", "AKIAHMSGATEWAYADMIN1"), ("etl", "AKIAHMSGATEWAYETL001")))
    return {TOKEN_KEY_ENV: secrets.token_urlsafe(64), AWS_ENV: credentials}


class Client:
    """HTTPS requests to one gateway as :data:`USER`, their statuses kept by label; a 500
    (the gateway failing, never a protocol's answer) stops the bench."""

    def __init__(self, gw: RunningGateway):
        self.gw, self.context = gw, gw.ssl_context()
        self.auth = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
        self.statuses: dict[str, list[int]] = {}

    def __call__(self, label: str, topology: str, path: str, body: bytes | None = None,
                 headers: dict[str, str] | None = None, method: str | None = None) -> bytes:
        request = urllib.request.Request(self.gw.url(topology, path), data=body, method=method,
                                         headers={"Authorization": self.auth, **(headers or {})})
        try:
            with urllib.request.urlopen(request, context=self.context, timeout=60) as reply:
                status, data = reply.status, reply.read()
        except urllib.error.HTTPError as error:
            status, data = error.code, error.read()
        self.statuses.setdefault(label, []).append(status)
        if status == 500:
            raise RuntimeError(f"{label}: {status} {data[:300]!r}")
        return data


def thrift_requests(call: Client, topology: str, path: str) -> None:
    tjson = {"Content-Type": "application/vnd.apache.thrift.json"}
    call("thrift get_all_databases", topology, path, tjson_message("get_all_databases", "{}", 1), tjson)
    call("thrift get_all_tables", topology, path,
         tjson_message("get_all_tables", '{"1":{"str":"default"}}', 2), tjson)


def iceberg_requests(call: Client, round_: str) -> None:
    """Iceberg REST requests to the ``iceberg`` service of topology ``default``: config, a
    namespace and a table made (metadata files written), loaded and listed, two rows appended
    (PyIceberg writes the data file and manifests, the gateway commits) and a scan planned by
    the gateway (``round_`` names the namespace: each round of each run makes its own)."""
    ice, js = "iceberg/v1", {"Content-Type": "application/json"}
    call("iceberg config", "default", f"{ice}/config")
    namespace = f"bench_memory_{round_}"
    call("iceberg create namespace", "default", f"{ice}/namespaces",
         json.dumps({"namespace": [namespace]}).encode(), js)
    schema = {"type": "struct", "schema-id": 0,
              "fields": [{"id": 1, "name": "id", "required": False, "type": "long"},
                         {"id": 2, "name": "name", "required": False, "type": "string"}]}
    call("iceberg create table", "default", f"{ice}/namespaces/{namespace}/tables",
         json.dumps({"name": "t", "schema": schema}).encode(), js)
    call("iceberg load table", "default", f"{ice}/namespaces/{namespace}/tables/t")
    call("iceberg list tables", "default", f"{ice}/namespaces/{namespace}/tables")
    import pyarrow as pa  # the client's (PyIceberg writes the data file), in this process only

    # requests takes REQUESTS_CA_BUNDLE/CURL_CA_BUNDLE over the catalog's ssl.cabundle
    trust = {"REQUESTS_CA_BUNDLE": str(call.gw.ca_file), "CURL_CA_BUNDLE": str(call.gw.ca_file)}
    with mock.patch.dict(os.environ, trust):
        catalog = rest_catalog(call.gw, user=USER, password=PASSWORD, validate=False)
        catalog.load_table((namespace, "t")).append(pa.table({"id": pa.array([1, 2], pa.int64()),
                                                             "name": pa.array(["a", "b"], pa.string())}))
    call.statuses.setdefault("iceberg append (PyIceberg)", []).append(200)
    plan = json.loads(call("iceberg plan table scan", "default", f"{ice}/namespaces/{namespace}/tables/t/plan",
                           b"{}", js))
    if len(plan.get("file-scan-tasks", [])) != 1:
        raise RuntimeError(f"the scan plan of {namespace}.t has no task for the appended file: {plan}")


def demo_requests(call: Client, round_: str) -> None:
    """One round of requests of every kind the demo's topologies serve."""
    thrift_requests(call, "default", "hmshttpthrift/api/hms")
    call("glue GetDatabases", "glue", "api", b"{}",
         {"X-Amz-Target": "AWSGlue.GetDatabases", "Content-Type": "application/x-amz-json-1.1"})
    call("events long poll", "default", "events?after=0&limit=10")
    call("explorer page", "catalog", "explorer")
    iceberg_requests(call, round_)


@dataclass
class Run:
    """One gateway's figures: topology set, workers, seconds to ready, and per process
    (``serve``, ``supervisor``, ``worker 1``...) the idle and after-requests RSS (MiB)."""

    topologies: str
    workers: int
    ready_seconds: float
    idle: dict[str, float] = field(default_factory=dict)
    after: dict[str, float] = field(default_factory=dict)
    statuses: dict[str, list[int]] = field(default_factory=dict)

    def bound(self, process: str) -> int | None:
        """The bound of ``process``, idle and after requests: the serving processes only (a
        supervisor serves nothing)."""
        if process == "supervisor":
            return None
        return THRIFT_BOUND if self.topologies == "thrift" else ICEBERG_BOUND


def processes(gw: RunningGateway, workers: int, timeout: float = 60.0) -> dict[str, int]:
    """Process name → pid: ``serve`` alone, or the supervisor and its ``workers`` workers
    (waited for: the supervisor is ready once one worker is)."""
    pid = gw.process.pid
    if workers == 1:
        return {"serve": pid}
    deadline = time.monotonic() + timeout
    while len(found := children(pid)) < workers:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(found)} of {workers} workers started:\n{gw.log()[-2000:]}")
        time.sleep(0.1)
    return {"supervisor": pid, **{f"worker {i}": child for i, child in enumerate(found, 1)}}


def measure(bench: Bench, name: str, topologies: dict[str, dict], requests, workers: int,
            settle: float, rounds: int, env: dict[str, str] | None = None) -> Run:
    started = time.monotonic()
    gw = bench.gateway(topologies, {USER: PASSWORD}, name=f"{name}-{workers}", env=env,
                       **({"workers": workers} if workers > 1 else {}))
    ready = time.monotonic() - started
    pids = processes(gw, workers)
    bench.say(f"{name}, workers {workers}: ready in {ready:.1f} s; idle {settle:.0f} s")
    time.sleep(settle)
    run = Run(name, workers, ready, idle={p: rss_mib(pid) for p, pid in pids.items()})
    call = Client(gw)
    for round_ in range(rounds):
        # with workers, the kernel spreads connections over them (SO_REUSEPORT): each round
        # opens new ones
        requests(call, f"{name}_{workers}_{round_}")
    time.sleep(settle)
    run.after = {p: rss_mib(pid) for p, pid in pids.items()}
    run.statuses = call.statuses
    gw.stop()
    return run


def table(runs: list[Run]) -> list[str]:
    lines = ["| topologies | workers | process | ready (s) | idle (MiB) | after requests (MiB) | bound |",
             "|---|---|---|---|---|---|---|"]
    for run in runs:
        for process, idle in run.idle.items():
            bound = run.bound(process)
            met = bound is not None and max(idle, run.after[process]) <= bound
            verdict = "" if bound is None else f"≤ {bound}: {'met' if met else 'NOT met'}"
            lines.append(f"| {run.topologies} | {run.workers} | {process} | {run.ready_seconds:.1f} | "
                         f"{idle:.0f} | {run.after[process]:.0f} | {verdict} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topologies", type=Path, default=REPO / "config" / "topologies",
                        help="the demo's topologies directory (default: config/topologies)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="worker counts to run (default: 1 2)")
    parser.add_argument("--settle", type=float, default=10.0, help="seconds idle before each sample (default 10)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of requests of each kind (default 3)")
    parser.add_argument("--markdown", type=Path, help="also write the table here")
    args = parser.parse_args(argv)

    runs: list[Run] = []
    with Bench("memory", keep_work=False) as bench:
        demo = demo_topologies(args.topologies, bench.upstream)
        thrift = {"default": {"services": [bench.service()]}}
        iceberg = {"default": {"services": [{"kind": "iceberg-rest", "path": "iceberg",
                                             "upstream": {"urls": [bench.upstream]}}]}}
        env = demo_environment()
        for workers in args.workers:
            runs.append(measure(bench, "thrift", thrift, lambda call, _: thrift_requests(call, "default", SPEC_PATH),
                                workers, args.settle, args.rounds))
            runs.append(measure(bench, "iceberg", iceberg, iceberg_requests, workers, args.settle, args.rounds))
            runs.append(measure(bench, "demo", demo, demo_requests, workers, args.settle, args.rounds, env))
    info = machine()
    head = [f"{info['date']}, {info['cpus']} CPUs ({info['cpu']}), Python {info['python']}, "
            f"load {load()}; HMS on the same machine.", ""]
    lines = head + table(runs)
    print("\n".join(lines))
    for run in runs:
        print(f"{run.topologies}, workers {run.workers}: " + ", ".join(
            f"{label} {sorted(set(statuses))}" for label, statuses in run.statuses.items()))
    if args.markdown:
        args.markdown.write_text("\n".join(lines) + "\n")
    failed = [f"{run.topologies}/{run.workers}/{process}" for run in runs for process, idle in run.idle.items()
              if (bound := run.bound(process)) is not None and max(idle, run.after[process]) > bound]
    print("bounds met" if not failed else "bounds NOT met: " + ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
