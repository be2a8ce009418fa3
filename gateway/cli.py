"""The ``hms-gateway`` console script: ``serve``, ``certs``, ``check-config``, ``demo``, ``policy check``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gateway.config import ConfigError, GatewayConfig, TopologyConfig, load_gateway_config, load_topologies

DEFAULT_CONFIG = Path("config/gateway.yaml")


def _load(path: Path) -> tuple[GatewayConfig, dict[str, TopologyConfig]]:
    config = load_gateway_config(path)
    return config, load_topologies(config.topologies_dir)


def _check(path: Path) -> tuple[GatewayConfig, dict[str, TopologyConfig]]:
    """Everything ``serve`` validates before binding: files, topologies, TLS material."""
    from gateway.tls import server_ssl_context
    from gateway.topology import build_topology

    config, topologies = _load(path)
    server_ssl_context(config.tls)
    for topology in topologies.values():
        build_topology(topology, config)  # what only the whole configuration can tell
    return config, topologies


def cmd_check_config(args: argparse.Namespace) -> int:
    config, topologies = _check(args.config)
    for name, topology in topologies.items():
        for service in topology.services:
            target = ", ".join(service.upstream.urls) if service.upstream else service.kind
            print(f"ok: /gateway/{name}/{service.path} -> {target}")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from gateway.observability.log_format import configure_logging
    from gateway.server import Gateway, run

    config, topologies = _check(args.config)
    configure_logging(config.logging.format, args.log_level or config.logging.level)
    from gateway.workers import supervise, worker_count

    if worker_count(config) > 1:
        return supervise(args.config, config, args.log_level)
    run(Gateway(config, topologies))
    return 0


def cmd_certs(args: argparse.Namespace) -> int:
    from gateway.certs import write_client_certificate, write_dev_certificates

    paths = write_dev_certificates(args.out, args.hostname)
    print(f"wrote {paths.certificate} and {paths.private_key} (CA: {paths.ca_certificate})")
    for name in args.client:
        cert, key = write_client_certificate(args.out, name)
        print(f"wrote client certificate {cert} and {key} (CN={name})")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from gateway.demo.launcher import run_demo

    return run_demo(args.config, workdir=args.workdir, hms_port=args.hms_port)


def cmd_policy_check(args: argparse.Namespace) -> int:
    """Prints the decision and the deciding policy id (-1: none); exit 0 allowed, 1 denied."""
    from gateway.policy import Resource, load_policy_file

    config, topologies = _load(args.config)
    topology = topologies.get(args.topology)
    if topology is None:
        raise ConfigError(config.topologies_dir, "--topology", f"no topology {args.topology!r}")
    attached = [s for s in topology.services if s.policy_file is not None]
    if args.service is not None:
        attached = [s for s in attached if s.path == args.service.strip("/")]
    if len(attached) != 1:
        reason = ("no service with a policy_file" if not attached
                  else "several services have a policy_file: name one with --service")
        raise ConfigError(topology.source or topology.name, "--service", reason)
    engine = load_policy_file(attached[0].policy_file)
    groups = [g for g in (args.groups or "").split(",") if g]
    try:
        decision = engine.evaluate(args.user, groups, Resource(args.database, args.table, args.column), args.access)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    verdict = "allowed" if decision.allowed else "denied"
    name = f" ({decision.policy_name})" if decision.policy_name else ""
    print(f"{verdict} policy={decision.policy_id}{name}")
    return 0 if decision.allowed else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="hms-gateway", description="Authenticating HTTPS gateway for the Hive Metastore."
    )
    parser.add_argument(
        "--log-level", help="DEBUG, INFO, WARNING or ERROR (default: the gateway file's logging.level)"
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("serve", help="serve the gateway")
    p.add_argument("--config", type=Path, default=DEFAULT_CONFIG)
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("check-config", help="validate the configuration and exit")
    p.add_argument("--config", type=Path, default=DEFAULT_CONFIG)
    p.set_defaults(func=cmd_check_config)

    p = sub.add_parser("certs", help="write a development CA and server certificate")
    p.add_argument("--out", type=Path, default=Path("certs"))
    p.add_argument("--hostname", action="append", default=[], help="extra SAN (repeatable)")
    p.add_argument("--client", action="append", default=[], metavar="NAME",
                   help="also issue a client certificate CN=NAME for mTLS (repeatable)")
    p.set_defaults(func=cmd_certs)

    p = sub.add_parser("demo", help="embedded HMS + PySpark sample data + the gateway")
    p.add_argument("--config", type=Path, default=DEFAULT_CONFIG)
    p.add_argument("--workdir", type=Path, default=Path("var/demo"))
    p.add_argument("--hms-port", type=int, default=9083)
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("tunnel", help="local binary-Thrift listener forwarding to the gateway over HTTPS")
    from gateway.tunnel import add_arguments as tunnel_arguments, cmd_tunnel

    tunnel_arguments(p)
    p.set_defaults(func=cmd_tunnel)

    p = sub.add_parser("policy", help="catalog policies (Apache Ranger's Hive model)")
    policy_sub = p.add_subparsers(dest="policy_command", required=True)
    p = policy_sub.add_parser("check", help="which policy allows or denies an access, and why")
    p.add_argument("--config", type=Path, default=DEFAULT_CONFIG)
    p.add_argument("--topology", required=True)
    p.add_argument("--service", help="service path (needed when several services have a policy_file)")
    p.add_argument("--user", required=True)
    p.add_argument("--groups", default="", help="comma-separated groups")
    p.add_argument("--database", required=True)
    p.add_argument("--table")
    p.add_argument("--column")
    p.add_argument("--access", default="_any",
                   help="select update create drop alter index lock read write all, or _any (default)")
    p.set_defaults(func=cmd_policy_check)

    args = parser.parse_args(argv)
    from gateway.observability.log_format import configure_logging

    configure_logging("text", args.log_level or "INFO")  # until a gateway file says otherwise
    try:
        return args.func(args)
    except ConfigError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
