"""The ``hms-gateway`` console script: ``serve``, ``certs``, ``check-config``, ``demo``."""

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
            print(f"ok: /gateway/{name}/{service.path} -> {', '.join(service.upstream.urls)}")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from gateway.observability.log_format import configure_logging
    from gateway.server import Gateway, run

    config, topologies = _check(args.config)
    configure_logging(config.logging.format, args.log_level or config.logging.level)
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
