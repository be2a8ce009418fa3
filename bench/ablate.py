"""Instructions per small call with gateway features switched off one at a time (issue 14).

Finds where the gateway's own work goes without timing anything: each variant starts
``hms-gateway serve`` under ``valgrind --tool=callgrind`` with the named features patched out at
start-up, makes 300 kept-alive ``get_all_databases`` calls through it, and prints the user-space
instructions per call. Instruction counts do not move with the machine's load, so the
differences between variants are what each feature costs (docs/performance.md). Needs valgrind.

    python bench/ablate.py "" audit prom auth,steps

Each argument is one variant: a comma-separated list of features to switch off (``""``: none).
Features: ``audit`` (the audit line), ``reqmetrics`` (request counter and histogram), ``prom``
(every Prometheus update a no-op), ``auth`` (a fixed principal instead of the providers),
``steps`` (identity assertion, service ACL and call steps as bare assignments), ``accounting``
(``AccountedCall``), ``handler`` (client address and request id). The patches replace internals
by name: a variant whose target was renamed fails at start-up rather than measuring nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys
import types
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FEATURES = ("audit", "reqmetrics", "prom", "auth", "steps", "accounting", "handler")


def switch_off(features: set[str]) -> None:
    """Patch the named features out of this process's gateway modules (in the launched gateway)."""
    unknown = features - set(FEATURES)
    if unknown:
        raise SystemExit(f"ablate: unknown features {sorted(unknown)}")
    if "audit" in features:
        from gateway.pipeline.steps import observe
        observe.AuditTrail.on_response = lambda self, event, response, outcome: None
    if "reqmetrics" in features:
        from gateway.pipeline.steps import observe
        observe.RequestMetrics.on_response = lambda self, event, response, outcome: None
    if "prom" in features:
        import prometheus_client.metrics as pm
        pm.Counter.inc = lambda self, amount=1, exemplar=None: None
        pm.Histogram.observe = lambda self, amount, exemplar=None: None
        pm.Gauge.set = lambda self, value: None
    if "auth" in features:
        from gateway.pipeline.steps import authentication
        from gateway.providers.authentication.base import Principal
        principal = Principal(name="bench", provider="htpasswd")

        async def authenticated(self, exchange):
            exchange.principal, exchange.event.user = principal, principal.name
        authentication.Authentication.on_request = authenticated
    if "steps" in features:
        from gateway.hms_thrift.steps import exposure, ownership, ugi_claim
        from gateway.pipeline.steps import identity_assertion, service_acl
        from gateway.providers.identity import Identity

        def identity(self, exchange):
            p = exchange.principal
            exchange.identity = Identity(user=p.name, principal=p, groups=frozenset())
            exchange.event.effective_user = p.name
        identity_assertion.IdentityAssertion.on_request = identity
        service_acl.ServiceAcl.on_request = lambda self, exchange: None
        for step in (exposure.MethodExposure, ownership.OwnershipAssertion, ugi_claim.UgiClaim):
            step.on_call = lambda self, exchange: None
    if "accounting" in features:
        from gateway.upstream import pool

        class Unaccounted:
            def __init__(self, *args): pass
            def __enter__(self): pass
            def __exit__(self, *exc): return False
        pool.AccountedCall = Unaccounted
    if "handler" in features:
        from gateway import handler
        from gateway.observability.audit import AuditEvent
        handler.audit_event = lambda request: AuditEvent("request-id", "127.0.0.1")
        handler.ClientAddresses.__call__ = lambda self, request: "127.0.0.1"


def launch() -> None:
    """``ablate.py --launch -m gateway.cli serve ...``: the gateway with $ABLATE switched off."""
    sys.path.insert(0, str(REPO))
    switch_off(set(filter(None, os.environ.get("ABLATE", "").split(","))))
    sys.argv = ["hms-gateway", *sys.argv[4:]]
    from gateway.cli import main
    main()


def main(variants: list[str]) -> int:
    sys.path.insert(0, str(REPO))
    import tests.support.gateway as support_gateway
    from bench.clients import Gateway
    from bench.cpu_ab import CALLS, instructions
    from bench.harness import Bench
    from tests.support.big_table import create_partitioned_table

    for variant in variants:  # refuse a misspelt feature before the minute HMS takes to start
        unknown = set(filter(None, variant.split(","))) - set(FEATURES)
        if unknown:
            raise SystemExit(f"ablate: unknown features {sorted(unknown)}")
    real = subprocess
    with Bench("ablate") as bench:
        work = bench.work
        create_partitioned_table(bench.hms.uri, "benchdb", "parts5k", 10)
        for variant in variants:
            side = variant.replace(",", "+") or "none"

            def popen(args, _variant=variant, _side=side, **kw):
                kw["env"] = {**kw.get("env", os.environ), "ABLATE": _variant}
                return real.Popen(["valgrind", "--tool=callgrind", "--instr-atstart=no",
                                   f"--callgrind-out-file={work}/callgrind-{_side}.out",
                                   args[0], str(Path(__file__).resolve()), "--launch", *args[1:]], **kw)
            support_gateway.subprocess = types.SimpleNamespace(
                Popen=popen, run=real.run, STDOUT=real.STDOUT, TimeoutExpired=real.TimeoutExpired)
            try:
                gw = bench.gateway(services=[bench.service(timeout_seconds=300, pool_size=32)], name=side,
                                   timeout=900)
            finally:
                support_gateway.subprocess = real
            try:
                client = Gateway(gw)
                for _ in range(30):
                    client.call(CALLS["get_all_databases"])
                client.close()
                per_call = instructions(gw, side, CALLS["get_all_databases"], 300, work, "ablate")
                print(f"{side:40s} {per_call / 1e3:7.1f} k instructions per get_all_databases", flush=True)
            finally:
                gw.stop()  # one variant under callgrind at a time
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--launch"]:
        launch()
    else:
        sys.exit(main(sys.argv[1:] or [""]))
